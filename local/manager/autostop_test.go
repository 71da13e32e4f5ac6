package manager

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// The reaper ticks once an interval minute. These tests move the fake clock
// a minute at a time and then run a reaper round themselves, so that a tick
// the loop has not consumed yet cannot make them flaky; TestReaperTicks
// covers the loop.

func (h *harness) tick(minutes int) {
	for i := 0; i < minutes; i++ {
		h.clk.Advance(time.Minute)
		h.m.reapIdle()
	}
}

func TestReaperTicks(t *testing.T) {
	h := newHarness(t)
	h.create(provider.CreateRequest{ID: "t", AutoStopInterval: ptr(1)})
	h.clk.Advance(time.Minute)
	h.settled("t", provider.StateStopped)
}

func (h *harness) settled(id string, want provider.State) {
	h.t.Helper()
	h.eventually(func() bool { return h.get(id).State == want }, string(want))
}

func TestAutoStop(t *testing.T) {
	ctx := context.Background()
	t.Run("idle sandbox stops with the auto-stop reason", func(t *testing.T) {
		h := newHarness(t)
		h.create(provider.CreateRequest{ID: "idle", AutoStopInterval: ptr(3)})
		h.tick(2)
		assert.Equal(t, provider.StateStarted, h.get("idle").State)
		h.tick(1)
		h.settled("idle", provider.StateStopped)
		assert.Equal(t, provider.ErrorReasonAutoStopped, h.get("idle").ErrorReason)
	})
	t.Run("refresh resets the idle clock", func(t *testing.T) {
		h := newHarness(t)
		h.create(provider.CreateRequest{ID: "busy", AutoStopInterval: ptr(3)})
		for i := 0; i < 10; i++ {
			h.tick(2)
			require.NoError(t, h.m.RefreshActivity(ctx, "busy"))
		}
		assert.Equal(t, provider.StateStarted, h.get("busy").State)
		h.tick(3)
		h.settled("busy", provider.StateStopped)
	})
	t.Run("reads are not activity", func(t *testing.T) {
		h := newHarness(t)
		h.create(provider.CreateRequest{ID: "read", AutoStopInterval: ptr(2)})
		for i := 0; i < 2; i++ {
			h.get("read")
			h.m.List(ctx, Filter{})
			_, _ = h.m.EntrypointLogs(ctx, "read")
			_, _ = h.m.PreviewURL(ctx, "read", 0)
			h.tick(1)
		}
		h.settled("read", provider.StateStopped)
	})
	t.Run("a busy sandbox nobody refreshes stops on schedule", func(t *testing.T) {
		h := newHarness(t)
		h.create(provider.CreateRequest{ID: "unreported", AutoStopInterval: ptr(1)})
		h.rt.SetLogs(h.handle("unreported"), "working hard\n")
		h.tick(1)
		h.settled("unreported", provider.StateStopped)
	})
	t.Run("zero disables", func(t *testing.T) {
		h := newHarness(t)
		h.create(provider.CreateRequest{ID: "forever", AutoStopInterval: ptr(0)})
		h.tick(60 * 24)
		assert.Equal(t, provider.StateStarted, h.get("forever").State)
	})
	t.Run("daemon default applies", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.AutoStopMinutes = ptr(2) })
		s := h.create(provider.CreateRequest{ID: "d"})
		assert.Equal(t, 2, s.AutoStopInterval)
		h.tick(2)
		h.settled("d", provider.StateStopped)
	})
	t.Run("shortening the interval does not reset the clock", func(t *testing.T) {
		h := newHarness(t)
		h.create(provider.CreateRequest{ID: "short", AutoStopInterval: ptr(30)})
		h.tick(5)
		s, err := h.m.SetAutoStopInterval(ctx, "short", 3)
		require.NoError(t, err)
		assert.Equal(t, 3, s.AutoStopInterval)
		h.tick(1)
		h.settled("short", provider.StateStopped)
	})
	t.Run("a restarted sandbox counts from its start", func(t *testing.T) {
		h := newHarness(t)
		h.create(provider.CreateRequest{ID: "r", AutoStopInterval: ptr(2)})
		h.tick(2)
		h.settled("r", provider.StateStopped)
		_, err := h.m.Start(ctx, "r")
		require.NoError(t, err)
		h.tick(1)
		assert.Equal(t, provider.StateStarted, h.get("r").State)
		h.tick(1)
		h.settled("r", provider.StateStopped)
	})
}

func TestSetAutoStopIntervalValidates(t *testing.T) {
	h := newHarness(t)
	h.create(provider.CreateRequest{ID: "v"})
	_, err := h.m.SetAutoStopInterval(context.Background(), "v", -5)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
}

// Clients spell "practically never" with a large interval; the interval in
// nanoseconds must not overflow into a negative that stops at once.
func TestHugeAutoStopIntervalNeverOverflows(t *testing.T) {
	for _, minutes := range []int{math.MaxInt32, math.MaxInt64} {
		t.Run(strconv.Itoa(minutes), func(t *testing.T) {
			h := newHarness(t)
			h.create(provider.CreateRequest{ID: "long", AutoStopInterval: ptr(minutes)})
			h.tick(2)
			assert.Equal(t, provider.StateStarted, h.get("long").State)
		})
	}
}

// hookClock is a fake clock that runs a hook inside its at-th Now call.
type hookClock struct {
	*clocktest.Fake
	calls atomic.Int32
	at    int32
	hook  atomic.Pointer[func()]
}

func (c *hookClock) Now() time.Time {
	if f := c.hook.Load(); f != nil && c.calls.Add(1) == c.at {
		c.hook.Store(nil)
		(*f)()
	}
	return c.Fake.Now()
}

// A refresh answered between the auto-stop's look at an idle sandbox and
// the record of its stop counts: the sandbox keeps running.
func TestARefreshDuringTheAutoStopsCheckKeepsTheSandbox(t *testing.T) {
	ctx := context.Background()
	hc := &hookClock{Fake: clocktest.NewFake(time.Time{}), at: 2}
	h := newHarness(t, func(o *Options) { o.Clock = hc; o.ReapInterval = 1000 * time.Hour })
	h.clk = hc.Fake
	h.create(provider.CreateRequest{ID: "busy", AutoStopInterval: ptr(1)})
	h.clk.Advance(time.Minute)
	var fired bool
	var refreshErr error
	f := func() {
		// The auto-stop's own Now, with the manager's lock held and the
		// idle record read: the refresh comes in right there.
		fired = true
		h.m.mu.Unlock()
		refreshErr = h.m.RefreshActivity(ctx, "busy")
		h.m.mu.Lock()
	}
	hc.hook.Store(&f)
	h.m.reapIdle() // Now #1: the sweep's, #2: the auto-stop's look
	require.True(t, fired, "the refresh never came in during the auto-stop's look")
	require.NoError(t, refreshErr, "the refresh was answered")
	s := h.get("busy")
	assert.Equal(t, provider.StateStarted, s.State, "stopped although refreshed: %s", s.ErrorReason)
	assert.Equal(t, h.clk.Now(), s.LastActivityAt)
}

func TestAutoDelete(t *testing.T) {
	ctx := context.Background()
	exists := func(h *harness, id string) bool {
		_, err := h.m.Get(ctx, id)
		return err == nil
	}
	tests := []struct {
		name     string
		interval *int
		// before is what happens between the stop and the ticks.
		before      func(h *harness)
		ticks       int
		wantDeleted bool
	}{
		{"never by default", nil, nil, 60, false},
		{"-1 never", ptr(-1), nil, 60, false},
		{"0 at the first look after the stop", ptr(0), nil, 1, true},
		{"after its minutes stopped", ptr(3), nil, 3, true},
		{"not before", ptr(3), nil, 2, false},
		{"a refresh while stopped postpones it", ptr(3), func(h *harness) {
			h.tick(2)
			require.NoError(t, h.m.RefreshActivity(ctx, "s"))
		}, 2, false},
		{"a start saves it", ptr(3), func(h *harness) {
			h.tick(2)
			_, err := h.m.Start(ctx, "s")
			require.NoError(t, err)
		}, 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			sb := h.create(provider.CreateRequest{Name: "s", AutoStopInterval: ptr(0), AutoDeleteInterval: tt.interval})
			want := -1
			if tt.interval != nil {
				want = *tt.interval
			}
			assert.Equal(t, want, sb.AutoDeleteInterval)
			h.tick(10)
			require.True(t, exists(h, "s"), "a started sandbox is never auto-deleted")
			_, err := h.m.Stop(ctx, "s")
			require.NoError(t, err)
			if tt.before != nil {
				tt.before(h)
			}
			h.tick(tt.ticks)
			assert.Equal(t, tt.wantDeleted, !exists(h, "s"))
		})
	}
}
