package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

// Only a terminal answer forgets a parked sandbox; a transient one keeps it
// for the next try.
func TestReconnectFailuresAreClassified(t *testing.T) {
	transient := []struct {
		name string
		err  error
	}{
		{"timeout", provider.Errorf(provider.Unavailable, "context deadline exceeded")},
		{"5xx", provider.Errorf(provider.Internal, "502 bad gateway")},
		{"429", provider.Errorf(provider.ResourceExhausted, "too many requests")},
		{"mid-transition", provider.Errorf(provider.FailedPrecondition, "Sandbox state change in progress")},
	}
	for _, tt := range transient {
		for _, parked := range []string{"running", "stopped"} {
			t.Run(tt.name+"/"+parked, func(t *testing.T) {
				h := newHarness(t)
				l := h.acquire("conv")
				h.release(l, OutcomeOK)
				if parked == "stopped" {
					h.advance(time.Minute)
				}
				before, _ := h.record("conv")
				h.f.FailNext(pooltest.OpGet, tt.err)
				_, err := h.p.Acquire(h.ctx, "conv", testSpec)
				require.Error(t, err)
				assert.Equal(t, provider.Code(tt.err), provider.Code(err), "the provider's code is kept: %v", err)
				after, ok := h.record("conv")
				assert.True(t, ok, "kept")
				assert.Equal(t, before, after, "untouched")
				assert.NotEmpty(t, h.state(l.Sandbox.ID))

				again := h.acquire("conv")
				assert.Equal(t, l.Sandbox.ID, again.Sandbox.ID, "the retry reuses it")
				assert.Equal(t, 1, h.f.Created())
				h.release(again, OutcomeOK)
			})
		}
	}

	terminal := []struct {
		name    string
		break_  func(h *harness, id string)
		reason  Reason
		deleted bool
	}{
		{"not found", func(h *harness, id string) { h.f.Vanish(id) }, ReasonProviderLost, false},
		{"destroyed", func(h *harness, id string) { h.f.SetState(id, provider.StateDestroyed, "") }, ReasonProviderLost, false},
		{"error", func(h *harness, id string) { h.f.SetState(id, provider.StateError, "disk full") }, ReasonProviderLost, true},
	}
	for _, tt := range terminal {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			l := h.acquire("conv")
			h.release(l, OutcomeOK)
			tt.break_(h, l.Sandbox.ID)
			next := h.acquire("conv")
			assert.Equal(t, PathCreated, next.Path)
			assert.NotEqual(t, l.Sandbox.ID, next.Sandbox.ID)
			assert.Equal(t, 1, h.teardowns(tt.reason))
			assert.Contains(t, []provider.State{"", provider.StateDestroyed}, h.state(l.Sandbox.ID), "nothing of it runs")
			deletes := 0
			for _, c := range h.f.Calls(pooltest.OpDelete) {
				if c.ID == l.Sandbox.ID {
					deletes++
				}
			}
			assert.Equal(t, tt.deleted, deletes > 0, "an errored sandbox is deleted; a gone one only forgotten")
			assert.Equal(t, 1, h.p.Stats().Running, "the lost one's slot was given back")
			h.release(next, OutcomeOK)
		})
	}
}

// A transient failure to start or to reset the idle clock keeps the
// sandbox too.
func TestTransientStartAndRefreshFailuresKeep(t *testing.T) {
	t.Run("start", func(t *testing.T) {
		h := newHarness(t, WithKeepWarm(0))
		l := h.acquire("conv")
		h.release(l, OutcomeOK)
		h.f.FailNext(pooltest.OpStart, provider.Errorf(provider.Unavailable, "timeout"))
		_, err := h.p.Acquire(h.ctx, "conv", testSpec)
		assert.Equal(t, provider.Unavailable, provider.Code(err))
		h.settle()
		assert.Zero(t, h.p.Stats().Running, "its slot is back once it is known stopped")
		again := h.acquire("conv")
		assert.Equal(t, PathResumed, again.Path)
		assert.Equal(t, l.Sandbox.ID, again.Sandbox.ID)
		h.release(again, OutcomeOK)
	})
	t.Run("refresh", func(t *testing.T) {
		h := newHarness(t)
		l := h.acquire("conv")
		h.release(l, OutcomeOK)
		h.f.FailNext(pooltest.OpRefresh, provider.Errorf(provider.ResourceExhausted, "429"))
		_, err := h.p.Acquire(h.ctx, "conv", testSpec)
		assert.Equal(t, provider.ResourceExhausted, provider.Code(err))
		assert.Equal(t, 1, h.p.Stats().Warm, "still parked running")
		h.advance(time.Minute)
		assert.Equal(t, provider.StateStopped, h.state(l.Sandbox.ID), "its keep-warm TTL still applies")
	})
	t.Run("start failed for good", func(t *testing.T) {
		h := newHarness(t, WithKeepWarm(0))
		l := h.acquire("conv")
		h.release(l, OutcomeOK)
		h.f.FailNext(pooltest.OpStart, provider.Errorf(provider.CreateFailed, "the workload did not come up"))
		next := h.acquire("conv")
		assert.Equal(t, PathCreated, next.Path)
		assert.Empty(t, h.state(l.Sandbox.ID))
		assert.Equal(t, 1, h.teardowns(ReasonProviderLost))
		h.release(next, OutcomeOK)
	})
}

// A parked sandbox caught mid-transition is waited for, not given up on.
func TestMidTransitionIsWaitedOut(t *testing.T) {
	h := newHarness(t, WithPollInterval(time.Second), WithStopTimeout(30*time.Second))
	l := h.acquire("conv")
	h.release(l, OutcomeOK)
	h.f.SetState(l.Sandbox.ID, provider.StateStopping, "")
	waiting := h.acquireAsync(h.ctx, "conv")
	polls := func() int { return len(h.f.Calls(pooltest.OpGet)) }
	h.eventually(func() bool { return polls() >= 1 }, "looked up")
	h.eventually(func() bool { h.clk.Advance(time.Second); return polls() >= 3 }, "polled while it settles")
	select {
	case r := <-waiting:
		t.Fatalf("gave up on a sandbox mid-transition: %+v", r)
	default:
	}
	h.f.SetState(l.Sandbox.ID, provider.StateStopped, provider.ErrorReasonAutoStopped)
	var r acquired
	h.eventually(func() bool {
		h.clk.Advance(time.Second)
		select {
		case r = <-waiting:
			return true
		default:
			return false
		}
	}, "the acquire goes on once it settles")
	require.NoError(t, r.err)
	assert.Equal(t, PathResumed, r.l.Path)
	h.release(r.l, OutcomeOK)
}

// A sandbox the provider stopped underneath the pool (its auto-stop) is
// resumed, and its slot given back meanwhile.
func TestStoppedUnderneathIsResumed(t *testing.T) {
	h := newHarness(t)
	l := h.acquire("conv")
	h.release(l, OutcomeOK)
	h.f.SetState(l.Sandbox.ID, provider.StateStopped, provider.ErrorReasonAutoStopped)
	st, err := h.p.Inspect(h.ctx, "conv")
	require.NoError(t, err)
	assert.Equal(t, StateParkedStopped, st.State)
	assert.Zero(t, h.p.Stats().Running)
	next := h.acquire("conv")
	assert.Equal(t, PathResumed, next.Path)
	h.release(next, OutcomeOK)
}

// A sandbox found in error is never reported parked.
func TestErroredIsNeverParked(t *testing.T) {
	h := newHarness(t)
	l := h.acquire("conv")
	h.release(l, OutcomeOK)
	st, err := h.p.Inspect(h.ctx, "conv")
	require.NoError(t, err)
	assert.Equal(t, StateParkedRunning, st.State)
	assert.Equal(t, l.Sandbox.ID, st.SandboxID)

	h.f.SetState(l.Sandbox.ID, provider.StateError, "oom")
	st, err = h.p.Inspect(h.ctx, "conv")
	require.NoError(t, err)
	assert.Empty(t, st.State, "not parked")
	assert.Empty(t, h.state(l.Sandbox.ID), "deleted")
	assert.Equal(t, 1, h.teardowns(ReasonProviderLost))
	assert.Zero(t, h.p.Stats().Running)
}

func TestDiscard(t *testing.T) {
	h := newHarness(t)
	l := h.acquire("conv")
	assert.Equal(t, provider.FailedPrecondition, provider.Code(h.p.Discard(h.ctx, "conv")), "in use")
	h.release(l, OutcomeOK)
	require.NoError(t, h.p.Discard(h.ctx, "conv"))
	assert.Empty(t, h.state(l.Sandbox.ID))
	assert.Equal(t, 1, h.teardowns(ReasonExplicit))
	require.NoError(t, h.p.Discard(h.ctx, "conv"), "nothing left to discard")
	require.NoError(t, h.p.Discard(h.ctx, "never-seen"))
	assert.Zero(t, h.p.Stats().Keys, "nothing of the keys is kept")
}

// The heartbeat keeps a long quiet turn from the provider's auto-stop.
func TestHeartbeatRefreshesAQuietTurn(t *testing.T) {
	h := newHarness(t, WithHeartbeat(5*time.Minute))
	l := h.acquire("conv")
	start := h.sandbox(l.Sandbox.ID).LastActivityAt
	h.eventually(func() bool {
		h.clk.Advance(time.Minute)
		return h.sandbox(l.Sandbox.ID).LastActivityAt.After(start)
	}, "refreshed")
	h.release(l, OutcomeOK)
	refreshes := len(h.f.Calls(pooltest.OpRefresh))
	h.advance(20 * time.Minute)
	assert.Equal(t, refreshes, len(h.f.Calls(pooltest.OpRefresh)), "no heartbeat once released")
}
