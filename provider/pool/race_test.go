package pool

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

// Two turns of one key at once: the second waits for the first's release
// and gets the same sandbox warm; the pointer moves forward only.
func TestTwoTurnsOnOneKey(t *testing.T) {
	h := newHarness(t, WithBusyWait(time.Hour))
	const turns = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	var paths []Path
	var gens []uint64
	ids := map[string]bool{}
	for i := 0; i < turns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := h.p.Acquire(h.ctx, "conv", testSpec)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			paths = append(paths, l.Path)
			gens = append(gens, l.gen)
			ids[l.Sandbox.ID] = true
			mu.Unlock()
			assert.NoError(t, h.p.Release(h.ctx, l, OutcomeOK))
		}()
	}
	wg.Wait()
	h.settle()
	assert.Len(t, ids, 1, "one sandbox served every turn")
	assert.Equal(t, 1, h.f.Created())
	created := 0
	for _, p := range paths {
		if p == PathCreated {
			created++
		}
	}
	assert.Equal(t, 1, created)
	seen := map[uint64]bool{}
	for _, g := range gens {
		assert.False(t, seen[g], "each turn had its own generation")
		seen[g] = true
	}
	rec, ok := h.record("conv")
	require.True(t, ok)
	assert.Equal(t, StateParkedRunning, rec.State)
	assert.Equal(t, 1, h.f.MaxRunning())
}

// A turn that waited BusyWait for another gets a new sandbox and the key;
// the older turn's release cannot take the pointer back, and its sandbox is
// deleted.
func TestNewerTurnSupersedesAStuckOne(t *testing.T) {
	h := newHarness(t, WithBusyWait(30*time.Second))
	old, newer := h.supersede("conv", 30*time.Second)
	r := <-newer
	require.NoError(t, r.err)
	assert.Equal(t, PathCreated, r.l.Path)
	assert.NotEqual(t, old.Sandbox.ID, r.l.Sandbox.ID)
	assert.Contains(t, stageNames(r.l), StageWaitKey)
	assert.Greater(t, r.l.gen, old.gen)

	h.release(old, OutcomeOK)
	assert.Empty(t, h.state(old.Sandbox.ID), "the older turn's sandbox is nobody's: deleted")
	assert.Equal(t, 1, h.teardowns(ReasonSuperseded))
	rec, _ := h.record("conv")
	assert.Equal(t, r.l.Sandbox.ID, rec.SandboxID, "the pointer stays with the newer turn")
	assert.Equal(t, StateInUse, rec.State)
	h.release(r.l, OutcomeOK)
	next := h.acquire("conv")
	assert.Equal(t, r.l.Sandbox.ID, next.Sandbox.ID)
	h.release(next, OutcomeOK)
}

// A newer turn that superseded a stuck one never waits for the slot the
// older turn holds: it gets its own sandbox while the older one still runs,
// and the older turn's release deletes its sandbox, nobody's now.
func TestSupersedingTurnNeverWaitsForTheTurnItSuperseded(t *testing.T) {
	h := newHarness(t, WithBusyWait(30*time.Second))
	old := h.acquire("conv")
	base := h.clk.Waiters()
	newer := h.acquireAsync(h.ctx, "conv")
	require.NoError(t, h.clk.BlockUntilWaiters(waitCtx(t), base+1))
	h.clk.Advance(30 * time.Second) // BusyWait ran out: it supersedes

	var r acquired
	select {
	case r = <-newer:
	case <-time.After(10 * time.Second):
		t.Fatal("the superseding turn waited for the turn it superseded")
	}
	require.NoError(t, r.err)
	assert.Equal(t, PathCreated, r.l.Path)
	assert.Equal(t, 2, h.f.Running(), "both run: the older turn is not over")
	require.NoError(t, h.p.Release(waitCtx(t), old, OutcomeOK))
	h.settle()
	assert.Empty(t, h.state(old.Sandbox.ID), "the older turn's sandbox is nobody's: deleted")
	assert.Equal(t, 1, h.teardowns(ReasonSuperseded))
	rec, _ := h.record("conv")
	assert.Equal(t, r.l.Sandbox.ID, rec.SandboxID)
	h.release(r.l, OutcomeOK)
}

// A newer turn that superseded an older one and then failed leaves the key
// as the older turn's release makes it: the sandbox parked when that release
// comes after the failure, no record (not a lost sandbox) when the release
// came first and deleted it.
func TestFailedSupersedeLeavesTheKeyToTheOlderTurn(t *testing.T) {
	for _, tc := range []struct {
		name           string
		releaseFirst   bool
		wantPath       Path
		wantSuperseded int
	}{
		{"the older turn releases after the failure", false, PathWarm, 0},
		{"the older turn releases during the newer turn's create", true, PathCreated, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithBusyWait(30*time.Second))
			old := h.acquire("conv")
			hang := h.f.Hang(pooltest.OpCreate, false)
			h.f.FailNext(pooltest.OpCreate, provider.Errorf(provider.Internal, "create failed"))
			base := h.clk.Waiters()
			newer := h.acquireAsync(h.ctx, "conv")
			require.NoError(t, h.clk.BlockUntilWaiters(waitCtx(t), base+1))
			h.clk.Advance(30 * time.Second)
			require.NoError(t, hang.WaitBlocked(waitCtx(t), 1))
			if tc.releaseFirst {
				require.NoError(t, h.p.Release(waitCtx(t), old, OutcomeOK)) // the newer turn's create is under way: no settling
				assert.Empty(t, h.state(old.Sandbox.ID), "superseded: deleted")
			}
			hang.Release()
			r := <-newer
			require.Error(t, r.err)
			if !tc.releaseFirst {
				h.release(old, OutcomeOK)
			}
			h.settle()
			next := h.acquire("conv")
			assert.Equal(t, tc.wantPath, next.Path)
			if tc.wantPath == PathWarm {
				assert.Equal(t, old.Sandbox.ID, next.Sandbox.ID)
			}
			assert.Equal(t, tc.wantSuperseded, h.teardowns(ReasonSuperseded))
			assert.Zero(t, h.teardowns(ReasonProviderLost), "the record of a deleted sandbox was left behind")
			h.release(next, OutcomeOK)
		})
	}
}

// A turn cancelled mid-acquire and sent again at once: the first acquire's
// create goes on, its sandbox is parked, and the resend finds it warm.
// Nothing is created twice, nothing leaks.
func TestCancelAndImmediateResend(t *testing.T) {
	h := newHarness(t)
	hang := h.f.Hang(pooltest.OpCreate, false)
	ctx, cancel := context.WithCancel(h.ctx)
	first := h.acquireAsync(ctx, "conv")
	require.NoError(t, hang.WaitBlocked(waitCtx(t), 1))
	cancel()
	r := <-first
	assert.Equal(t, provider.Unavailable, provider.Code(r.err), "the caller is told at once")
	assert.ErrorIs(t, r.err, context.Canceled)

	resend := h.acquireAsync(h.ctx, "conv")
	// The create hangs until Release: a correct pool never answers the
	// resend here. The pause only gives a wrong one the chance to, so a
	// slow machine can hide a bug but never fail this test.
	time.Sleep(10 * time.Millisecond) // a chance for a wrong pool only; cannot fail a right one
	select {
	case r := <-resend:
		t.Fatalf("the resend went past the create under way: %+v", r)
	default:
	}
	hang.Release()
	r2 := <-resend
	require.NoError(t, r2.err)
	assert.Equal(t, PathWarm, r2.l.Path, "the cancelled turn's sandbox, parked")
	assert.Equal(t, 1, h.f.Created())
	h.release(r2.l, OutcomeOK)
	assert.Len(t, h.f.Sandboxes(), 1)
}

// A turn cancelled after it got its lease and released at once, with the
// resend racing the release: the resend gets the sandbox.
func TestCancelledTurnReleasesWhileItsResendWaits(t *testing.T) {
	for i := 0; i < 20; i++ {
		h := newHarness(t, WithBusyWait(time.Hour))
		l := h.acquire("conv")
		resend := h.acquireAsync(h.ctx, "conv")
		ctx, cancel := context.WithCancel(h.ctx)
		cancel() // the host's turn context is gone; it releases anyway
		require.NoError(t, h.p.Release(ctx, l, OutcomeOK))
		r := <-resend
		require.NoError(t, r.err)
		assert.Equal(t, l.Sandbox.ID, r.l.Sandbox.ID)
		assert.Equal(t, 1, h.f.Created())
		h.release(r.l, OutcomeOK)
	}
}

// An eviction (a finishing turn making room under the warm cap) and a
// claim of the same warm sandbox race; whichever wins, the warm cap holds,
// the claim gets the key's sandbox, and nothing is left behind.
func TestEvictionRacesAClaim(t *testing.T) {
	for i := 0; i < 30; i++ {
		h := newHarness(t, WithWarmCap(1))
		a, b := h.acquire("a"), h.acquire("b")
		h.release(a, OutcomeOK)

		claim := h.acquireAsync(h.ctx, "a")
		require.NoError(t, h.p.Release(h.ctx, b, OutcomeOK)) // evicts a, unless the claim has it
		r := <-claim
		require.NoError(t, r.err)
		assert.Contains(t, []Path{PathWarm, PathResumed}, r.l.Path)
		assert.Equal(t, a.Sandbox.ID, r.l.Sandbox.ID)
		h.settle()
		assert.LessOrEqual(t, h.p.Stats().Warm, 1, "the warm cap held")
		h.release(r.l, OutcomeOK)
		assert.LessOrEqual(t, h.p.Stats().Warm, 1, "the warm cap held")
		assert.Equal(t, 2, h.f.Created())
		require.NoError(t, h.p.Shutdown(waitCtx(t)))
		assert.Zero(t, h.f.Running())
	}
}

// Many keys, a small warm cap and turns that come and go at random: no
// acquire waits for a slot, the warm cap holds throughout, and every
// sandbox is accounted for at the end.
func TestChurnKeepsTheWarmCap(t *testing.T) {
	h := newHarness(t, WithWarmCap(2), WithKeepWarm(time.Minute))
	keys := []string{"a", "b", "c", "d", "e", "f"}
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				key := keys[(w+i)%len(keys)]
				l, err := h.p.Acquire(h.ctx, key, testSpec)
				if !assert.NoError(t, err) {
					return
				}
				outcome := OutcomeOK
				if i%7 == 3 {
					outcome = OutcomeFailed
				}
				assert.NoError(t, h.p.Release(h.ctx, l, outcome))
			}
		}()
	}
	stop := make(chan struct{})
	ticker := make(chan struct{})
	go func() { // time passes meanwhile, so keep-warm TTLs run out
		defer close(ticker)
		for {
			select {
			case <-stop:
				return
			default:
				if n := h.parkedWarm(); n > 2 {
					t.Errorf("%d sandboxes parked running over a warm cap of 2", n)
				}
				h.clk.Advance(time.Second)
				// The pace of the fake clock against the acquires: any
				// interleaving is one the pool must survive.
				time.Sleep(200 * time.Microsecond) // the fake clock's pace; any interleaving is valid
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-ticker
	h.settle()
	assert.LessOrEqual(t, h.parkedWarm(), 2, "the warm cap held")
	require.NoError(t, h.p.Shutdown(waitCtx(t)))
	assert.Zero(t, h.f.Running(), "nothing runs after shutdown")
	recs, err := h.p.store.List(h.ctx)
	require.NoError(t, err)
	known := map[string]bool{}
	for _, r := range recs {
		known[r.SandboxID] = true
	}
	for _, sb := range h.f.Sandboxes() {
		assert.True(t, known[sb.ID], "sandbox %s (%s) is no key's: leaked", sb.ID, sb.State)
	}
}
