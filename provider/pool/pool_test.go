package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

// The three paths, one after the other on one key: created, parked running
// and claimed warm, parked running until the keep-warm TTL stops it, then
// resumed.
func TestAcquireTakesEachPath(t *testing.T) {
	h := newHarness(t)
	first := h.acquire("conv")
	assert.Equal(t, PathCreated, first.Path)
	assert.Equal(t, []string{StageLookup, StageCreate, StageClaim}, stageNames(first))
	id := first.Sandbox.ID
	h.release(first, OutcomeOK)
	assert.Equal(t, provider.StateStarted, h.state(id), "parked running")
	assert.Equal(t, 1, h.p.Stats().Warm)

	h.advance(30 * time.Second)
	warm := h.acquire("conv")
	assert.Equal(t, PathWarm, warm.Path)
	assert.Equal(t, id, warm.Sandbox.ID)
	assert.Equal(t, []string{StageLookup, StageRefresh, StageClaim}, stageNames(warm))
	h.release(warm, OutcomeOK)

	h.advance(time.Minute)
	assert.Equal(t, provider.StateStopped, h.state(id), "stopped when the keep-warm TTL ran out")
	assert.Equal(t, []string{"pool: ttl_expired"}, h.stopReasons(id))
	assert.Equal(t, 1, h.teardowns(ReasonTTLExpired))
	rec, _ := h.record("conv")
	assert.Equal(t, StateParkedStopped, rec.State)
	assert.Zero(t, h.p.Stats().Running, "a stopped sandbox holds no running slot")

	resumed := h.acquire("conv")
	assert.Equal(t, PathResumed, resumed.Path)
	assert.Equal(t, id, resumed.Sandbox.ID)
	assert.Equal(t, []string{StageLookup, StageStart, StageClaim}, stageNames(resumed))
	assert.Equal(t, 1, h.f.Created(), "one sandbox served every turn")
	h.release(resumed, OutcomeOK)
	for _, path := range []Path{PathCreated, PathWarm, PathResumed} {
		assert.Equal(t, 1, h.obs.get(func() int { return h.obs.acquires[path] }), path)
	}
}

// A claimed sandbox must not inherit the idle time of its parking: the
// claim refreshes its activity and cancels the keep-warm timer.
func TestClaimResetsActivity(t *testing.T) {
	h := newHarness(t)
	l := h.acquire("conv")
	h.release(l, OutcomeOK)
	parkedAt := h.clk.Now()
	h.advance(59 * time.Second)
	warm := h.acquire("conv")
	require.Equal(t, PathWarm, warm.Path)
	got := h.sandbox(warm.Sandbox.ID)
	assert.True(t, got.LastActivityAt.After(parkedAt), "the claim moved lastActivityAt")
	assert.Equal(t, h.clk.Now(), got.LastActivityAt)
	h.advance(5 * time.Minute)
	assert.Equal(t, provider.StateStarted, h.state(warm.Sandbox.ID), "the keep-warm timer of its parking no longer applies")
	h.release(warm, OutcomeOK)
}

// Every sandbox the pool creates carries auto-stop, auto-delete, the pool's
// labels and a name that says which key it serves.
func TestCreateSetsTimersAndLabels(t *testing.T) {
	h := newHarness(t, WithAutoStop(7), WithAutoDelete(90), WithName("agents"))
	l := h.acquire("conv")
	sb := h.sandbox(l.Sandbox.ID)
	assert.Equal(t, 7, sb.AutoStopInterval)
	minutes, ok := h.f.AutoDelete(sb.ID)
	assert.True(t, ok)
	assert.Equal(t, 90, minutes)
	assert.Equal(t, "agent", sb.Labels["app"])
	assert.Equal(t, "agents", sb.Labels[LabelPool])
	assert.Equal(t, h.p.keyHash("conv"), sb.Labels[LabelKey])
	assert.True(t, strings.HasPrefix(sb.Name, "pool-"+h.p.keyHash("conv")[:12]+"-"), sb.Name)
	assert.NotContains(t, sb.Labels[LabelKey], "conv", "labels do not show the key")
	h.release(l, OutcomeOK)
}

func TestReleaseOutcomes(t *testing.T) {
	tests := []struct {
		outcome Outcome
		reason  Reason
	}{
		{OutcomeFailed, ReasonTurnFailed},
		{OutcomeDiscard, ReasonExplicit},
	}
	for _, tt := range tests {
		t.Run(tt.outcome.String(), func(t *testing.T) {
			h := newHarness(t)
			l := h.acquire("conv")
			h.release(l, tt.outcome)
			assert.Empty(t, h.state(l.Sandbox.ID), "deleted")
			assert.Equal(t, []string{tt.reason.stopReason()}, h.stopReasons(l.Sandbox.ID), "the stopped event says why")
			assert.Equal(t, 1, h.teardowns(tt.reason))
			_, ok := h.record("conv")
			assert.False(t, ok, "forgotten")
			assert.Zero(t, h.p.Stats().Running)
			next := h.acquire("conv")
			assert.Equal(t, PathCreated, next.Path)
			h.release(next, OutcomeOK)
			require.NoError(t, h.p.Release(h.ctx, l, OutcomeOK), "a second release does nothing")
		})
	}
}

// A parked sandbox whose spec changed is torn down, never handed out.
func TestIncompatibleSpecTearsDown(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *Spec)
	}{
		{"env value", func(s *Spec) { s.Env = map[string]string{"API_TOKEN": "rotated"} }},
		{"env key", func(s *Spec) { s.Env = map[string]string{"OTHER": secretValue} }},
		{"label", func(s *Spec) { s.Labels = map[string]string{"app": "other"} }},
		{"snapshot", func(s *Spec) { s.Snapshot = "python" }},
		{"resources", func(s *Spec) { s.Resources = provider.ResizeRequest{CPU: 2} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, parked := range []string{"running", "stopped"} {
				t.Run(parked, func(t *testing.T) {
					h := newHarness(t)
					l := h.acquire("conv")
					h.release(l, OutcomeOK)
					if parked == "stopped" {
						h.advance(time.Minute)
					}
					spec := testSpec
					tt.change(&spec)
					next, err := h.p.Acquire(h.ctx, "conv", spec)
					require.NoError(t, err)
					assert.Equal(t, PathCreated, next.Path)
					assert.NotEqual(t, l.Sandbox.ID, next.Sandbox.ID)
					assert.Empty(t, h.state(l.Sandbox.ID), "the old one is deleted")
					assert.Equal(t, 1, h.teardowns(ReasonIncompatible))
					h.release(next, OutcomeOK)
				})
			}
		})
	}
}

func TestFingerprintIsKeyedAndCanonical(t *testing.T) {
	h := newHarness(t)
	a := h.p.fingerprint(testSpec)
	same := Spec{Snapshot: "default", Labels: map[string]string{"app": "agent"}, Env: map[string]string{"API_TOKEN": secretValue},
		Check: func(context.Context, *provider.Sandbox) error { return nil }}
	assert.Equal(t, a, h.p.fingerprint(same), "map order and Check do not matter")
	assert.NotContains(t, a, secretValue)
	// Ambiguous concatenations hash differently.
	assert.NotEqual(t, h.p.fingerprint(Spec{Env: map[string]string{"ab": "c"}}), h.p.fingerprint(Spec{Env: map[string]string{"a": "bc"}}))
	other := newHarness(t)
	assert.NotEqual(t, a, other.p.fingerprint(testSpec), "keyed with each store's own secret")
}

// The caller's Check sees the sandbox running, before it is handed out.
func TestCheckDecidesReuse(t *testing.T) {
	for _, parked := range []string{"running", "stopped"} {
		t.Run(parked, func(t *testing.T) {
			h := newHarness(t)
			l := h.acquire("conv")
			h.release(l, OutcomeOK)
			if parked == "stopped" {
				h.advance(time.Minute)
			}
			var seen provider.State
			spec := testSpec
			spec.Check = func(_ context.Context, sb *provider.Sandbox) error {
				seen = sb.State
				return errors.New("its credentials expired")
			}
			next, err := h.p.Acquire(h.ctx, "conv", spec)
			require.NoError(t, err)
			assert.Equal(t, provider.StateStarted, seen)
			assert.Equal(t, PathCreated, next.Path, "refused, replaced")
			assert.Empty(t, h.state(l.Sandbox.ID))
			assert.Equal(t, 1, h.teardowns(ReasonIncompatible))
			assert.Contains(t, h.logs.String(), "its credentials expired")
			h.release(next, OutcomeOK)

			spec.Check = func(context.Context, *provider.Sandbox) error { return nil }
			again, err := h.p.Acquire(h.ctx, "conv", spec)
			require.NoError(t, err)
			assert.Equal(t, next.Sandbox.ID, again.Sandbox.ID)
			assert.Contains(t, stageNames(again), StageCheck)
			h.release(again, OutcomeOK)
		})
	}
}

// Without auto-delete in the provider (local), the pool deletes what stayed
// parked stopped for its TTL; with it, the provider's timer deletes it and
// the pool only forgets it, or deletes it when the provider has not.
func TestParkedStoppedTTL(t *testing.T) {
	const ttl = time.Hour
	t.Run("provider without auto-delete", func(t *testing.T) {
		clk := clocktest.NewFake(time.Time{})
		f := pooltest.New(pooltest.WithClock(clk))
		h := newHarnessOn(t, clk, f, f.Plain(), WithStoppedTTL(ttl), WithKeepWarm(0))
		l := h.acquire("conv")
		h.release(l, OutcomeOK)
		assert.Equal(t, provider.StateStopped, h.state(l.Sandbox.ID), "keep-warm off: parked stopped at once")
		assert.Empty(t, f.Calls(pooltest.OpAutoDelete), "the provider has no auto-delete")
		h.advance(ttl - time.Second)
		assert.Equal(t, provider.StateStopped, h.state(l.Sandbox.ID))
		h.advance(time.Second)
		assert.Empty(t, h.state(l.Sandbox.ID), "deleted by the pool")
		assert.Equal(t, 1, h.teardowns(ReasonTTLExpired))
		_, ok := h.record("conv")
		assert.False(t, ok)
	})
	for _, deleted := range []bool{true, false} {
		name := map[bool]string{true: "provider deleted it", false: "provider has not yet"}[deleted]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, WithStoppedTTL(ttl), WithKeepWarm(0))
			l := h.acquire("conv")
			h.release(l, OutcomeOK)
			if deleted {
				h.f.Vanish(l.Sandbox.ID)
			}
			h.advance(ttl)
			assert.Empty(t, h.state(l.Sandbox.ID))
			assert.Equal(t, 1, h.teardowns(ReasonTTLExpired))
			deletes := len(h.f.Calls(pooltest.OpDelete))
			assert.Equal(t, map[bool]int{true: 0, false: 1}[deleted], deletes)
			_, ok := h.record("conv")
			assert.False(t, ok)
		})
	}
}

// The default parked-stopped TTL is the auto-delete interval, plus a
// minute where the provider's own timer is expected to win.
func TestStoppedTTLDefaults(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	withAuto := newHarnessOn(t, clk, f, nil, WithAutoDelete(30), WithMinute(time.Second))
	assert.Equal(t, 31*time.Second, withAuto.p.cfg.stoppedTTL)
	without := newHarnessOn(t, clk, f, f.Plain(), WithAutoDelete(30), WithMinute(time.Second))
	assert.Equal(t, 30*time.Second, without.p.cfg.stoppedTTL)
}

func TestOptionsAreValidated(t *testing.T) {
	f := pooltest.New(pooltest.WithClock(clocktest.NewFake(time.Time{})))
	for name, o := range map[string]Option{
		"negative warm cap":    WithWarmCap(-1),
		"negative keep-warm":   WithKeepWarm(-time.Second),
		"negative auto-stop":   WithAutoStop(-1),
		"negative auto-delete": WithAutoDelete(-1),
		"auto-delete too long": WithAutoDelete(7 * 24 * 60),
		"zero poll":            WithPollInterval(0),
		"nil clock":            WithClock(nil),
		"empty name":           WithName(""),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), f, o)
			assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
		})
	}
	_, err := New(context.Background(), nil)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
}

func TestAcquireValidatesInput(t *testing.T) {
	h := newHarness(t)
	for name, tt := range map[string]struct {
		key  string
		spec Spec
	}{
		"empty key":          {"", testSpec},
		"long key":           {strings.Repeat("k", 257), testSpec},
		"control characters": {"a\nb", testSpec},
		"reserved label":     {"k", Spec{Labels: map[string]string{LabelPool: "x"}}},
		"negative resources": {"k", Spec{Resources: provider.ResizeRequest{Memory: -1}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.p.Acquire(h.ctx, tt.key, tt.spec)
			assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
		})
	}
	assert.Zero(t, h.f.Created())
}

// Resources are applied after create; a provider that cannot fails the
// acquire and leaves nothing behind.
func TestResourcesAreApplied(t *testing.T) {
	h := newHarness(t)
	spec := testSpec
	spec.Resources = provider.ResizeRequest{CPU: 2, Memory: 4}
	l, err := h.p.Acquire(h.ctx, "conv", spec)
	require.NoError(t, err)
	assert.Len(t, h.f.Calls(pooltest.OpResize), 1)
	h.release(l, OutcomeOK)

	h.f.FailNext(pooltest.OpResize, provider.Errorf(provider.NotFound, "Cannot POST /resize"))
	_, err = h.p.Acquire(h.ctx, "other", spec)
	assert.Equal(t, provider.NotFound, provider.Code(err))
	h.settle()
	assert.Len(t, h.f.Sandboxes(), 1, "the sandbox that could not be resized is deleted")
	assert.Equal(t, 1, h.p.Stats().Running)
}

// A create that fails gives its slot back, and a sandbox it may have made
// anyway is deleted by name.
func TestFailedCreateLeavesNothing(t *testing.T) {
	h := newHarness(t)
	h.f.FailNext(pooltest.OpCreate, provider.Errorf(provider.Unavailable, "connection reset"))
	_, err := h.p.Acquire(h.ctx, "conv", testSpec)
	assert.Equal(t, provider.Unavailable, provider.Code(err))
	h.settle()
	assert.Zero(t, h.p.Stats().Running)
	l := h.acquire("conv")
	assert.Equal(t, PathCreated, l.Path)
	h.release(l, OutcomeOK)
}

// markKey marks the contexts of one test's calls.
type markKey struct{}

// markStore fails a test whose pool calls the store with a context that
// does not come from a call of the host's (New's, for the pool's timers).
type markStore struct {
	*MemoryStore
	t *testing.T
}

func (m markStore) check(ctx context.Context, op string) {
	if ctx.Value(markKey{}) == nil {
		m.t.Errorf("store %s: the context is not the caller's", op)
	}
}

func (m markStore) Load(ctx context.Context, key string) (Record, bool, error) {
	m.check(ctx, "Load")
	return m.MemoryStore.Load(ctx, key)
}

func (m markStore) Swap(ctx context.Context, key string, gen uint64, next *Record) (Record, error) {
	m.check(ctx, "Swap")
	return m.MemoryStore.Swap(ctx, key, gen, next)
}

func (m markStore) List(ctx context.Context) ([]Record, error) {
	m.check(ctx, "List")
	return m.MemoryStore.List(ctx)
}

func (m markStore) Secret(ctx context.Context) ([]byte, error) {
	m.check(ctx, "Secret")
	return m.MemoryStore.Secret(ctx)
}

// Every store call carries a context of the host's: the pool threads the
// caller's, detached from its cancellation where the work outlives the
// call, and its timers run on New's.
func TestStoreGetsTheCallersContext(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	ctx := context.WithValue(context.Background(), markKey{}, true)
	p, err := New(ctx, f, append(baseOptions(clk, &syncBuffer{}), WithStore(markStore{NewMemoryStore(), t}))...)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Shutdown(ctx)) }()

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"acquire and release", func(t *testing.T) {
			l, err := p.Acquire(ctx, "a", testSpec)
			require.NoError(t, err)
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
		}},
		{"inspect", func(t *testing.T) {
			_, err := p.Inspect(ctx, "a")
			require.NoError(t, err)
		}},
		{"keep-warm timer", func(t *testing.T) {
			clk.Advance(2 * time.Minute)
			require.Eventually(t, func() bool {
				st, err := p.Inspect(ctx, "a")
				if err == nil && st.State == StateParkedStopped {
					return true
				}
				// A timer that found the key busy (this very Inspect, say)
				// tries again a poll interval later on the pool's clock.
				clk.Advance(time.Second)
				return false
			}, 10*time.Second, 10*time.Millisecond)
		}},
		{"discard", func(t *testing.T) { require.NoError(t, p.Discard(ctx, "a")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
