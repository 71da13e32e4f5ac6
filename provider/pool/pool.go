package pool

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Pool keeps one sandbox per key between turns. It is safe for concurrent
// use.
type Pool struct {
	prov   provider.Provider
	cfg    config
	clk    clock.Clock
	log    *slog.Logger
	store  Store
	secret []byte
	obs    Observer

	ctx    context.Context // ends when Shutdown is done; bounds every background operation
	cancel context.CancelFunc

	mu      sync.Mutex
	keys    map[string]*keyState
	holds   map[*hold]struct{}
	leases  map[*Lease]struct{}
	changed chan struct{} // closed and replaced on every change a waiter may care about
	closing bool
	closed  chan struct{} // closed when Shutdown begins
	bg      int           // background goroutines
}

// New returns a pool of sandboxes on prov. It reads the store, and picks up
// what a previous process left in it: a sandbox whose turn was in flight is
// deleted (ReasonShutdownInFlight), one parked running is checked and its
// keep-warm TTL resumed, one parked stopped gets the rest of its TTL.
func New(ctx context.Context, prov provider.Provider, opts ...Option) (*Pool, error) {
	if prov == nil {
		return nil, provider.Errorf(provider.InvalidArgument, "pool: nil provider")
	}
	// Defaults, then the environment, then the host's options: the options
	// are applied once first only to learn WithEnv.
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	env := defaults()
	env.lookup, env.envSet = cfg.lookup, cfg.envSet
	if err := env.applyEnv(); err != nil {
		return nil, err
	}
	cfg = env
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.finish(prov); err != nil {
		return nil, err
	}
	secret, err := cfg.store.Secret(ctx)
	if err != nil {
		return nil, err
	}
	// The pool outlives New's call: its background work keeps ctx's values
	// but not its cancellation, and ends at Shutdown.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Pool{
		prov: prov, cfg: cfg, clk: cfg.clk, log: cfg.log, store: cfg.store, secret: secret, obs: cfg.obs,
		ctx: pctx, cancel: cancel,
		keys: map[string]*keyState{}, holds: map[*hold]struct{}{}, leases: map[*Lease]struct{}{},
		changed: make(chan struct{}), closed: make(chan struct{}),
	}
	if err := p.obs.Attach(p); err != nil {
		cancel()
		return nil, err
	}
	if err := p.recover(ctx); err != nil {
		cancel()
		return nil, err
	}
	return p, nil
}

// Name is the pool's name (WithName), for its observer's labels.
func (p *Pool) Name() string { return p.cfg.name }

// Stats is a snapshot of the pool.
type Stats struct {
	// Running is the sandboxes that may run: in use, warm, starting, or
	// stopping without the provider's confirmation yet. Nothing caps it.
	Running int
	// Warm is the sandboxes parked running.
	Warm int
	// InUse is the turns in flight.
	InUse int
	// Keys is the keys the pool knows in memory.
	Keys int
}

func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Running: len(p.holds), Warm: p.warmLocked(), InUse: len(p.leases), Keys: len(p.keys)}
}

func (p *Pool) warmLocked() int {
	n := 0
	for _, ks := range p.keys {
		if ks.lease == nil && ks.hold != nil {
			n++
		}
	}
	return n
}

var errClosed = provider.Errorf(provider.Unavailable, "the pool is shut down")

// Shutdown ends the pool: the sandbox of every turn in flight is deleted
// (ReasonShutdownInFlight; its Release does nothing), every one parked
// running is stopped (ReasonShutdownIdle), and when nothing would find them
// again (a store that dies with the process, on a provider without
// auto-delete) the parked ones are deleted. Acquires that have not claimed
// a sandbox yet fail with unavailable. Shutdown waits for the pool's
// background work until ctx ends; then it cancels what is left and returns
// ctx's error at once. A second call does nothing.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil
	}
	p.closing = true
	close(p.closed)
	keys := make([]*keyState, 0, len(p.keys))
	for _, ks := range p.keys {
		ks.refs++
		p.cancelTimerLocked(ks)
		keys = append(keys, ks)
	}
	p.signalLocked()
	p.mu.Unlock()

	var wg sync.WaitGroup
	for _, ks := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.leave(ks)
			p.shutdownKey(ctx, ks)
		}()
	}
	wg.Wait()
	err := p.waitBackground(ctx)
	// What is left, if ctx ended first, is cancelled and not waited for: a
	// provider call that ignores its context would hold Shutdown forever.
	p.cancel()
	return err
}

// shutdownKey deletes the key's sandboxes in flight and stops (or deletes)
// its parked one.
func (p *Pool) shutdownKey(ctx context.Context, ks *keyState) {
	if ks.lockCtx(ctx) != nil {
		return
	}
	defer p.unlock(ks)
	var revoked []*Lease
	p.mu.Lock()
	for l := range p.leases {
		if l.ks == ks && !l.done {
			l.revoked = true
			revoked = append(revoked, l)
		}
	}
	p.mu.Unlock()
	rec, ok, err := p.store.Load(ctx, ks.key)
	if err != nil {
		p.log.Error("pool shutdown: read a record", "pool", p.cfg.name, "key", ks.key, "err", err)
	}
	for _, l := range revoked {
		if ok && rec.Gen == l.gen {
			if _, err := p.swap(ctx, ks, rec.Gen, nil); err != nil {
				p.log.Error("pool shutdown: forget a record", "pool", p.cfg.name, "key", ks.key, "err", err)
			}
			ok = false
		}
		p.teardown(ks.key, l.Sandbox.ID, p.endLease(l), true, ReasonShutdownInFlight, "")
	}
	if !ok {
		return
	}
	orphaned := !p.store.Durable()
	if _, auto := p.prov.(provider.AutoDeleter); auto {
		orphaned = false
	}
	switch {
	case orphaned:
		p.discard(ctx, ks, rec, ReasonShutdownIdle, "nothing would find it after the pool")
	case rec.State == StateParkedRunning || rec.State == StateInUse:
		p.stopParked(ctx, ks, rec, stopWhy{ReasonShutdownIdle, ""})
	}
}

// Discard tears down the key's parked sandbox (ReasonExplicit) and forgets
// the key. Discarding a key without a sandbox does nothing.
// failed_precondition: a turn holds it; release that with OutcomeDiscard.
func (p *Pool) Discard(ctx context.Context, key string) error {
	if err := validKey(key); err != nil {
		return err
	}
	ks := p.enter(key)
	defer p.leave(ks)
	if err := ks.lockCtx(ctx); err != nil {
		return provider.Errorf(provider.Unavailable, "discard %q: %v", key, err)
	}
	defer p.unlock(ks)
	p.mu.Lock()
	busy := ks.lease != nil
	p.mu.Unlock()
	if busy {
		return provider.Errorf(provider.FailedPrecondition, "key %q: a turn holds its sandbox: release it with OutcomeDiscard", key)
	}
	rec, ok, err := p.store.Load(ctx, key)
	if err != nil || !ok {
		return err
	}
	p.discard(ctx, ks, rec, ReasonExplicit, "")
	return nil
}

// Status is what Inspect reports about a key.
type Status struct {
	Key string
	// State is "" when the key has no sandbox.
	State     RecordState
	SandboxID string
	Since     time.Time
	// Lease is the state of the turn holding it (State in_use): active, or
	// expired past WithMaxLease; "" when no turn of this pool holds it.
	Lease LeaseState
}

// Inspect reports the key's sandbox as the provider sees it now. A sandbox
// the provider lost is forgotten and one in error is deleted
// (ReasonProviderLost): neither is ever reported parked. A transient
// failure to ask reports the record as stored.
func (p *Pool) Inspect(ctx context.Context, key string) (Status, error) {
	if err := validKey(key); err != nil {
		return Status{}, err
	}
	ks := p.enter(key)
	defer p.leave(ks)
	if err := ks.lockCtx(ctx); err != nil {
		return Status{}, provider.Errorf(provider.Unavailable, "inspect %q: %v", key, err)
	}
	defer p.unlock(ks)
	rec, ok, err := p.store.Load(ctx, key)
	if err != nil || !ok {
		return Status{Key: key}, err
	}
	st := Status{Key: key, State: rec.State, SandboxID: rec.SandboxID, Since: rec.Since}
	if rec.State == StateInUse {
		p.mu.Lock()
		l := ks.lease
		p.mu.Unlock()
		if l != nil {
			st.Lease = l.State()
		}
		return st, nil
	}
	gctx, cancel := p.opCtx(p.cfg.stopTimeout)
	sb, err := p.get(gctx, rec.SandboxID)
	cancel()
	switch classify(sb, err) {
	case vGone:
		p.forget(ctx, ks, rec, ReasonProviderLost, "gone when inspected")
		return Status{Key: key}, nil
	case vErrored:
		p.discard(ctx, ks, rec, ReasonProviderLost, "in error when inspected: "+sb.ErrorReason)
		return Status{Key: key}, nil
	case vStopped:
		if rec.State == StateParkedRunning {
			// Stopped underneath the pool (the provider's auto-stop).
			p.parkStopped(ctx, ks, rec)
			if cur, ok, _ := p.store.Load(ctx, key); ok {
				st.State, st.Since = cur.State, cur.Since
			}
		}
	}
	return st, nil
}
