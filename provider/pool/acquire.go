package pool

import (
	"context"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Lease is one turn's hold on its key's sandbox, from Acquire to Release.
type Lease struct {
	Key string
	// Sandbox is running and its idle clock was reset by the claim.
	Sandbox *provider.Sandbox
	Path    Path
	// Stages are the timed steps of the Acquire, in order; Took is all of
	// it.
	Stages []Stage
	Took   time.Duration

	p        *Pool
	ks       *keyState
	gen      uint64
	claimed  time.Time     // when the claim took the key: the start of WithMaxLease
	released chan struct{} // closed when the lease ends

	// Guarded by Pool.mu.
	hold      *hold
	releasing bool // Release was called
	done      bool // the lease ended (released, or revoked by Shutdown)
	revoked   bool
	stopBeat  context.CancelFunc
	// superseded is closed while a newer turn that took the key after
	// BusyWait makes its sandbox: that turn holds the key's lock and may
	// wait for the very slot this lease holds, so this lease's release
	// then goes without the lock. Replaced by an open one when the newer
	// turn fails, so that the release parks the sandbox as before.
	superseded chan struct{}
}

// acquisition is one Acquire under way.
type acquisition struct {
	p      *Pool
	ks     *keyState
	key    string
	spec   Spec
	fp     string
	caller context.Context // bounds the waits the caller chose (the key's turn in flight), never a provider call
	work   context.Context // the caller's, without its cancellation: for the store calls of what the pool started, which it finishes after the caller gave up
	start  time.Time
	stages []Stage
}

// Acquire returns a running sandbox for key's next turn: the key's sandbox
// parked running (PathWarm), else its sandbox parked stopped, started
// (PathResumed), else a new one (PathCreated). A parked sandbox whose
// fingerprint differs from spec's, or that spec.Check refuses, is torn down
// (ReasonIncompatible) and replaced. The claim resets the sandbox's idle
// clock, so it does not inherit the idleness of its parking.
//
// While another turn of key is in flight, Acquire waits up to BusyWait for
// its Release, then gives key a new sandbox and the older turn's is torn
// down at its release (ReasonSuperseded).
//
// When ctx ends first, Acquire returns unavailable but the pool finishes
// what it started and parks the sandbox for the key's next turn: a turn
// cancelled and sent again finds it warm, and nothing leaks.
//
// Acquire never waits for nor refuses a sandbox because other turns are
// active: there is no admission gate, and the warm cap (WithWarmCap) bounds
// only idle sandboxes parked running.
//
// invalid_argument: a malformed key or spec. unavailable: the pool is shut
// down, ctx ended, or the provider did not answer about the key's sandbox,
// which is then kept for the next try. Otherwise the provider's error from
// create or start.
func (p *Pool) Acquire(ctx context.Context, key string, spec Spec) (*Lease, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	if err := validSpec(spec); err != nil {
		return nil, err
	}
	a := &acquisition{p: p, key: key, spec: spec, fp: p.fingerprint(spec), caller: ctx, work: context.WithoutCancel(ctx), start: p.clk.Now()}
	h := &handoff{done: make(chan struct{})}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil, errClosed
	}
	a.ks = p.enterLocked(key)
	p.goLocked(func() {
		defer p.leave(a.ks)
		l, err := a.run()
		if !h.deliver(l, err) && l != nil {
			// The caller is gone; park what it would have had.
			p.finish(a.work, l, OutcomeOK)
		}
	})
	p.mu.Unlock()
	return h.wait(ctx, key)
}

// handoff passes an acquisition's result to its caller, or tells the
// acquisition that the caller gave up.
type handoff struct {
	mu   sync.Mutex
	done chan struct{}
	gone bool
	l    *Lease
	err  error
}

func (h *handoff) deliver(l *Lease, err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return false
	}
	h.l, h.err = l, err
	close(h.done)
	return true
}

func (h *handoff) wait(ctx context.Context, key string) (*Lease, error) {
	select {
	case <-h.done:
		return h.l, h.err
	case <-ctx.Done():
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
		return h.l, h.err
	default:
	}
	h.gone = true
	return nil, provider.Errorf(provider.Unavailable,
		"acquire %q: %w; what the pool started goes on, and the sandbox is parked for the key's next turn", key, ctx.Err())
}

func (a *acquisition) stage(name string, since time.Time) {
	a.stages = append(a.stages, Stage{Name: name, Took: a.p.clk.Since(since)})
}

func (a *acquisition) run() (*Lease, error) {
	p := a.p
	older, err := a.waitKey()
	if err != nil {
		p.noteAcquireError(a.key, err)
		return nil, err
	}
	defer p.unlock(a.ks)
	l, err := a.acquireLocked(older != nil)
	if older != nil {
		a.endSupersede(older, err == nil)
	}
	if err != nil {
		p.noteAcquireError(a.key, err)
		return nil, err
	}
	p.obs.Acquired(l.Path, l.Took)
	p.log.Debug("pool acquire", "pool", p.cfg.name, "key", a.key, "sandbox", l.Sandbox.ID, "path", string(l.Path), "took", l.Took)
	return l, nil
}

func (p *Pool) noteAcquireError(key string, err error) {
	p.obs.AcquireFailed(provider.Code(err))
	p.log.Warn("pool acquire failed", "pool", p.cfg.name, "key", key, "err", err)
}

// waitKey takes the key's lock once no turn of it is in flight, or once
// BusyWait ran out with one in flight: then it returns that turn's lease,
// marked superseded.
func (a *acquisition) waitKey() (older *Lease, err error) {
	p, ks := a.p, a.ks
	began := p.clk.Now()
	waited, expired := false, false
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ks.lockCtx(a.caller); err != nil {
			return nil, provider.Errorf(provider.Unavailable, "acquire %q: waiting for the key: %w", a.key, err)
		}
		p.mu.Lock()
		older = ks.lease
		settled := older == nil || p.cfg.busyWait == 0 || expired
		if older != nil && settled {
			close(older.superseded)
		}
		p.mu.Unlock()
		if settled {
			if waited || older != nil {
				a.stage(StageWaitKey, began)
			}
			return older, nil
		}
		released := older.released
		p.unlock(ks)
		if timer == nil {
			timer = p.clk.NewTimer(p.cfg.busyWait)
		}
		waited = true
		select {
		case <-released:
		case <-timer.C():
			expired = true
		case <-a.caller.Done():
			return nil, provider.Errorf(provider.Unavailable, "acquire %q: another turn of the key is in flight: %w", a.key, a.caller.Err())
		}
	}
}

// endSupersede settles the older turn once this one, which superseded it,
// is done acquiring; the caller holds the key's lock. When this one failed,
// the older turn's release takes the lock again and parks its sandbox; if
// that release already went (and deleted the sandbox), its record goes too.
func (a *acquisition) endSupersede(older *Lease, claimed bool) {
	if claimed {
		return
	}
	p := a.p
	p.mu.Lock()
	gone := older.done
	if !gone {
		older.superseded = make(chan struct{})
	}
	p.mu.Unlock()
	if !gone {
		return
	}
	if rec, ok, err := p.store.Load(a.work, a.key); err == nil && ok && rec.Gen == older.gen {
		if _, err := p.swap(a.work, a.ks, rec.Gen, nil); err != nil {
			p.log.Error("pool: forget the record of a superseded turn", "pool", p.cfg.name, "key", a.key, "err", err)
		}
	}
}

// acquireLocked finds or makes the sandbox and claims the key's pointer.
// The caller holds the key's lock.
func (a *acquisition) acquireLocked(supersede bool) (*Lease, error) {
	p := a.p
	began := p.clk.Now()
	rec, ok, err := p.store.Load(a.work, a.key)
	if err != nil {
		return nil, err
	}
	var (
		sb   *provider.Sandbox
		path Path
		h    *hold
	)
	switch {
	case ok && rec.State == StateInUse && supersede:
		// The turn in flight keeps its sandbox; this one gets a new one.
		a.stage(StageLookup, began)
	case ok:
		sb, path, h, err = a.reuse(rec, began)
		if err != nil {
			return nil, err
		}
	default:
		a.stage(StageLookup, began)
	}
	if sb == nil {
		if sb, h, err = a.create(); err != nil {
			return nil, err
		}
		path = PathCreated
	}
	return a.claim(sb, path, h)
}

// claim points the key at sb for this turn, unless the pool is shutting
// down, and starts the lease.
func (a *acquisition) claim(sb *provider.Sandbox, path Path, h *hold) (*Lease, error) {
	p, ks := a.p, a.ks
	began := p.clk.Now()
	p.mu.Lock()
	closing, gen := p.closing, ks.gen
	p.mu.Unlock()
	if closing {
		if gen != 0 {
			if cur, ok, _ := p.store.Load(a.work, a.key); ok && cur.SandboxID == sb.ID {
				_, _ = p.swap(a.work, ks, gen, nil)
			}
		}
		p.teardown(a.key, sb.ID, h, true, ReasonShutdownInFlight, "the pool shut down before the turn began")
		return nil, errClosed
	}
	rec, err := p.swap(a.work, ks, gen, &Record{SandboxID: sb.ID, Fingerprint: a.fp, State: StateInUse, Since: p.clk.Now()})
	if err != nil {
		if path == PathCreated {
			p.teardown(a.key, sb.ID, h, true, ReasonSuperseded, "could not claim the key: "+err.Error())
		} else {
			p.mu.Lock()
			ks.hold = h
			p.mu.Unlock()
		}
		return nil, err
	}
	a.stage(StageClaim, began)
	l := &Lease{Key: a.key, Sandbox: sb, Path: path, Stages: a.stages, Took: p.clk.Since(a.start),
		p: p, ks: ks, gen: rec.Gen, claimed: p.clk.Now(), released: make(chan struct{}), superseded: make(chan struct{}), hold: h}
	beat := p.heartbeat(l)
	p.mu.Lock()
	l.stopBeat = beat
	p.cancelTimerLocked(ks)
	if old := ks.lease; old != nil && old.stopBeat != nil {
		// Superseded: its sandbox is deleted at its release, and if that
		// never comes, the provider's auto-stop is no longer held off.
		old.stopBeat()
	}
	ks.lease = l
	ks.refs++ // the lease's own, until it ends: Shutdown finds a superseded lease through its key
	p.leases[l] = struct{}{}
	p.mu.Unlock()
	return l, nil
}

// reuse makes the parked sandbox of rec ready for the turn. A nil sandbox
// without an error means it was torn down or forgotten and a new one is
// needed; an error keeps it for the next try.
func (a *acquisition) reuse(rec Record, began time.Time) (*provider.Sandbox, Path, *hold, error) {
	p, ks := a.p, a.ks
	p.cancelTimer(ks)
	if err := a.awaitStopping(); err != nil {
		p.rearm(ks, rec)
		return nil, "", nil, err
	}
	if rec.Fingerprint != a.fp {
		a.stage(StageLookup, began)
		p.discard(a.work, ks, rec, ReasonIncompatible, "its spec fingerprint differs from the request's")
		return nil, "", nil, nil
	}
	sb, err := p.settle(rec.SandboxID)
	a.stage(StageLookup, began)
	switch classify(sb, err) {
	case vGone:
		p.forget(a.work, ks, rec, ReasonProviderLost, "not found")
		return nil, "", nil, nil
	case vErrored:
		p.discard(a.work, ks, rec, ReasonProviderLost, "in error: "+sb.ErrorReason)
		return nil, "", nil, nil
	case vTransient:
		p.rearm(ks, rec)
		return nil, "", nil, provider.Errorf(code(err, provider.Unavailable),
			"key %q: its sandbox %s did not answer (%s); it is kept for the next try", a.key, rec.SandboxID, provider.Message(errOrState(err, sb)))
	case vStopped:
		return a.resume(rec)
	}
	return a.warm(rec, sb)
}

// warm claims a sandbox that runs: its slot, if the pool holds none for it
// (it was started underneath the pool), and a reset of its idle clock.
func (a *acquisition) warm(rec Record, sb *provider.Sandbox) (*provider.Sandbox, Path, *hold, error) {
	p, ks := a.p, a.ks
	h := p.takeHold(ks)
	if h == nil {
		var err error
		if h, err = a.admit(); err != nil {
			p.rearm(ks, rec) // reuse stopped its timer; shut down, it stays parked
			return nil, "", nil, err
		}
	}
	began := p.clk.Now()
	ctx, cancel := p.opCtx(p.cfg.stopTimeout)
	err := p.prov.RefreshActivity(ctx, sb.ID)
	cancel()
	a.stage(StageRefresh, began)
	switch {
	case provider.IsNotFound(err):
		p.releaseHold(h)
		p.forget(a.work, ks, rec, ReasonProviderLost, "not found when its idle clock was reset")
		return nil, "", nil, nil
	case err != nil:
		p.mu.Lock()
		ks.hold = h
		p.mu.Unlock()
		p.rearm(ks, rec)
		return nil, "", nil, provider.Errorf(code(err, provider.Unavailable),
			"key %q: reset the idle clock of sandbox %s: %s; it is kept for the next try", a.key, sb.ID, provider.Message(err))
	}
	return a.check(rec, sb, PathWarm, h)
}

// resume starts a sandbox parked stopped.
func (a *acquisition) resume(rec Record) (*provider.Sandbox, Path, *hold, error) {
	p, ks := a.p, a.ks
	p.releaseHold(p.takeHold(ks)) // it does not run
	h, err := a.admit()
	if err != nil {
		p.rearm(ks, rec) // reuse stopped its timer; shut down, it stays parked
		return nil, "", nil, err
	}
	p.mu.Lock()
	h.sandbox = rec.SandboxID
	p.mu.Unlock()
	began := p.clk.Now()
	ctx, cancel := p.opCtx(p.cfg.opTimeout)
	sb, err := p.prov.Start(ctx, rec.SandboxID)
	cancel()
	a.stage(StageStart, began)
	if err != nil {
		switch {
		case provider.IsNotFound(err):
			p.releaseHold(h)
			p.forget(a.work, ks, rec, ReasonProviderLost, "not found when started")
			return nil, "", nil, nil
		case provider.Code(err) == provider.CreateFailed:
			// It cannot come up again; a new one can.
			p.mu.Lock()
			ks.hold = h
			p.mu.Unlock()
			p.discard(a.work, ks, rec, ReasonProviderLost, "start failed: "+provider.Message(err))
			return nil, "", nil, nil
		}
		// It may have started after all: stop it, so that its slot is
		// given back only once it is known not to run.
		p.retire(a.key, rec.SandboxID, h, actStop, stopReasonParked)
		p.rearm(ks, rec)
		return nil, "", nil, provider.Errorf(code(err, provider.Unavailable),
			"key %q: start its sandbox %s: %s; it is kept for the next try", a.key, rec.SandboxID, provider.Message(err))
	}
	return a.check(rec, sb, PathResumed, h)
}

// check runs the caller's Check on a reused sandbox.
func (a *acquisition) check(rec Record, sb *provider.Sandbox, path Path, h *hold) (*provider.Sandbox, Path, *hold, error) {
	if a.spec.Check == nil {
		return sb, path, h, nil
	}
	p, ks := a.p, a.ks
	began := p.clk.Now()
	ctx, cancel := p.opCtx(p.cfg.opTimeout)
	err := a.spec.Check(ctx, sb)
	cancel()
	a.stage(StageCheck, began)
	if err != nil {
		p.mu.Lock()
		ks.hold = h
		p.mu.Unlock()
		p.discard(a.work, ks, rec, ReasonIncompatible, "check: "+err.Error())
		return nil, "", nil, nil
	}
	return sb, path, h, nil
}

// awaitStopping waits for a stop of the key's sandbox the provider has not
// confirmed yet, so that a claim never races it.
func (a *acquisition) awaitStopping() error {
	a.p.mu.Lock()
	ch := a.ks.stopping
	a.p.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-a.p.closed:
		return errClosed
	case <-a.caller.Done():
		return provider.Errorf(provider.Unavailable, "key %q: its sandbox is being stopped and the provider has not confirmed it yet: %w", a.key, a.caller.Err())
	}
}

// create makes a new sandbox. Its name and labels tie it to the pool and
// the key; auto-stop and auto-delete are set so that it does not outlive a
// crashed host for long (leak safety: the timers are the sandbox's own, set
// at create, and nothing of the host has to keep running to reap it).
// Auto-archive is never set: the request carries no AutoArchiveInterval.
func (a *acquisition) create() (*provider.Sandbox, *hold, error) {
	p := a.p
	h, err := a.admit()
	if err != nil {
		return nil, nil, err
	}
	name := p.newName(a.key)
	autoStop := p.cfg.autoStop
	req := provider.CreateRequest{
		Name: name, Snapshot: a.spec.Snapshot, Runtime: a.spec.Runtime,
		Labels: p.labels(a.key, a.spec), EnvVars: a.spec.Env, AutoStopInterval: &autoStop,
	}
	began := p.clk.Now()
	ctx, cancel := p.opCtx(p.cfg.opTimeout)
	defer cancel()
	sb, err := p.prov.Create(ctx, req)
	a.stage(StageCreate, began)
	if err != nil {
		// The create may have made it anyway (a lost answer): delete it by
		// name, and give the slot back once it is known not to run.
		p.goBackground(func() { p.retire(a.key, name, h, actDelete, "") })
		return nil, nil, provider.Errorf(code(err, provider.Internal), "create a sandbox for key %q: %s", a.key, provider.Message(err))
	}
	p.mu.Lock()
	h.sandbox = sb.ID
	p.mu.Unlock()
	if ad, ok := p.prov.(provider.AutoDeleter); ok {
		if _, err := ad.SetAutoDeleteInterval(ctx, sb.ID, p.cfg.autoDelete); err != nil {
			// The pool's own parked-stopped TTL still deletes it.
			p.log.Warn("pool: set auto-delete", "pool", p.cfg.name, "key", a.key, "sandbox", sb.ID, "err", err)
		}
	}
	if r := a.spec.Resources; r != (provider.ResizeRequest{}) {
		if _, err := p.prov.Resize(ctx, sb.ID, r); err != nil {
			p.teardown(a.key, sb.ID, h, true, ReasonIncompatible, "resize: "+provider.Message(err))
			return nil, nil, provider.Errorf(code(err, provider.Internal), "give the sandbox of key %q its resources: %s", a.key, provider.Message(err))
		}
	}
	return sb, h, nil
}

// admit takes the bookkeeping of a running sandbox for a create or a
// start. It is no gate: it never waits and refuses only when the pool is
// shut down.
func (a *acquisition) admit() (*hold, error) {
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return nil, errClosed
	}
	return p.newHoldLocked(), nil
}

// victimLocked picks the least recently parked warm sandbox of another key,
// with a reference for the caller to leave.
func (p *Pool) victimLocked(notKey string) *keyState {
	var v *keyState
	for _, ks := range p.keys {
		if ks.key == notKey || ks.lease != nil || ks.hold == nil || ks.hold.evicting || ks.stopping != nil || ks.parking {
			continue
		}
		if v == nil || ks.lastUsed.Before(v.lastUsed) {
			v = ks
		}
	}
	if v != nil {
		v.refs++
	}
	return v
}

// evict stops the key's warm sandbox (ReasonEvicted) to make room under the
// warm cap; it is parked stopped, never deleted. It reports whether it did
// anything; a key busy with something else is left alone.
func (p *Pool) evict(ctx context.Context, ks *keyState) bool {
	if !ks.tryLock() {
		return false
	}
	defer p.unlock(ks)
	p.mu.Lock()
	h := ks.hold
	ok := h != nil && ks.lease == nil && !h.evicting && ks.stopping == nil
	if ok {
		h.evicting = true
	}
	p.mu.Unlock()
	if !ok {
		return false
	}
	rec, found, err := p.store.Load(ctx, ks.key)
	if err != nil || !found || rec.State != StateParkedRunning {
		p.mu.Lock()
		h.evicting = false
		p.mu.Unlock()
		return false
	}
	p.obs.Evicted()
	p.stopParked(ctx, ks, rec, stopWhy{ReasonEvicted, "its warm slot went to a turn that ended later"})
	return true
}

// LeaseState is where a lease is, as Lease.State and Inspect report it.
type LeaseState string

const (
	// LeaseActive: its turn holds the sandbox and the pool refreshes its
	// activity (WithHeartbeat).
	LeaseActive LeaseState = "active"
	// LeaseExpired: held past WithMaxLease; the pool no longer refreshes
	// its activity, and the provider's auto-stop stops it once it is idle.
	LeaseExpired LeaseState = "expired"
	// LeaseReleased: released, or revoked by Shutdown.
	LeaseReleased LeaseState = "released"
)

// State reports whether l is active, expired (held past WithMaxLease) or
// released.
func (l *Lease) State() LeaseState {
	if l == nil || l.p == nil {
		return LeaseReleased
	}
	l.p.mu.Lock()
	done := l.done
	l.p.mu.Unlock()
	switch {
	case done:
		return LeaseReleased
	case l.p.leaseExpired(l):
		return LeaseExpired
	}
	return LeaseActive
}

func (p *Pool) leaseExpired(l *Lease) bool {
	return p.cfg.maxLease > 0 && p.clk.Since(l.claimed) >= p.cfg.maxLease
}

// heartbeat refreshes the activity of a sandbox in use, so that the
// provider's auto-stop does not end a long quiet turn, until the lease is
// past WithMaxLease: then it stops, and the sandbox auto-stops once idle.
// The pool never refreshes a sandbox nobody holds: nothing of the host
// keeps a parked sandbox alive.
func (p *Pool) heartbeat(l *Lease) context.CancelFunc {
	if p.cfg.heartbeat <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(p.ctx)
	p.goBackground(func() {
		t := p.clk.NewTicker(p.cfg.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if p.leaseExpired(l) {
				p.log.Warn("pool: a lease outlived its bound; its activity is no longer refreshed and the provider's auto-stop will stop its sandbox",
					"pool", p.cfg.name, "key", l.Key, "sandbox", l.Sandbox.ID, "max_lease", p.cfg.maxLease)
				return
			}
			rctx, rcancel := p.opCtx(p.cfg.stopTimeout)
			err := p.prov.RefreshActivity(rctx, l.Sandbox.ID)
			rcancel()
			if err != nil && ctx.Err() == nil {
				p.log.Warn("pool heartbeat", "pool", p.cfg.name, "key", l.Key, "sandbox", l.Sandbox.ID, "err", err)
			}
		}
	})
	return cancel
}

// code is err's code, or fallback when there is no error (a sandbox stuck
// mid-transition).
func code(err error, fallback provider.ErrorCode) provider.ErrorCode {
	if err == nil {
		return fallback
	}
	return provider.Code(err)
}

func errOrState(err error, sb *provider.Sandbox) error {
	if err != nil {
		return err
	}
	if sb == nil {
		return provider.Errorf(provider.Unavailable, "no answer")
	}
	return provider.Errorf(provider.Unavailable, "state %s", sb.State)
}
