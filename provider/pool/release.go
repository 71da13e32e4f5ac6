package pool

import (
	"context"
)

// Release ends the turn of l. With OutcomeOK the sandbox is parked running
// for the keep-warm TTL, evicting the least recently parked warm sandbox of
// another key when every warm slot is taken (or stopped at once when
// keep-warm or the warm cap is 0, or no warm sandbox can be evicted); OutcomeFailed and OutcomeDiscard delete it
// (ReasonTurnFailed, ReasonExplicit). A lease whose key was taken by a newer
// turn has its sandbox deleted (ReasonSuperseded): an older turn never
// overwrites the pointer of a newer one. Releasing twice, or after Shutdown
// took the sandbox, does nothing.
//
// Release waits for the pool's work (a stop takes a second or so) until ctx
// ends; the work goes on either way, so a cancelled turn still releases.
func (p *Pool) Release(ctx context.Context, l *Lease, outcome Outcome) error {
	if l == nil {
		return nil
	}
	p.mu.Lock()
	if l.releasing || l.done {
		p.mu.Unlock()
		return nil
	}
	l.releasing = true
	l.ks.refs++
	done := make(chan struct{})
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		p.leave(l.ks)
		return nil
	}
	// The release goes on after the caller stops waiting (see above), so
	// its store calls must not end with ctx.
	wctx := context.WithoutCancel(ctx)
	p.goLocked(func() {
		defer close(done)
		defer p.leave(l.ks)
		p.finish(wctx, l, outcome)
	})
	p.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// finish does what Release promises, under the key's lock, unless a newer
// turn superseded l and holds the lock meanwhile.
func (p *Pool) finish(ctx context.Context, l *Lease, outcome Outcome) {
	ks := l.ks
	for p.ctx.Err() == nil {
		p.mu.Lock()
		superseded := l.superseded
		p.mu.Unlock()
		select {
		case ks.lock <- struct{}{}:
			defer p.unlock(ks)
			p.finishLocked(ctx, l, outcome)
			return
		case <-superseded:
			if p.finishSuperseded(l) {
				return
			}
		case <-p.ctx.Done():
		}
	}
}

// finishSuperseded deletes the sandbox of a superseded turn without the
// key's lock, so that the newer turn holding it can have the slot. It
// reports false when the newer turn failed meanwhile: then l's release
// takes the lock after all.
func (p *Pool) finishSuperseded(l *Lease) bool {
	p.mu.Lock()
	select {
	case <-l.superseded:
	default:
		p.mu.Unlock()
		return false
	}
	if l.revoked || l.done {
		p.mu.Unlock()
		return true // Shutdown deleted it
	}
	h := p.endLeaseLocked(l)
	p.mu.Unlock()
	p.teardown(l.Key, l.Sandbox.ID, h, true, ReasonSuperseded, "a newer turn took the key")
	return true
}

func (p *Pool) finishLocked(ctx context.Context, l *Lease, outcome Outcome) {
	ks := l.ks
	p.mu.Lock()
	revoked := l.revoked || l.done
	p.mu.Unlock()
	if revoked {
		return // Shutdown deleted it
	}
	h := p.endLease(l)
	id := l.Sandbox.ID
	rec, ok, err := p.store.Load(ctx, ks.key)
	switch {
	case err != nil:
		// The pointer cannot be moved; the record stays in use, which the
		// next acquire or the keep-warm timer takes for parked running.
		p.log.Error("pool release: read the record", "pool", p.cfg.name, "key", ks.key, "err", err)
		p.mu.Lock()
		ks.hold = h
		p.mu.Unlock()
		p.armKeepWarm(ks, Record{State: StateInUse, Gen: l.gen, Since: p.clk.Now()})
		return
	case !ok || rec.Gen != l.gen:
		p.teardown(ks.key, id, h, true, ReasonSuperseded, "a newer turn took the key")
		return
	}
	switch outcome {
	case OutcomeFailed, OutcomeDiscard:
		reason := ReasonTurnFailed
		if outcome == OutcomeDiscard {
			reason = ReasonExplicit
		}
		if _, err := p.swap(ctx, ks, rec.Gen, nil); err != nil {
			p.log.Error("pool release: forget the record", "pool", p.cfg.name, "key", ks.key, "err", err)
		}
		p.teardown(ks.key, id, h, true, reason, "")
	default:
		p.park(ctx, ks, rec, h)
	}
}

// park parks the key's sandbox after a turn: running while keep-warm is on
// and a warm slot is free or can be freed by evicting the least recently
// parked warm sandbox of another key, stopped otherwise.
func (p *Pool) park(ctx context.Context, ks *keyState, rec Record, h *hold) {
	p.mu.Lock()
	ks.hold, ks.parking = h, true
	p.mu.Unlock()
	room := p.makeWarmRoom(ctx, ks)
	p.mu.Lock()
	ks.parking = false
	p.mu.Unlock()
	if !room {
		p.stopParked(ctx, ks, rec, stopWhy{})
		return
	}
	next := rec
	next.State, next.Since = StateParkedRunning, p.clk.Now()
	got, err := p.swap(ctx, ks, rec.Gen, &next)
	if err != nil {
		p.log.Error("pool release: park the record", "pool", p.cfg.name, "key", ks.key, "err", err)
		p.stopParked(ctx, ks, rec, stopWhy{})
		return
	}
	p.mu.Lock()
	ks.lastUsed = got.Since
	p.mu.Unlock()
	p.armKeepWarm(ks, got)
}

// makeWarmRoom reports whether ks's sandbox, running with ks.hold set, may
// park running: keep-warm is on and, once the least recently parked warm
// sandboxes of other keys are evicted as needed, it is within the warm cap.
// The caller holds ks's lock; an eviction only tries the victim's.
func (p *Pool) makeWarmRoom(ctx context.Context, ks *keyState) bool {
	for tries := 0; ; tries++ {
		p.mu.Lock()
		if p.closing || p.cfg.keepWarm <= 0 || p.cfg.warmCap <= 0 {
			p.mu.Unlock()
			return false
		}
		if p.warmLocked() <= p.cfg.warmCap { // this key is counted already
			p.mu.Unlock()
			return true
		}
		var victim *keyState
		if tries < 3 {
			victim = p.victimLocked(ks.key)
		}
		p.mu.Unlock()
		if victim == nil {
			return false // nothing to evict: every warm one is being stopped
		}
		p.evict(ctx, victim)
		p.leave(victim)
	}
}

// endLease ends l's turn and returns its running slot, or nil when it has
// already ended.
func (p *Pool) endLease(l *Lease) *hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.endLeaseLocked(l)
}

func (p *Pool) endLeaseLocked(l *Lease) *hold {
	if l.done {
		return nil
	}
	l.done = true
	if l.stopBeat != nil {
		l.stopBeat()
	}
	delete(p.leases, l)
	if l.ks.lease == l {
		l.ks.lease = nil
	}
	p.leaveLocked(l.ks)
	close(l.released)
	p.signalLocked()
	h := l.hold
	l.hold = nil
	return h
}
