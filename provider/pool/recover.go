package pool

import (
	"context"
)

// recover picks up the records a previous process left: a turn in flight
// is over (its sandbox is deleted), a sandbox parked running is checked and
// gets the rest of its keep-warm TTL, one parked stopped the rest of its
// parked-stopped TTL. A sandbox the provider lost is forgotten, one in error
// deleted; one that cannot be asked about now is taken to run, so that the
// cap holds, and its timer sorts it out.
func (p *Pool) recover(ctx context.Context) error {
	recs, err := p.store.List(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		ks := p.enter(rec.Key)
		p.mu.Lock()
		ks.gen = rec.Gen
		p.mu.Unlock()
		if err := ks.lockCtx(ctx); err != nil {
			p.leave(ks)
			return err
		}
		p.recoverKey(ctx, ks, rec)
		p.unlock(ks)
		p.leave(ks)
	}
	return nil
}

func (p *Pool) recoverKey(ctx context.Context, ks *keyState, rec Record) {
	switch rec.State {
	case StateInUse:
		p.discard(ctx, ks, rec, ReasonShutdownInFlight, "its turn was in flight when the previous process ended")
		return
	case StateParkedStopped:
		p.armStoppedTTL(ks, rec)
		return
	}
	gctx, cancel := p.opCtx(p.cfg.stopTimeout)
	sb, err := p.get(gctx, rec.SandboxID)
	cancel()
	switch classify(sb, err) {
	case vGone:
		p.forget(ctx, ks, rec, ReasonProviderLost, "gone when the pool started")
	case vErrored:
		p.discard(ctx, ks, rec, ReasonProviderLost, "in error when the pool started: "+sb.ErrorReason)
	case vStopped:
		p.parkStopped(ctx, ks, rec)
	default:
		p.mu.Lock()
		h := p.newHoldLocked()
		h.sandbox = rec.SandboxID
		ks.hold = h
		ks.lastUsed = rec.Since
		p.mu.Unlock()
		p.armKeepWarm(ks, rec)
	}
}
