package clocktest

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// Fake is a clock.Clock whose time moves only when Advance or Set is called.
// Timers and tickers fire synchronously inside Advance, in deadline order.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
	changed chan struct{} // closed and replaced whenever waiters changes
}

var _ clock.Clock = (*Fake)(nil)

// NewFake returns a Fake set to start. A zero start means a fixed, arbitrary
// instant so that tests are reproducible.
func NewFake(start time.Time) *Fake {
	if start.IsZero() {
		start = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	}
	return &Fake{now: start, changed: make(chan struct{})}
}

type waiter struct {
	when   time.Time
	period time.Duration // >0 for tickers
	ch     chan time.Time
	fn     func()
	active bool
}

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

func (f *Fake) NewTimer(d time.Duration) clock.Timer {
	w := &waiter{ch: make(chan time.Time, 1)}
	f.schedule(w, d)
	return &fakeTimer{f: f, w: w}
}

func (f *Fake) AfterFunc(d time.Duration, fn func()) clock.Timer {
	w := &waiter{fn: fn}
	f.schedule(w, d)
	return &fakeTimer{f: f, w: w}
}

func (f *Fake) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("clocktest: non-positive ticker period")
	}
	w := &waiter{ch: make(chan time.Time, 1), period: d}
	f.schedule(w, d)
	return &fakeTicker{f: f, w: w}
}

// Advance moves time forward by d, firing every timer that falls due on the
// way, each at its own deadline.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.Set(target)
}

// Set moves time to t (never backwards), firing timers that fall due.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		w := f.nextDueLocked(t)
		if w == nil {
			if t.After(f.now) {
				f.now = t
			}
			f.mu.Unlock()
			return
		}
		if w.when.After(f.now) {
			f.now = w.when
		}
		now := f.now
		fn := w.fn
		if w.period > 0 {
			w.when = w.when.Add(w.period)
		} else {
			f.removeLocked(w)
		}
		if w.ch != nil {
			select {
			case w.ch <- now:
			default: // like time.Ticker, drop ticks nobody reads
			}
		}
		f.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
}

// Waiters returns how many timers and tickers are pending.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// Next returns when the earliest pending timer or ticker falls due, so that
// a driver of a simulation can jump from one event to the next; false when
// none is pending.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for _, w := range f.waiters {
		if next.IsZero() || w.when.Before(next) {
			next = w.when
		}
	}
	return next, !next.IsZero()
}

// BlockUntilWaiters waits until at least n timers or tickers are pending, so a
// test can Advance knowing the code under test has armed its timer.
func (f *Fake) BlockUntilWaiters(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.waiters) >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (f *Fake) nextDueLocked(t time.Time) *waiter {
	sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].when.Before(f.waiters[j].when) })
	if len(f.waiters) == 0 || f.waiters[0].when.After(t) {
		return nil
	}
	return f.waiters[0]
}

func (f *Fake) schedule(w *waiter, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.when = f.now.Add(d)
	if !w.active {
		w.active = true
		f.waiters = append(f.waiters, w)
		f.notifyLocked()
	}
}

// removeLocked reports whether w was pending.
func (f *Fake) removeLocked(w *waiter) bool {
	if !w.active {
		return false
	}
	w.active = false
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	f.notifyLocked()
	return true
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f *Fake
	w *waiter
}

func (t *fakeTimer) C() <-chan time.Time { return t.w.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.removeLocked(t.w)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	was := t.f.removeLocked(t.w)
	t.f.mu.Unlock()
	t.f.schedule(t.w, d)
	return was
}

type fakeTicker struct {
	f *Fake
	w *waiter
}

func (t *fakeTicker) C() <-chan time.Time { return t.w.ch }

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.removeLocked(t.w)
}

func (t *fakeTicker) Reset(d time.Duration) {
	t.f.mu.Lock()
	t.f.removeLocked(t.w)
	t.w.period = d
	t.f.mu.Unlock()
	t.f.schedule(t.w, d)
}
