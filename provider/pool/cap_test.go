package pool

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

type acquired struct {
	l   *Lease
	err error
}

func (h *harness) acquireAsync(ctx context.Context, key string, opts ...AcquireOption) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := h.p.Acquire(ctx, key, testSpec, opts...)
		ch <- acquired{l, err}
	}()
	return ch
}

// waitAdmitting waits until n acquires wait for a running slot: each has
// its deadline timer armed on the fake clock.
func (h *harness) waitAdmitting(base, n int) {
	h.t.Helper()
	require.NoError(h.t, h.clk.BlockUntilWaiters(waitCtx(h.t), base+n))
}

// The cap holds fresh misses back: with every slot in use, an acquire that
// chose to be refused is refused at once, one that waits gets the slot a
// release frees.
func TestAdmissionGateCapsRunning(t *testing.T) {
	h := newHarness(t, WithMaxRunning(2), WithMaxWarm(0))
	a, b := h.acquire("a"), h.acquire("b")

	_, err := h.p.Acquire(h.ctx, "c", testSpec, Reject())
	assert.Equal(t, provider.ResourceExhausted, provider.Code(err), "%v", err)
	assert.Equal(t, 1, h.obs.get(func() int { return h.obs.rejected }))

	base := h.clk.Waiters()
	waiting := h.acquireAsync(h.ctx, "c", WaitUpTo(time.Minute))
	h.waitAdmitting(base, 1)
	select {
	case r := <-waiting:
		t.Fatalf("admitted over the cap: %+v", r)
	default:
	}
	h.release(a, OutcomeOK) // no warm slot: parked stopped, its slot freed
	r := <-waiting
	require.NoError(t, r.err)
	assert.Equal(t, PathCreated, r.l.Path)
	assert.Contains(t, stageNames(r.l), StageAdmit)
	assert.Equal(t, 2, h.f.MaxRunning(), "never more than the cap at once")

	// A waiter whose wait runs out is refused.
	base = h.clk.Waiters()
	late := h.acquireAsync(h.ctx, "d", WaitUpTo(time.Minute))
	h.waitAdmitting(base, 1)
	h.clk.Advance(time.Minute)
	r2 := <-late
	assert.Equal(t, provider.ResourceExhausted, provider.Code(r2.err), "%v", r2.err)

	// So is one whose context ends.
	ctx, cancel := context.WithCancel(h.ctx)
	base = h.clk.Waiters()
	gone := h.acquireAsync(ctx, "e")
	h.waitAdmitting(base, 1)
	cancel()
	assert.Equal(t, provider.Unavailable, provider.Code((<-gone).err))
	h.release(b, OutcomeOK)
	h.release(r.l, OutcomeOK)
	h.settle()
	assert.LessOrEqual(t, h.f.MaxRunning(), 2)
}

// When every running slot is taken and some are warm, a fresh miss evicts
// the least recently parked one: stopped, never deleted, and resumable.
func TestEvictionStopsTheOldestWarm(t *testing.T) {
	h := newHarness(t, WithMaxRunning(2), WithMaxWarm(2))
	a := h.acquire("a")
	h.release(a, OutcomeOK)
	h.advance(time.Second)
	b := h.acquire("b")
	h.release(b, OutcomeOK)
	require.Equal(t, 2, h.p.Stats().Warm)

	c := h.acquire("c")
	assert.Equal(t, PathCreated, c.Path)
	assert.Equal(t, provider.StateStopped, h.state(a.Sandbox.ID), "the oldest warm one is evicted")
	assert.Equal(t, []string{"pool: evicted"}, h.stopReasons(a.Sandbox.ID))
	assert.Equal(t, provider.StateStarted, h.state(b.Sandbox.ID))
	assert.Equal(t, 1, h.teardowns(ReasonEvicted))
	assert.Equal(t, 2, h.f.MaxRunning())

	h.release(c, OutcomeOK)
	again := h.acquire("a")
	assert.Equal(t, PathResumed, again.Path, "eviction stops, never deletes")
	assert.Equal(t, a.Sandbox.ID, again.Sandbox.ID)
	h.release(again, OutcomeOK)
	assert.LessOrEqual(t, h.f.MaxRunning(), 2)
}

// When every warm slot is taken, a finishing turn parks stopped.
func TestWarmCapParksStopped(t *testing.T) {
	h := newHarness(t, WithMaxRunning(4), WithMaxWarm(1))
	a, b := h.acquire("a"), h.acquire("b")
	h.release(a, OutcomeOK)
	h.release(b, OutcomeOK)
	assert.Equal(t, provider.StateStarted, h.state(a.Sandbox.ID))
	assert.Equal(t, provider.StateStopped, h.state(b.Sandbox.ID))
	assert.Equal(t, []string{stopReasonParked}, h.stopReasons(b.Sandbox.ID), "parking is not a teardown")
	for _, r := range Reasons {
		assert.Zero(t, h.teardowns(r), r)
	}
	rec, _ := h.record("b")
	assert.Equal(t, StateParkedStopped, rec.State)
}

// KeepWarm 0 turns park-to-running off.
func TestKeepWarmOff(t *testing.T) {
	h := newHarness(t, WithKeepWarm(0))
	l := h.acquire("conv")
	h.release(l, OutcomeOK)
	assert.Equal(t, provider.StateStopped, h.state(l.Sandbox.ID))
	next := h.acquire("conv")
	assert.Equal(t, PathResumed, next.Path)
	h.release(next, OutcomeOK)
}

// A provider that hangs on the eviction's stop: the pool waits StopTimeout,
// polling the real state, and then keeps the victim's slot taken until the
// provider confirms, so the cap holds. The acquire that needed the slot
// waits for it.
func TestHungStopDuringEvictionKeepsTheCap(t *testing.T) {
	h := newHarness(t, WithMaxRunning(1), WithMaxWarm(1), WithStopTimeout(10*time.Second), WithPollInterval(time.Second))
	a := h.acquire("a")
	h.release(a, OutcomeOK)
	hang := h.f.Hang(pooltest.OpStop, true)
	defer hang.Release()

	waiting := h.acquireAsync(h.ctx, "b", WaitUpTo(10*time.Minute))
	require.NoError(t, hang.WaitBlocked(waitCtx(t), 1))
	for i := 0; i < 12; i++ { // past StopTimeout, one poll at a time
		h.clk.Advance(time.Second)
		// Lets the stop's poll run between steps; what is asserted after
		// is waited on as a condition, so a slower poll changes nothing.
		time.Sleep(time.Millisecond) // room for the poll; the outcome is waited on below
	}
	h.eventually(func() bool { return h.obs.get(func() int { return h.obs.hungStops }) == 1 }, "the stop is taken for hung")
	select {
	case r := <-waiting:
		t.Fatalf("admitted while the victim may still run: %+v", r)
	default:
	}
	assert.Equal(t, 1, h.p.Stats().Running, "the victim's slot stays taken")
	assert.Equal(t, 1, h.f.Running())

	// The provider stops it at last (say its own auto-stop); the next poll
	// sees it and the slot goes to the waiter.
	h.f.SetState(a.Sandbox.ID, provider.StateStopped, provider.ErrorReasonAutoStopped)
	var r acquired
	h.eventually(func() bool {
		h.clk.Advance(time.Second)
		select {
		case r = <-waiting:
			return true
		default:
			return false
		}
	}, "the waiter is admitted once the stop is confirmed")
	require.NoError(t, r.err)
	assert.Equal(t, PathCreated, r.l.Path)
	assert.Equal(t, 1, h.f.MaxRunning(), "never two at once")
	hang.Release()
	h.release(r.l, OutcomeOK)
	rec, _ := h.record("a")
	assert.Equal(t, StateParkedStopped, rec.State, "the evicted one is parked stopped")
}

// An acquire of the key whose stop is unconfirmed waits for the
// confirmation rather than race the stop.
func TestClaimWaitsForAnUnconfirmedStop(t *testing.T) {
	h := newHarness(t, WithStopTimeout(5*time.Second), WithPollInterval(time.Second))
	a := h.acquire("a")
	h.release(a, OutcomeOK)
	hang := h.f.Hang(pooltest.OpStop, true)
	defer hang.Release()
	h.clk.Advance(time.Minute) // keep-warm TTL: the stop hangs
	require.NoError(t, hang.WaitBlocked(waitCtx(t), 1))
	h.eventually(func() bool {
		h.clk.Advance(time.Second)
		return h.obs.get(func() int { return h.obs.hungStops }) == 1
	}, "the stop is taken for hung")

	waiting := h.acquireAsync(h.ctx, "a")
	// Pool time is the fake clock's and stands still: a correct pool never
	// admits the claim here. The pause only gives a wrong one the chance
	// to, so a slow machine can hide a bug but never fail this test.
	time.Sleep(20 * time.Millisecond) // a chance for a wrong pool only; cannot fail a right one
	select {
	case r := <-waiting:
		t.Fatalf("claimed while its stop may land: %+v", r)
	default:
	}
	hang.Release() // the stop lands
	var r acquired
	h.eventually(func() bool {
		h.clk.Advance(time.Second)
		select {
		case r = <-waiting:
			return true
		default:
			return false
		}
	}, "the claim goes on once the stop is confirmed")
	require.NoError(t, r.err)
	assert.Equal(t, PathResumed, r.l.Path)
	assert.Equal(t, a.Sandbox.ID, r.l.Sandbox.ID)
	h.release(r.l, OutcomeOK)
}

// An acquire of a parked key refused a running slot leaves the sandbox
// parked with its TTL running, on the resume path and on the warm one (a
// sandbox started underneath the pool).
func TestRefusedAcquireKeepsTheParkedTTL(t *testing.T) {
	for _, tc := range []struct {
		name         string
		startedUnder bool
		refused      bool
	}{
		{"no refused acquire", false, false},
		{"refused on the resume path", false, true},
		{"refused on the warm path", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithMaxRunning(1), WithKeepWarm(0), WithStoppedTTL(time.Hour))
			a := h.acquire("a")
			h.release(a, OutcomeOK) // keep-warm off: parked stopped for an hour
			rec, _ := h.record("a")
			require.Equal(t, StateParkedStopped, rec.State)
			if tc.startedUnder {
				h.f.SetState(a.Sandbox.ID, provider.StateStarted, "")
			}
			b := h.acquire("b") // the only slot
			if tc.refused {
				_, err := h.p.Acquire(h.ctx, "a", testSpec, Reject())
				require.Equal(t, provider.ResourceExhausted, provider.Code(err), "%v", err)
				h.settle()
			}
			h.release(b, OutcomeOK)
			for range 3 {
				h.advance(time.Hour)
			}
			assert.Empty(t, h.state(a.Sandbox.ID), "parked stopped past its TTL: deleted")
			_, ok := h.record("a")
			assert.False(t, ok, "its record went with it")
			assert.Empty(t, h.state(b.Sandbox.ID))
		})
	}
}
