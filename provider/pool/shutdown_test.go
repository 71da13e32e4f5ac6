package pool

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

// Shutdown deletes the sandbox of a turn in flight and stops an idle one;
// what is parked stays for the provider's auto-delete or a durable store,
// and is deleted when nothing would find it again.
func TestShutdown(t *testing.T) {
	tests := []struct {
		name          string
		plain         bool // the provider has no auto-delete
		durable       bool
		parkedRemains bool
	}{
		{"auto-delete provider, memory store", false, false, true},
		{"no auto-delete, durable store", true, true, true},
		{"no auto-delete, memory store", true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.Time{})
			f := pooltest.New(pooltest.WithClock(clk))
			var prov provider.Provider = f
			if tt.plain {
				prov = f.Plain()
			}
			opts := []Option{WithWarmCap(2)}
			if tt.durable {
				st, err := OpenFileStore(filepath.Join(t.TempDir(), "pool.json"))
				require.NoError(t, err)
				t.Cleanup(func() { st.Close() })
				opts = append(opts, WithStore(st))
			}
			h := newHarnessOn(t, clk, f, prov, opts...)
			busy := h.acquire("busy")
			idle := h.acquire("idle")
			h.release(idle, OutcomeOK)
			parked := h.acquire("parked")
			h.release(parked, OutcomeOK)
			h.advance(30 * time.Second)
			idleAgain := h.acquire("idle") // refreshed, so that it outlives parked's keep-warm
			h.release(idleAgain, OutcomeOK)
			h.advance(40 * time.Second)
			require.Equal(t, provider.StateStopped, h.state(parked.Sandbox.ID))
			require.Equal(t, provider.StateStarted, h.state(idle.Sandbox.ID))

			require.NoError(t, h.p.Shutdown(waitCtx(t)))
			assert.Empty(t, h.state(busy.Sandbox.ID), "the turn in flight: deleted")
			assert.Equal(t, 1, h.teardowns(ReasonShutdownInFlight))
			if !tt.plain { // only a ReasonStopper is told why
				assert.Equal(t, []string{ReasonShutdownInFlight.stopReason()}, h.stopReasons(busy.Sandbox.ID))
			} else {
				assert.Empty(t, h.stopReasons(busy.Sandbox.ID))
			}
			assert.Zero(t, f.Running(), "nothing runs after a shutdown")
			if tt.parkedRemains {
				assert.Equal(t, provider.StateStopped, h.state(idle.Sandbox.ID), "the idle one: stopped")
				assert.Equal(t, provider.StateStopped, h.state(parked.Sandbox.ID))
				assert.Equal(t, 1, h.teardowns(ReasonShutdownIdle))
			} else {
				assert.Empty(t, h.state(idle.Sandbox.ID), "nothing would find it again")
				assert.Empty(t, h.state(parked.Sandbox.ID))
				assert.Equal(t, 2, h.teardowns(ReasonShutdownIdle))
			}

			require.NoError(t, h.p.Release(h.ctx, busy, OutcomeOK), "a release after shutdown does nothing")
			_, err := h.p.Acquire(h.ctx, "new", testSpec)
			assert.Equal(t, provider.Unavailable, provider.Code(err))
			require.NoError(t, h.p.Shutdown(h.ctx), "twice is fine")
		})
	}
}

// An acquire that has not claimed its sandbox when Shutdown comes does not
// hand it out: it is deleted.
func TestShutdownDuringAcquire(t *testing.T) {
	h := newHarness(t)
	hang := h.f.Hang(pooltest.OpCreate, true)
	waiting := h.acquireAsync(h.ctx, "conv")
	require.NoError(t, hang.WaitBlocked(waitCtx(t), 1))
	done := make(chan error, 1)
	go func() { done <- h.p.Shutdown(waitCtx(t)) }()
	h.eventually(func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return h.p.closing
	}, "shutting down")
	hang.Release()
	r := <-waiting
	assert.Equal(t, provider.Unavailable, provider.Code(r.err))
	require.NoError(t, <-done)
	assert.Empty(t, h.f.Sandboxes(), "the sandbox it made is deleted")
	assert.Equal(t, 1, h.teardowns(ReasonShutdownInFlight))
}

// A host that restarts on a file store finds its parked sandboxes again:
// one parked running is still warm, one parked stopped resumes, and the
// sandbox of a turn in flight when it died is deleted.
func TestFileStoreSurvivesARestart(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	path := filepath.Join(t.TempDir(), "state", "pool.json")
	st, err := OpenFileStore(path)
	require.NoError(t, err)
	h := newHarnessOn(t, clk, f, f.Plain(), WithStore(st), WithWarmCap(2))
	stopped := h.acquire("stopped")
	h.release(stopped, OutcomeOK)
	h.advance(time.Minute)
	warm := h.acquire("warm")
	h.release(warm, OutcomeOK)
	inFlight := h.acquire("in-flight")
	errored := h.acquire("errored")
	h.release(errored, OutcomeOK)
	h.advance(10 * time.Second)

	// The host dies: no Shutdown; its store is released with the process.
	h.p.cancel()
	require.NoError(t, st.Close())
	f.SetState(errored.Sandbox.ID, provider.StateError, "oom")

	st2, err := OpenFileStore(path)
	require.NoError(t, err)
	t.Cleanup(func() { st2.Close() })
	h2 := newHarnessOn(t, clk, f, f.Plain(), WithStore(st2), WithWarmCap(2))
	assert.Empty(t, h2.state(inFlight.Sandbox.ID), "the turn in flight is over: deleted")
	assert.Equal(t, 1, h2.teardowns(ReasonShutdownInFlight))
	assert.Empty(t, h2.state(errored.Sandbox.ID), "an errored one is never parked")
	assert.Equal(t, 1, h2.teardowns(ReasonProviderLost))
	assert.Equal(t, 1, h2.p.Stats().Running, "the warm one holds its slot")

	w := h2.acquire("warm")
	assert.Equal(t, PathWarm, w.Path)
	assert.Equal(t, warm.Sandbox.ID, w.Sandbox.ID)
	s := h2.acquire("stopped")
	assert.Equal(t, PathResumed, s.Path)
	assert.Equal(t, stopped.Sandbox.ID, s.Sandbox.ID)
	h2.release(w, OutcomeOK)
	h2.release(s, OutcomeOK)

	// The keep-warm TTL resumed where it was: "warm" was parked 10 s
	// before the restart and has 50 s left... from its new parking, a full
	// minute.
	h2.advance(time.Minute)
	assert.Equal(t, provider.StateStopped, h2.state(warm.Sandbox.ID))
}

// The keep-warm and parked-stopped TTLs count from the parking, across a
// restart.
func TestRecoveredTTLsCountFromTheParking(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	path := filepath.Join(t.TempDir(), "pool.json")
	st, err := OpenFileStore(path)
	require.NoError(t, err)
	h := newHarnessOn(t, clk, f, f.Plain(), WithStore(st), WithStoppedTTL(time.Hour))
	warm := h.acquire("warm")
	h.release(warm, OutcomeOK)
	h.advance(40 * time.Second)
	h.p.cancel()
	require.NoError(t, st.Close())

	st2, err := OpenFileStore(path)
	require.NoError(t, err)
	t.Cleanup(func() { st2.Close() })
	h2 := newHarnessOn(t, clk, f, f.Plain(), WithStore(st2), WithStoppedTTL(time.Hour))
	h2.advance(19 * time.Second)
	assert.Equal(t, provider.StateStarted, h2.state(warm.Sandbox.ID))
	h2.advance(time.Second)
	assert.Equal(t, provider.StateStopped, h2.state(warm.Sandbox.ID), "60 s after its parking")
	h2.advance(time.Hour)
	assert.Empty(t, h2.state(warm.Sandbox.ID), "deleted an hour after it stopped")
}

func TestFileStoreRefusesASecondOpener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pool.json")
	st, err := OpenFileStore(path)
	require.NoError(t, err)
	_, err = OpenFileStore(path)
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
	require.NoError(t, st.Close())
	st2, err := OpenFileStore(path)
	require.NoError(t, err, "free once closed")
	require.NoError(t, st2.Close())
}

func TestFileStoreKeepsACorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pool.json")
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))
	_, err := OpenFileStore(path)
	assert.Equal(t, provider.Internal, provider.Code(err))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "{not json", string(b), "left for a person to look at")
}

func TestFileStoreIsPrivateAndHoldsNoSecret(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	path := filepath.Join(t.TempDir(), "pool.json")
	st, err := OpenFileStore(path)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	h := newHarnessOn(t, clk, f, nil, WithStore(st))
	l := h.acquire("conv")
	h.release(l, OutcomeOK)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(b), secretValue)
	assert.Contains(t, string(b), l.Sandbox.ID)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), ".tmp", "no temporary file is left")
	}
}

// Both stores keep the compare-and-set contract.
func TestStoresCompareAndSet(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"file": func(t *testing.T) Store {
			st, err := OpenFileStore(filepath.Join(t.TempDir(), "pool.json"))
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			_, ok, err := s.Load(ctx, "k")
			require.NoError(t, err)
			assert.False(t, ok)
			_, err = s.Swap(ctx, "k", 5, &Record{SandboxID: "a"})
			assert.ErrorIs(t, err, ErrConflict, "no record: only generation 0 matches")
			r1, err := s.Swap(ctx, "k", 0, &Record{SandboxID: "a", State: StateInUse})
			require.NoError(t, err)
			assert.NotZero(t, r1.Gen)
			assert.Equal(t, "k", r1.Key)
			r2, err := s.Swap(ctx, "k", r1.Gen, &Record{SandboxID: "a", State: StateParkedRunning})
			require.NoError(t, err)
			_, err = s.Swap(ctx, "k", r1.Gen, &Record{SandboxID: "old turn"})
			assert.ErrorIs(t, err, ErrConflict, "an older generation cannot overwrite a newer one")
			assert.Equal(t, provider.FailedPrecondition, provider.Code(err))
			_, err = s.Swap(ctx, "k", r2.Gen, nil)
			require.NoError(t, err)
			r3, err := s.Swap(ctx, "k", 0, &Record{SandboxID: "b"})
			require.NoError(t, err)
			assert.Greater(t, r3.Gen, r2.Gen, "generations are never given twice, so a removed record cannot come back under an old one")
			_, err = s.Swap(ctx, "k", r1.Gen, nil)
			assert.ErrorIs(t, err, ErrConflict)
			list, err := s.List(ctx)
			require.NoError(t, err)
			assert.Equal(t, []Record{r3}, list)
			sec, err := s.Secret(ctx)
			require.NoError(t, err)
			assert.Len(t, sec, 32)
		})
	}
}

func TestFileStoreReopensWithTheSameState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pool.json")
	st, err := OpenFileStore(path)
	require.NoError(t, err)
	sec, _ := st.Secret(ctx)
	rec, err := st.Swap(ctx, "k", 0, &Record{SandboxID: "a", State: StateParkedStopped, Since: time.Unix(100, 0).UTC()})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, _, err = st.Load(ctx, "k")
	assert.Error(t, err, "a closed store refuses")

	st2, err := OpenFileStore(path)
	require.NoError(t, err)
	defer st2.Close()
	sec2, _ := st2.Secret(ctx)
	assert.Equal(t, sec, sec2, "fingerprints stay comparable")
	got, ok, err := st2.Load(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rec, got)
	next, err := st2.Swap(ctx, "other", 0, &Record{SandboxID: "b"})
	require.NoError(t, err)
	assert.Greater(t, next.Gen, rec.Gen)
}

// A superseded turn still in flight when its key has nothing else left (the
// newer turn failed and its sandbox went) is still the pool's: Shutdown
// deletes its sandbox and gives its slot back.
func TestShutdownEndsASupersededTurnOfAnEmptyKey(t *testing.T) {
	h := newHarness(t, WithBusyWait(30*time.Second))
	old, newer := h.supersede("conv", 30*time.Second)
	r := <-newer
	require.NoError(t, r.err)
	h.release(r.l, OutcomeFailed) // the key's record goes

	require.NoError(t, h.p.Shutdown(waitCtx(t)))
	assert.Empty(t, h.state(old.Sandbox.ID), "the sandbox of every turn in flight is deleted")
	require.NoError(t, h.p.Release(h.ctx, old, OutcomeOK)) // does nothing after Shutdown
	assert.Zero(t, h.p.Stats().Running, "its slot was given back")
}

// A provider call that ignores its context does not hold Shutdown past its
// ctx: what is left is cancelled, and Shutdown says that ctx ended.
func TestShutdownReturnsWhenItsCtxEnds(t *testing.T) {
	h := newHarness(t)
	hang := h.f.Hang(pooltest.OpCreate, true)
	acq := h.acquireAsync(h.ctx, "conv")
	require.NoError(t, hang.WaitBlocked(waitCtx(t), 1))
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	done := make(chan error, 1)
	go func() { done <- h.p.Shutdown(ctx) }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-waitCtx(t).Done():
		t.Fatal("Shutdown waited past its ctx for a create that ignores its own")
	}

	// Shutdown gave up on that create, as told: what it makes anyway is no
	// longer the pool's to delete. It carries the timers every pool create
	// sets, which reap it on the provider; the fake has none, so the test
	// deletes it as they would.
	hang.Release()
	got := <-acq
	assert.Error(t, got.err, "a pool that shut down hands out no sandbox")
	live, err := h.f.List(h.ctx, provider.ListOptions{})
	require.NoError(t, err)
	for _, sb := range live {
		assert.Equal(t, DefaultAutoStopMinutes, sb.AutoStopInterval, "a sandbox the pool let go of reaps itself")
		require.NoError(t, h.f.Delete(h.ctx, sb.ID))
	}
}
