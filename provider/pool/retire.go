package pool

import (
	"context"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// verdict is what the provider's answer about a sandbox means to the pool.
type verdict int

const (
	vRunning verdict = iota
	vStopped
	// vGone: not found or destroyed, a terminal answer: forget it.
	vGone
	// vErrored: in error, a terminal answer: delete it, never park it.
	vErrored
	// vTransient: no answer, or one mid-transition: keep it for a retry.
	vTransient
)

// classify is the one reading of a Get (or a lifecycle call's answer).
// Only not_found, destroyed and error are terminal; every other failure
// (unavailable, resource_exhausted for a 429, internal for a 5xx,
// failed_precondition mid-transition) keeps the sandbox.
func classify(sb *provider.Sandbox, err error) verdict {
	switch {
	case provider.IsNotFound(err):
		return vGone
	case err != nil || sb == nil:
		return vTransient
	}
	switch sb.State {
	case provider.StateStarted:
		return vRunning
	case provider.StateStopped, provider.StatePaused:
		// A paused sandbox is at rest as a stopped one is, and start
		// brings it back the same way.
		return vStopped
	case provider.StateDestroyed:
		return vGone
	case provider.StateError:
		return vErrored
	}
	return vTransient
}

func (v verdict) runs() bool { return v == vRunning || v == vTransient }

// opCtx bounds one provider call on the pool's clock. It is detached from
// any caller: what the pool starts, it finishes.
func (p *Pool) opCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(p.ctx, p.clk, d)
}

func (p *Pool) get(ctx context.Context, id string) (*provider.Sandbox, error) {
	return p.prov.Get(ctx, id)
}

// settle gets the sandbox, waiting out a transition (starting, stopping)
// for up to StopTimeout.
func (p *Pool) settle(id string) (*provider.Sandbox, error) {
	ctx, cancel := p.opCtx(p.cfg.stopTimeout)
	defer cancel()
	for {
		sb, err := p.get(ctx, id)
		if err != nil || (sb.State != provider.StateStarting && sb.State != provider.StateStopping) {
			return sb, err
		}
		if clock.Sleep(ctx, p.clk, p.cfg.pollInterval) != nil {
			return sb, provider.Errorf(provider.Unavailable, "sandbox %s is still %s after %s", id, sb.State, p.cfg.stopTimeout)
		}
	}
}

// action is what retire drives a sandbox to.
type action int

const (
	actStop action = iota
	actDelete
)

func (a action) String() string {
	if a == actDelete {
		return "delete"
	}
	return "stop"
}

// reached reports whether v is where act drives a sandbox.
func (a action) reached(v verdict) bool {
	if a == actDelete {
		return v == vGone
	}
	return v == vStopped || v == vGone || v == vErrored
}

// teardown deletes a sandbox for reason, logged and counted, and gives its
// slot back once it no longer runs. running says whether it may run, in
// which case a provider that records stop reasons is told the reason first,
// so that the stopped event says why.
func (p *Pool) teardown(key, id string, h *hold, running bool, reason Reason, detail string) {
	p.noteTeardown(key, id, reason, detail)
	stopReason := ""
	if running {
		stopReason = reason.stopReason()
	}
	p.retire(key, id, h, actDelete, stopReason)
}

func (p *Pool) noteTeardown(key, id string, reason Reason, detail string) {
	p.obs.TornDown(reason)
	p.log.Info("pool teardown", "pool", p.cfg.name, "key", key, "sandbox", id, "reason", string(reason), "detail", detail)
}

// retire drives id to act's end and gives h back as soon as the sandbox no
// longer runs. It waits up to StopTimeout; past that the provider is taken
// for hung: the slot stays taken, and a poll of the real state goes on in
// the background until it confirms. It reports whether it finished in time.
func (p *Pool) retire(key, id string, h *hold, act action, stopReason string) bool {
	ctx, cancel := p.opCtx(p.cfg.stopTimeout)
	defer cancel()
	if p.drive(ctx, id, h, act, stopReason) {
		return true
	}
	p.obs.StopUnconfirmed()
	p.log.Warn("pool: the provider did not confirm in time; its running slot stays taken until it does",
		"pool", p.cfg.name, "key", key, "sandbox", id, "action", act.String(), "timeout", p.cfg.stopTimeout)
	p.goBackground(func() { p.drive(p.ctx, id, h, act, stopReason) })
	return false
}

type actResult struct {
	sb  *provider.Sandbox
	err error
}

// drive sends act and polls the real state until it is reached or ctx
// ends, sending act again after a failure. The call runs apart from the
// poll, so a call that hangs delays nothing but itself.
func (p *Pool) drive(ctx context.Context, id string, h *hold, act action, stopReason string) bool {
	send := func() <-chan actResult {
		ch := make(chan actResult, 1)
		go func() {
			sb, err := p.act(ctx, id, act, stopReason)
			ch <- actResult{sb, err}
		}()
		return ch
	}
	pending := send()
	failed := false
	tick := p.clk.NewTicker(p.cfg.pollInterval)
	defer tick.Stop()
	for {
		var v verdict
		select {
		case r := <-pending:
			pending = nil
			v = classify(r.sb, r.err)
			if act == actDelete && r.err == nil {
				v = vGone
			}
			failed = r.err != nil
		case <-tick.C():
			v = classify(p.get(ctx, id))
			if !act.reached(v) && failed && pending == nil {
				// Sent again only after a poll, so that a call that fails
				// at once (a stop of a stopped sandbox) is not a hot loop.
				pending, failed = send(), false
			}
		case <-ctx.Done():
			return false
		}
		if !v.runs() {
			p.releaseHold(h)
		}
		if act.reached(v) {
			p.releaseHold(h)
			return true
		}
	}
}

// act sends one stop or delete; a delete of a sandbox that may run is
// preceded by a stop with the reason, when the provider records one.
func (p *Pool) act(ctx context.Context, id string, act action, stopReason string) (*provider.Sandbox, error) {
	rs, withReason := p.prov.(provider.ReasonStopper)
	withReason = withReason && stopReason != ""
	if act == actDelete {
		if withReason {
			_, _ = rs.StopWithReason(ctx, id, stopReason) // best effort: the delete decides
		}
		return nil, p.prov.Delete(ctx, id)
	}
	if withReason {
		return rs.StopWithReason(ctx, id, stopReason)
	}
	return p.prov.Stop(ctx, id)
}

// stopWhy is why a parked sandbox is stopped: a teardown reason (counted),
// or parking (not a teardown).
type stopWhy struct {
	reason Reason // "" for parking
	detail string
}

func (w stopWhy) stopReason() string {
	if w.reason == "" {
		return stopReasonParked
	}
	return w.reason.stopReason()
}

// stopParked stops the key's sandbox (rec, in use or parked running) and
// parks it stopped. The caller holds ks's lock. When the provider does not
// confirm within StopTimeout, the key is marked stopping: an Acquire of it
// waits for the confirmation rather than race the stop.
func (p *Pool) stopParked(ctx context.Context, ks *keyState, rec Record, why stopWhy) {
	p.stopParkedFor(ctx, ks, rec, why, false)
}

// stopParkedFor is stopParked; with handOver, the running slot of a stop
// confirmed in time is returned to the caller (an eviction's acquire)
// rather than given back to whoever asks first.
func (p *Pool) stopParkedFor(ctx context.Context, ks *keyState, rec Record, why stopWhy, handOver bool) *hold {
	p.cancelTimer(ks)
	if why.reason != "" {
		p.noteTeardown(ks.key, rec.SandboxID, why.reason, why.detail)
	}
	p.mu.Lock()
	h := ks.hold
	p.mu.Unlock()
	released := h
	if handOver {
		released = nil
	}
	sctx, cancel := p.opCtx(p.cfg.stopTimeout)
	done := p.drive(sctx, rec.SandboxID, released, actStop, why.stopReason())
	cancel()
	if done {
		var kept *hold
		if handOver && h != nil {
			p.mu.Lock()
			if ks.hold == h {
				ks.hold = nil
			}
			h.sandbox, h.evicting = "", false
			p.mu.Unlock()
			kept = h
		}
		p.parkStopped(ctx, ks, rec)
		return kept
	}
	p.obs.StopUnconfirmed()
	p.log.Warn("pool: the provider did not confirm a stop in time; its running slot stays taken until it does",
		"pool", p.cfg.name, "key", ks.key, "sandbox", rec.SandboxID, "timeout", p.cfg.stopTimeout)
	ch := make(chan struct{})
	p.mu.Lock()
	ks.stopping = ch
	ks.refs++
	p.mu.Unlock()
	if !p.goBackground(func() { defer p.leave(ks); p.confirmStop(ks, rec, h, why, ch) }) {
		p.mu.Lock()
		ks.stopping = nil
		close(ch)
		p.mu.Unlock()
		p.leave(ks)
	}
	return nil
}

// confirmStop goes on polling a stop that was not confirmed in time. Once
// it is, the slot is given back and waiters are let go before the key's
// lock is taken (a waiter may hold it), then the record is parked stopped
// unless somebody changed it meanwhile.
func (p *Pool) confirmStop(ks *keyState, rec Record, h *hold, why stopWhy, ch chan struct{}) {
	ctx := p.ctx // background work: nobody's call bounds it but the pool's life
	done := p.drive(ctx, rec.SandboxID, h, actStop, why.stopReason())
	p.mu.Lock()
	if ks.hold == h {
		ks.hold = nil
	}
	ks.stopping = nil
	close(ch)
	p.mu.Unlock()
	p.releaseHold(h)
	if !done || ks.lockCtx(ctx) != nil {
		return
	}
	defer p.unlock(ks)
	if cur, ok, err := p.store.Load(ctx, ks.key); err == nil && ok && cur.Gen == rec.Gen {
		p.parkStopped(ctx, ks, cur)
	}
}

// parkStopped records the key's sandbox parked stopped, gives its slot back
// and arms the parked-stopped TTL. The caller holds ks's lock.
func (p *Pool) parkStopped(ctx context.Context, ks *keyState, rec Record) {
	p.releaseHold(p.takeHold(ks))
	if rec.State != StateParkedStopped {
		next := rec
		next.State, next.Since = StateParkedStopped, p.clk.Now()
		got, err := p.swap(ctx, ks, rec.Gen, &next)
		if err != nil {
			p.log.Error("pool: record a parked-stopped sandbox", "pool", p.cfg.name, "key", ks.key, "sandbox", rec.SandboxID, "err", err)
			return
		}
		rec = got
	}
	p.armStoppedTTL(ks, rec)
}

func (p *Pool) armStoppedTTL(ks *keyState, rec Record) {
	left := p.cfg.stoppedTTL - p.clk.Since(rec.Since)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armLocked(ks, left, func() { p.stoppedExpired(ks, rec.Gen) })
}

func (p *Pool) armKeepWarm(ks *keyState, rec Record) {
	left := p.cfg.keepWarm - p.clk.Since(rec.Since)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armLocked(ks, left, func() { p.keepWarmExpired(ks, rec.Gen) })
}

// rearm restarts the TTL of a parked record that an acquire left as it was.
func (p *Pool) rearm(ks *keyState, rec Record) {
	switch rec.State {
	case StateParkedRunning, StateInUse:
		p.armKeepWarm(ks, rec)
	case StateParkedStopped:
		p.armStoppedTTL(ks, rec)
	}
}

// lockForTimer takes ks's lock for a timer, or re-arms the timer a poll
// later when somebody else has it (an acquire that may yet fail and leave
// the sandbox parked).
func (p *Pool) lockForTimer(ks *keyState, rearm func()) bool {
	if ks.tryLock() {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armLocked(ks, p.cfg.pollInterval, rearm)
	return false
}

func (p *Pool) keepWarmExpired(ks *keyState, gen uint64) {
	if !p.lockForTimer(ks, func() { p.keepWarmExpired(ks, gen) }) {
		return
	}
	defer p.unlock(ks)
	ctx := p.ctx // a timer's work: nobody's call bounds it but the pool's life
	rec, ok, err := p.store.Load(ctx, ks.key)
	p.mu.Lock()
	inUse := ks.lease != nil
	p.mu.Unlock()
	// A record left in use by a release that could not write it is parked
	// running for all purposes.
	parked := rec.State == StateParkedRunning || rec.State == StateInUse && !inUse
	if err != nil || !ok || rec.Gen != gen || !parked {
		return
	}
	p.stopParked(ctx, ks, rec, stopWhy{ReasonTTLExpired, "parked running for " + p.cfg.keepWarm.String()})
}

// stoppedExpired deletes a sandbox parked stopped for its TTL, unless the
// provider's own auto-delete already did, in which case only the pointer
// goes.
func (p *Pool) stoppedExpired(ks *keyState, gen uint64) {
	if !p.lockForTimer(ks, func() { p.stoppedExpired(ks, gen) }) {
		return
	}
	defer p.unlock(ks)
	ctx := p.ctx // a timer's work: nobody's call bounds it but the pool's life
	rec, ok, err := p.store.Load(ctx, ks.key)
	if err != nil || !ok || rec.Gen != gen || rec.State != StateParkedStopped {
		return
	}
	if _, auto := p.prov.(provider.AutoDeleter); auto {
		gctx, cancel := p.opCtx(p.cfg.stopTimeout)
		sb, err := p.get(gctx, rec.SandboxID)
		cancel()
		if classify(sb, err) == vGone {
			p.forget(ctx, ks, rec, ReasonTTLExpired, "deleted by the provider's auto-delete")
			return
		}
	}
	p.discard(ctx, ks, rec, ReasonTTLExpired, "parked stopped for "+p.cfg.stoppedTTL.String())
}

// discard tears the record's sandbox down and forgets the record. The
// caller holds ks's lock.
func (p *Pool) discard(ctx context.Context, ks *keyState, rec Record, reason Reason, detail string) {
	p.cancelTimer(ks)
	h := p.takeHold(ks)
	if _, err := p.swap(ctx, ks, rec.Gen, nil); err != nil {
		p.log.Error("pool: forget a record", "pool", p.cfg.name, "key", ks.key, "err", err)
	}
	running := h != nil || rec.State != StateParkedStopped
	p.teardown(ks.key, rec.SandboxID, h, running, reason, detail)
}

// forget drops the record of a sandbox the provider no longer has. The
// caller holds ks's lock.
func (p *Pool) forget(ctx context.Context, ks *keyState, rec Record, reason Reason, detail string) {
	p.cancelTimer(ks)
	p.releaseHold(p.takeHold(ks))
	p.noteTeardown(ks.key, rec.SandboxID, reason, detail)
	if _, err := p.swap(ctx, ks, rec.Gen, nil); err != nil {
		p.log.Error("pool: forget a record", "pool", p.cfg.name, "key", ks.key, "err", err)
	}
}

// swap replaces the key's record in the store and keeps ks.gen in step.
// ctx is the store call's alone: the pool's own deadlines bound provider
// calls, and a store is local or bounds its calls itself.
func (p *Pool) swap(ctx context.Context, ks *keyState, gen uint64, next *Record) (Record, error) {
	rec, err := p.store.Swap(ctx, ks.key, gen, next)
	if err == nil {
		p.mu.Lock()
		ks.gen = rec.Gen
		p.mu.Unlock()
	}
	return rec, err
}
