package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// harness is an owner of steps: its lock, a fake clock, and the Results it
// received, in order.
type harness struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	clk     *clocktest.Fake
	results []Result
	r       Runner
}

func newHarness(inline bool) *harness {
	h := &harness{clk: clocktest.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	h.r = Runner{Clock: h.clk, Lock: &h.mu, Inline: inline, Ctx: context.Background(), WG: &h.wg}
	return h
}

// begin calls Begin as an owner does, with its lock held.
func (h *harness) begin(delay time.Duration, work func(context.Context) (string, error)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.r.Begin(delay, work, func(res Result) { h.results = append(h.results, res) })
}

func (h *harness) got() []Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Result(nil), h.results...)
}

func returns(url string, err error) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return url, err }
}

// TestBeginAtOnce: a step with no delay whose work is free (none, or
// inline) completes before Begin returns.
func TestBeginAtOnce(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		inline bool
		work   func(context.Context) (string, error)
		want   Result
	}{
		{"no work", false, nil, Result{}},
		{"inline work", true, returns("http://tb", nil), Result{URL: "http://tb"}},
		{"inline work that fails", true, returns("", boom), Result{Err: boom}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(tc.inline)
			assert.True(t, h.begin(0, tc.work))
			assert.Equal(t, []Result{tc.want}, h.got())
		})
	}
}

// TestBeginWaitsForTheDelay: with a delay, the Result comes when the clock
// reaches it, even if the work returned long before, and only once.
func TestBeginWaitsForTheDelay(t *testing.T) {
	for _, inline := range []bool{false, true} {
		h := newHarness(inline)
		assert.False(t, h.begin(time.Second, returns("http://tb", nil)))
		if !inline {
			h.wg.Wait() // the work has returned
		}
		h.clk.Advance(999 * time.Millisecond)
		assert.Empty(t, h.got(), "before the delay (inline %v)", inline)
		h.clk.Advance(time.Millisecond)
		assert.Equal(t, []Result{{URL: "http://tb", Later: true}}, h.got(), "inline %v", inline)
		h.clk.Advance(time.Hour)
		assert.Len(t, h.got(), 1)
	}
}

// TestBeginWaitsForTheWork: when the work outlasts the delay, the Result
// comes when the work returns, with its error.
func TestBeginWaitsForTheWork(t *testing.T) {
	for _, delay := range []time.Duration{0, time.Second} {
		h := newHarness(false)
		release := make(chan struct{})
		boom := errors.New("boom")
		var ran atomic.Bool
		work := func(context.Context) (string, error) {
			ran.Store(true)
			<-release
			return "", boom
		}
		assert.False(t, h.begin(delay, work))
		h.clk.Advance(time.Hour)
		assert.Empty(t, h.got(), "the work still runs (delay %v)", delay)
		close(release)
		h.wg.Wait()
		require.True(t, ran.Load())
		assert.Equal(t, []Result{{Err: boom, Later: true}}, h.got(), "delay %v", delay)
	}
}

// TestBeginPassesTheContext: the work gets the Runner's context, so that
// cancelling it ends the work.
func TestBeginPassesTheContext(t *testing.T) {
	h := newHarness(false)
	ctx, cancel := context.WithCancel(context.Background())
	h.r.Ctx = ctx
	h.begin(0, func(ctx context.Context) (string, error) { <-ctx.Done(); return "", ctx.Err() })
	cancel()
	h.wg.Wait()
	assert.Equal(t, []Result{{Err: context.Canceled, Later: true}}, h.got())
}

// TestEvery: f runs once per period on the clock, and not after stop.
func TestEvery(t *testing.T) {
	clk := clocktest.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var calls atomic.Int32
	stop := Every(clk, 10*time.Second, func() { calls.Add(1) })
	clk.Advance(9 * time.Second)
	assert.Equal(t, int32(0), calls.Load())
	clk.Advance(time.Second)
	assert.Equal(t, int32(1), calls.Load())
	clk.Advance(25 * time.Second)
	assert.Equal(t, int32(3), calls.Load(), "at 20 s and 30 s")
	stop()
	clk.Advance(time.Hour)
	assert.Equal(t, int32(3), calls.Load())
	assert.Zero(t, clk.Waiters(), "nothing stays armed")
}
