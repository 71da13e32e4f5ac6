package engine

import (
	"context"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// Runner runs steps on a clock under its owner's lock.
type Runner struct {
	Clock clock.Clock
	// Lock is the owner's: held when Begin is called, and taken again to
	// report a step that completes later.
	Lock sync.Locker
	// Inline runs the work in Begin's goroutine, for backends whose work is
	// free: a step with no delay then completes before Begin returns.
	Inline bool
	// Ctx is passed to the work; cancelling it is how the owner asks the
	// work to end.
	Ctx context.Context
	// WG counts the goroutines running work, so that the owner can wait
	// for them when it closes.
	WG *sync.WaitGroup
}

// Result is how a step ended.
type Result struct {
	// URL is what the work returned, such as a started toolbox's URL.
	URL string
	// Err is the work's error.
	Err error
	// Later is true when the step completed after Begin returned, in the
	// clock's or the work's goroutine: the caller has moved on, so taking
	// the next step is up to whoever receives the Result.
	Later bool
}

// Begin starts a step that lasts delay and does work (nil for none). done
// receives the Result exactly once, with Lock held, when the delay has
// passed and the work has returned, whichever is last. Begin reports whether
// that already happened.
func (r Runner) Begin(delay time.Duration, work func(context.Context) (string, error), done func(Result)) (completed bool) {
	if delay <= 0 && (work == nil || r.Inline) {
		var res Result
		if work != nil {
			res.URL, res.Err = work(r.Ctx)
		}
		done(res)
		return true
	}
	// Both halves report to complete; the last one delivers the Result.
	// Each runs with Lock held, so remaining needs no lock of its own.
	remaining := 1
	var res Result
	complete := func() {
		remaining--
		if remaining == 0 {
			res.Later = true
			done(res)
		}
	}
	if delay > 0 {
		remaining++
		r.Clock.AfterFunc(delay, func() {
			r.Lock.Lock()
			defer r.Lock.Unlock()
			complete()
		})
	}
	if work == nil || r.Inline {
		if work != nil {
			res.URL, res.Err = work(r.Ctx)
		}
		complete()
		return false
	}
	r.WG.Add(1)
	go func() {
		defer r.WG.Done()
		url, err := work(r.Ctx)
		r.Lock.Lock()
		defer r.Lock.Unlock()
		res.URL, res.Err = url, err
		complete()
	}()
	return false
}

// Every calls f each period on c until the returned stop is called. The next
// call is armed only once f has returned, so calls never overlap, and with
// a fake clock f has run by the time Advance returns. Once stop has
// returned no call is armed, but one whose time had come may still be
// running: f checks for itself whether its owner has closed.
func Every(c clock.Clock, period time.Duration, f func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t clock.Timer
	var tick func()
	tick = func() {
		f()
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t = c.AfterFunc(period, tick)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t = c.AfterFunc(period, tick)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
