package pooltest

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Op names a Provider call of the Fake.
type Op string

const (
	OpCreate     Op = "create"
	OpGet        Op = "get"
	OpStart      Op = "start"
	OpStop       Op = "stop"
	OpDelete     Op = "delete"
	OpRefresh    Op = "refresh"
	OpResize     Op = "resize"
	OpAutoDelete Op = "autodelete"
)

// Call is one call the Fake received.
type Call struct {
	Op Op
	// ID is the id or name the call named; for a create, the new id.
	ID string
	// Reason is a stop's reason, "" for a plain Stop.
	Reason string
}

// Fake is an in-memory provider.Provider, also a provider.ReasonStopper and
// a provider.AutoDeleter, whose calls can be made to fail or hang, and whose
// sandboxes can change state underneath its caller. Stop and Start are
// synchronous and stopping a stopped sandbox is a no-op, like the local
// daemon. It is safe for concurrent use.
type Fake struct {
	clk clock.Clock

	mu         sync.Mutex
	seq        int
	sbs        map[string]*provider.Sandbox
	autoDelete map[string]int
	calls      []Call
	faults     map[Op][]error
	hangs      map[Op]*Hang
	maxRunning int
	created    int
	requests   []provider.CreateRequest
}

var (
	_ provider.Provider      = (*Fake)(nil)
	_ provider.ReasonStopper = (*Fake)(nil)
	_ provider.AutoDeleter   = (*Fake)(nil)
)

// Option tunes a Fake.
type Option func(*Fake)

// WithClock takes the Fake's timestamps from c, a fake clock in tests.
// Default clock.Real().
func WithClock(c clock.Clock) Option { return func(f *Fake) { f.clk = c } }

// New returns an empty Fake.
func New(opts ...Option) *Fake {
	f := &Fake{clk: clock.Real(), sbs: map[string]*provider.Sandbox{}, autoDelete: map[string]int{},
		faults: map[Op][]error{}, hangs: map[Op]*Hang{}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Plain hides the optional interfaces: a provider that neither records stop
// reasons nor deletes on its own, like one without events or auto-delete.
func (f *Fake) Plain() provider.Provider { return plain{f} }

type plain struct{ f *Fake }

func (p plain) Info(ctx context.Context) (*provider.Info, error) { return p.f.Info(ctx) }
func (p plain) Create(ctx context.Context, r provider.CreateRequest) (*provider.Sandbox, error) {
	return p.f.Create(ctx, r)
}
func (p plain) Get(ctx context.Context, id string) (*provider.Sandbox, error) {
	return p.f.Get(ctx, id)
}
func (p plain) List(ctx context.Context, o provider.ListOptions) ([]provider.Sandbox, error) {
	return p.f.List(ctx, o)
}
func (p plain) Start(ctx context.Context, id string) (*provider.Sandbox, error) {
	return p.f.Start(ctx, id)
}
func (p plain) Stop(ctx context.Context, id string) (*provider.Sandbox, error) {
	return p.f.Stop(ctx, id)
}
func (p plain) Delete(ctx context.Context, id string) error { return p.f.Delete(ctx, id) }
func (p plain) RefreshActivity(ctx context.Context, id string) error {
	return p.f.RefreshActivity(ctx, id)
}
func (p plain) SetAutoStopInterval(ctx context.Context, id string, m int) (*provider.Sandbox, error) {
	return p.f.SetAutoStopInterval(ctx, id, m)
}
func (p plain) Resize(ctx context.Context, id string, r provider.ResizeRequest) (*provider.Sandbox, error) {
	return p.f.Resize(ctx, id, r)
}
func (p plain) PreviewURL(ctx context.Context, id string, port int) (*provider.Preview, error) {
	return p.f.PreviewURL(ctx, id, port)
}
func (p plain) EntrypointLogs(ctx context.Context, id string) (*provider.EntrypointLogs, error) {
	return p.f.EntrypointLogs(ctx, id)
}
func (p plain) Traits() provider.Traits { return p.f.Traits() }

// Hang makes the calls of one Op block.
type Hang struct {
	f         *Fake
	op        Op
	ignoreCtx bool
	release   chan struct{}
	once      sync.Once

	mu      sync.Mutex
	blocked int
	entered chan struct{} // closed and replaced whenever a call blocks
}

// Hang makes every call of op block until Release, or until its context
// ends (then it fails with unavailable, as a timed-out request does), from
// now on. With ignoreCtx the call ignores its context, like a provider that
// never answers and a client without a deadline.
func (f *Fake) Hang(op Op, ignoreCtx bool) *Hang {
	h := &Hang{f: f, op: op, ignoreCtx: ignoreCtx, release: make(chan struct{}), entered: make(chan struct{})}
	f.mu.Lock()
	f.hangs[op] = h
	f.mu.Unlock()
	return h
}

// Release lets the blocked calls go on (and do what they were asked) and
// stops hanging new ones. Idempotent.
func (h *Hang) Release() {
	h.f.mu.Lock()
	if h.f.hangs[h.op] == h {
		delete(h.f.hangs, h.op)
	}
	h.f.mu.Unlock()
	h.once.Do(func() { close(h.release) })
}

// Blocked is how many calls are blocked right now.
func (h *Hang) Blocked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.blocked
}

// WaitBlocked waits until at least n calls are blocked.
func (h *Hang) WaitBlocked(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		b, ch := h.blocked, h.entered
		h.mu.Unlock()
		if b >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *Hang) block(ctx context.Context) error {
	h.mu.Lock()
	h.blocked++
	close(h.entered)
	h.entered = make(chan struct{})
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.blocked--
		h.mu.Unlock()
	}()
	if h.ignoreCtx {
		<-h.release
		return nil
	}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return provider.Errorf(provider.Unavailable, "%s: no answer: %v", h.op, ctx.Err())
	}
}

// FailNext makes the next call of op fail with err, after the ones queued
// before it. Use provider.Errorf codes: unavailable or resource_exhausted
// for a transient failure, not_found for a terminal one.
func (f *Fake) FailNext(op Op, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[op] = append(f.faults[op], err)
}

// enter records a call and applies its hang and fault.
func (f *Fake) enter(ctx context.Context, op Op, id, reason string) error {
	f.mu.Lock()
	f.calls = append(f.calls, Call{Op: op, ID: id, Reason: reason})
	h := f.hangs[op]
	f.mu.Unlock()
	if h != nil {
		if err := h.block(ctx); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.faults[op]; len(q) > 0 {
		f.faults[op] = q[1:]
		return q[0]
	}
	return nil
}

// SetState puts a sandbox in state underneath its caller: the provider's
// own auto-stop (stopped, "auto_stopped"), a crash (error), a transition.
func (f *Fake) SetState(id string, state provider.State, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb := f.sbs[id]; sb != nil {
		sb.State, sb.ErrorReason = state, reason
		f.noteRunningLocked()
	}
}

// Vanish removes a sandbox underneath its caller, as an auto-delete does.
func (f *Fake) Vanish(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sbs, id)
}

// Sandboxes returns every sandbox, by id.
func (f *Fake) Sandboxes() []provider.Sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]provider.Sandbox, 0, len(f.sbs))
	for _, sb := range f.sbs {
		out = append(out, copySandbox(sb))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Running is how many sandboxes are started now; MaxRunning the most there
// ever were at once.
func (f *Fake) Running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runningLocked()
}

func (f *Fake) MaxRunning() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxRunning
}

// Created is how many sandboxes were ever created.
func (f *Fake) Created() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created
}

// CreateRequests returns every create request the Fake received, in order.
func (f *Fake) CreateRequests() []provider.CreateRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]provider.CreateRequest(nil), f.requests...)
}

// Calls returns the calls so far, optionally only those of ops.
func (f *Fake) Calls(ops ...Op) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if len(ops) == 0 || contains(ops, c.Op) {
			out = append(out, c)
		}
	}
	return out
}

// AutoDelete returns the auto-delete interval set on a sandbox, if any.
func (f *Fake) AutoDelete(id string) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.autoDelete[id]
	return m, ok
}

func contains(ops []Op, op Op) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

func (f *Fake) runningLocked() int {
	n := 0
	for _, sb := range f.sbs {
		if sb.State == provider.StateStarted || sb.State == provider.StateStarting || sb.State == provider.StateStopping {
			n++
		}
	}
	return n
}

func (f *Fake) noteRunningLocked() {
	f.maxRunning = max(f.maxRunning, f.runningLocked())
}

// lookupLocked finds a sandbox by id or name.
func (f *Fake) lookupLocked(idOrName string) *provider.Sandbox {
	if sb := f.sbs[idOrName]; sb != nil {
		return sb
	}
	for _, sb := range f.sbs {
		if sb.Name == idOrName {
			return sb
		}
	}
	return nil
}

func notFound(idOrName string) error {
	return provider.Errorf(provider.NotFound, "sandbox %s not found", idOrName)
}

func copySandbox(sb *provider.Sandbox) provider.Sandbox {
	out := *sb
	out.Labels = make(map[string]string, len(sb.Labels))
	for k, v := range sb.Labels {
		out.Labels[k] = v
	}
	return out
}

func (f *Fake) Info(context.Context) (*provider.Info, error) {
	return &provider.Info{Name: "fake", Version: "test", APIVersion: "v1", Minute: "1m0s"}, nil
}

func (f *Fake) Create(ctx context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	if err := f.enter(ctx, OpCreate, req.Name, ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if req.Name != "" && f.lookupLocked(req.Name) != nil {
		return nil, provider.Errorf(provider.AlreadyExists, "sandbox name %s is taken", req.Name)
	}
	f.seq++
	f.created++
	id := fmt.Sprintf("sb-%d", f.seq)
	name := req.Name
	if name == "" {
		name = id
	}
	now := f.clk.Now()
	sb := &provider.Sandbox{ID: id, Name: name, State: provider.StateStarted, Snapshot: req.Snapshot,
		Runtime: req.Runtime, Labels: map[string]string{}, CreatedAt: now, UpdatedAt: now, LastActivityAt: now}
	for k, v := range req.Labels {
		sb.Labels[k] = v
	}
	if req.AutoStopInterval != nil {
		sb.AutoStopInterval = *req.AutoStopInterval
	}
	f.sbs[id] = sb
	f.calls[len(f.calls)-1].ID = id
	f.noteRunningLocked()
	out := copySandbox(sb)
	return &out, nil
}

func (f *Fake) Get(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	if err := f.enter(ctx, OpGet, idOrName, ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.lookupLocked(idOrName)
	if sb == nil {
		return nil, notFound(idOrName)
	}
	out := copySandbox(sb)
	return &out, nil
}

func (f *Fake) List(_ context.Context, opts provider.ListOptions) ([]provider.Sandbox, error) {
	var out []provider.Sandbox
	for _, sb := range f.Sandboxes() {
		match := true
		for k, v := range opts.Labels {
			match = match && sb.Labels[k] == v
		}
		if match {
			out = append(out, sb)
		}
	}
	return out, nil
}

func (f *Fake) Start(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	if err := f.enter(ctx, OpStart, idOrName, ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.lookupLocked(idOrName)
	switch {
	case sb == nil:
		return nil, notFound(idOrName)
	case sb.State == provider.StateError:
		return nil, provider.Errorf(provider.FailedPrecondition, "sandbox %s is in error", sb.ID)
	case sb.State == provider.StateStarting || sb.State == provider.StateStopping:
		return nil, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s", sb.ID, sb.State)
	}
	if sb.State != provider.StateStarted {
		sb.State, sb.ErrorReason = provider.StateStarted, ""
		sb.LastActivityAt = f.clk.Now()
		f.noteRunningLocked()
	}
	out := copySandbox(sb)
	return &out, nil
}

func (f *Fake) Stop(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	return f.stop(ctx, idOrName, "")
}

// StopWithReason is Stop recording reason as the errorReason.
func (f *Fake) StopWithReason(ctx context.Context, idOrName, reason string) (*provider.Sandbox, error) {
	return f.stop(ctx, idOrName, reason)
}

func (f *Fake) stop(ctx context.Context, idOrName, reason string) (*provider.Sandbox, error) {
	if err := f.enter(ctx, OpStop, idOrName, reason); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.lookupLocked(idOrName)
	if sb == nil {
		return nil, notFound(idOrName)
	}
	if sb.State == provider.StateStarted || sb.State == provider.StateStopping {
		if reason == "" {
			reason = provider.StopReasonManual
		}
		sb.State, sb.ErrorReason = provider.StateStopped, reason
		sb.LastActivityAt = f.clk.Now()
	}
	out := copySandbox(sb)
	return &out, nil
}

func (f *Fake) Delete(ctx context.Context, idOrName string) error {
	if err := f.enter(ctx, OpDelete, idOrName, ""); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb := f.lookupLocked(idOrName); sb != nil {
		delete(f.sbs, sb.ID)
	}
	return nil
}

func (f *Fake) RefreshActivity(ctx context.Context, idOrName string) error {
	if err := f.enter(ctx, OpRefresh, idOrName, ""); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.lookupLocked(idOrName)
	if sb == nil {
		return notFound(idOrName)
	}
	sb.LastActivityAt = f.clk.Now()
	return nil
}

func (f *Fake) SetAutoStopInterval(_ context.Context, idOrName string, minutes int) (*provider.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.lookupLocked(idOrName)
	if sb == nil {
		return nil, notFound(idOrName)
	}
	sb.AutoStopInterval = minutes
	out := copySandbox(sb)
	return &out, nil
}

// SetAutoDeleteInterval records the interval; the Fake deletes nothing on
// its own (Vanish does, when a test wants it).
func (f *Fake) SetAutoDeleteInterval(ctx context.Context, idOrName string, minutes int) (*provider.Sandbox, error) {
	if err := f.enter(ctx, OpAutoDelete, idOrName, ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.lookupLocked(idOrName)
	if sb == nil {
		return nil, notFound(idOrName)
	}
	f.autoDelete[sb.ID] = minutes
	out := copySandbox(sb)
	return &out, nil
}

func (f *Fake) Resize(ctx context.Context, idOrName string, _ provider.ResizeRequest) (*provider.Sandbox, error) {
	if err := f.enter(ctx, OpResize, idOrName, ""); err != nil {
		return nil, err
	}
	return f.Get(ctx, idOrName)
}

func (f *Fake) PreviewURL(context.Context, string, int) (*provider.Preview, error) {
	return nil, provider.Errorf(provider.Unsupported, "the fake provider runs no workloads")
}

func (f *Fake) EntrypointLogs(context.Context, string) (*provider.EntrypointLogs, error) {
	return nil, provider.Errorf(provider.Unsupported, "the fake provider runs no workloads")
}

func (f *Fake) Traits() provider.Traits {
	return provider.Traits{Name: "fake", StopStoppedIsNoop: true, ResizeIsNoop: true, SyncStop: true}
}
