package pool

import (
	"context"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// keyState is what the pool knows of one key in memory. Operations on a key
// (an acquire's steps, a release, a timer, an eviction) run under its lock,
// which a waiter can abandon; a turn does not hold it between Acquire and
// Release.
type keyState struct {
	key  string
	lock chan struct{}

	// Guarded by Pool.mu.
	refs     int    // goroutines and live leases that hold a pointer to it and may lock it
	gen      uint64 // generation of the stored record; 0: none. The pool is the store's one writer.
	lease    *Lease // the newest turn in flight
	hold     *hold  // the running slot of the parked sandbox; nil when it does not run
	timer    clock.Timer
	timerGen uint64
	lastUsed time.Time     // when it was last parked running, for eviction order
	parking  bool          // a finishing turn is making room for it under the warm cap: counted, never a victim
	stopping chan struct{} // closed once a stop the provider did not confirm in time is confirmed
}

// hold is one running slot of the admission gate, taken before a create or
// a start and given back only once the provider shows the sandbox not
// running.
type hold struct {
	sandbox  string
	evicting bool
}

func (ks *keyState) lockCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case ks.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (ks *keyState) tryLock() bool {
	select {
	case ks.lock <- struct{}{}:
		return true
	default:
		return false
	}
}

// unlock releases ks and wakes whoever waits for a change.
func (p *Pool) unlock(ks *keyState) {
	<-ks.lock
	p.signal()
}

// enterLocked returns key's state, made if needed, with one more reference.
func (p *Pool) enterLocked(key string) *keyState {
	ks := p.keys[key]
	if ks == nil {
		ks = &keyState{key: key, lock: make(chan struct{}, 1)}
		p.keys[key] = ks
	}
	ks.refs++
	return ks
}

func (p *Pool) enter(key string) *keyState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enterLocked(key)
}

// leave drops a reference and forgets the key's state once nothing about
// it is left.
func (p *Pool) leave(ks *keyState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leaveLocked(ks)
}

func (p *Pool) leaveLocked(ks *keyState) {
	ks.refs--
	if ks.refs == 0 && ks.gen == 0 && ks.lease == nil && ks.hold == nil && ks.timer == nil && ks.stopping == nil && p.keys[ks.key] == ks {
		delete(p.keys, ks.key)
	}
}

func (p *Pool) signal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signalLocked()
}

func (p *Pool) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// newHoldLocked takes a running slot whatever the cap says; admit is the
// gate, this is its bookkeeping.
func (p *Pool) newHoldLocked() *hold {
	h := &hold{}
	p.holds[h] = struct{}{}
	return h
}

// releaseHold gives a slot back. Idempotent.
func (p *Pool) releaseHold(h *hold) {
	if h == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.holds[h]; ok {
		delete(p.holds, h)
		p.signalLocked()
	}
}

// takeHold moves the key's parked slot to the caller.
func (p *Pool) takeHold(ks *keyState) *hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := ks.hold
	ks.hold = nil
	return h
}

// armLocked runs f in the background after d, replacing the key's timer.
// f is told whether it is still the key's timer.
func (p *Pool) armLocked(ks *keyState, d time.Duration, f func()) {
	if ks.timer != nil {
		ks.timer.Stop()
		ks.timer = nil
	}
	if p.closing {
		return
	}
	ks.timerGen++
	gen := ks.timerGen
	ks.timer = p.clk.AfterFunc(max(d, 0), func() {
		p.mu.Lock()
		if ks.timerGen != gen {
			p.mu.Unlock()
			return
		}
		ks.timer = nil
		ks.refs++ // for f, which leaves
		p.mu.Unlock()
		if !p.goBackground(func() { defer p.leave(ks); f() }) {
			p.leave(ks)
		}
	})
}

func (p *Pool) cancelTimer(ks *keyState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancelTimerLocked(ks)
}

func (p *Pool) cancelTimerLocked(ks *keyState) {
	if ks.timer != nil {
		ks.timer.Stop()
		ks.timer = nil
	}
	ks.timerGen++
}

// goBackground runs f on a goroutine Shutdown waits for, unless the pool is
// done; it reports whether f runs.
func (p *Pool) goBackground(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.goLocked(f)
	return true
}

func (p *Pool) goLocked(f func()) {
	p.bg++
	go func() {
		defer func() {
			p.mu.Lock()
			p.bg--
			p.signalLocked()
			p.mu.Unlock()
		}()
		f()
	}()
}

// waitBackground waits until no background goroutine runs, or ctx ends.
func (p *Pool) waitBackground(ctx context.Context) error {
	for {
		p.mu.Lock()
		n, ch := p.bg, p.changed
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
