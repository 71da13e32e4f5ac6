package drivertest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// Fake is an in-memory runtime. The zero value is not usable; call New.
type Fake struct {
	name provider.Runtime

	mu       sync.Mutex
	nextPID  int
	procs    map[int]*proc
	startErr error
	stopErr  error
	waitErr  error
	started  []driver.Spec
	// statusCalls counts the calls of Status.
	statusCalls int
}

type proc struct {
	spec   driver.Spec
	handle driver.Handle
	exit   *driver.Exit
	done   chan struct{}
	logs   string
}

var (
	_ driver.Driver      = (*Fake)(nil)
	_ driver.Marker      = (*Fake)(nil)
	_ driver.HostNetwork = (*Fake)(nil)
)

// New returns a Fake that calls itself name.
func New(name provider.Runtime) *Fake {
	return &Fake{name: name, nextPID: 1000, procs: map[int]*proc{}}
}

func (f *Fake) Name() provider.Runtime { return f.name }

// SharesHostNetwork is what the runtime it stands for does: a native
// workload shares the host's network unless isolated, a docker one never.
func (f *Fake) SharesHostNetwork(spec driver.Spec) bool {
	return f.name == provider.RuntimeNative && spec.Isolation != "bwrap"
}

// FailStart makes every following Start fail with err (nil to stop failing).
func (f *Fake) FailStart(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startErr = err
}

// FailStop makes every following Stop fail with err (nil to stop failing).
func (f *Fake) FailStop(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopErr = err
}

// Running returns how many workloads run.
func (f *Fake) Running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.procs {
		if p.exit == nil {
			n++
		}
	}
	return n
}

// Specs returns every spec Start was called with, in order.
func (f *Fake) Specs() []driver.Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]driver.Spec(nil), f.started...)
}

// Kill ends a workload from outside, as kill -9 would.
func (f *Fake) Kill(h driver.Handle, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.procs[h.PID]; ok {
		f.endLocked(p, reason)
	}
}

// Spawn adds a workload that no Start created, as a crashed daemon would
// leave behind.
func (f *Fake) Spawn(spec driver.Spec) driver.Handle {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spawnLocked(spec)
}

// SetLogs sets what Logs returns for h's stdout.
func (f *Fake) SetLogs(h driver.Handle, out string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.procs[h.PID]; ok {
		p.logs = out
	}
}

func (f *Fake) spawnLocked(spec driver.Spec) driver.Handle {
	f.nextPID++
	h := driver.Handle{Runtime: f.name, PID: f.nextPID, StartTime: uint64(f.nextPID) * 7}
	f.procs[h.PID] = &proc{spec: spec, handle: h, done: make(chan struct{})}
	return h
}

func (f *Fake) endLocked(p *proc, reason string) {
	if p.exit == nil {
		p.exit = &driver.Exit{Reason: reason}
		close(p.done)
	}
}

func (f *Fake) find(h driver.Handle) (*proc, bool) {
	p, ok := f.procs[h.PID]
	if !ok || p.handle != h {
		return nil, false
	}
	return p, true
}

func (f *Fake) Preflight(ctx context.Context, spec driver.Spec) error {
	if len(spec.Command) == 0 && spec.Image == "" {
		return provider.Errorf(provider.PreflightFailed, "nothing to run")
	}
	return nil
}

func (f *Fake) Start(ctx context.Context, spec driver.Spec) (driver.Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil {
		return driver.Handle{}, f.startErr
	}
	f.started = append(f.started, spec)
	return f.spawnLocked(spec), nil
}

// FailWait makes every Wait fail with err at once, as a runtime that lost
// track of its workloads does (an engine that went away); nil restores it.
func (f *Fake) FailWait(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitErr = err
}

// StatusCalls is how many times Status was called.
func (f *Fake) StatusCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statusCalls
}

func (f *Fake) Status(ctx context.Context, h driver.Handle) (driver.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusCalls++
	p, ok := f.find(h)
	if !ok {
		return driver.Status{Exit: driver.Exit{Reason: "process gone"}}, nil
	}
	if p.exit != nil {
		return driver.Status{Exit: *p.exit}, nil
	}
	return driver.Status{Running: true}, nil
}

func (f *Fake) Wait(ctx context.Context, h driver.Handle) (driver.Exit, error) {
	f.mu.Lock()
	p, ok := f.find(h)
	waitErr := f.waitErr
	f.mu.Unlock()
	if waitErr != nil {
		return driver.Exit{}, waitErr
	}
	if !ok {
		return driver.Exit{Reason: "process gone"}, nil
	}
	select {
	case <-ctx.Done():
		return driver.Exit{}, ctx.Err()
	case <-p.done:
		f.mu.Lock()
		defer f.mu.Unlock()
		return *p.exit, nil
	}
}

func (f *Fake) Stop(ctx context.Context, h driver.Handle, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.find(h)
	if !ok || p.exit != nil {
		return nil
	}
	if f.stopErr != nil {
		return f.stopErr
	}
	f.endLocked(p, "killed: signal SIGTERM")
	return nil
}

func (f *Fake) Remove(ctx context.Context, h driver.Handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.find(h); ok && p.exit != nil {
		delete(f.procs, h.PID)
	}
	return nil
}

func (f *Fake) Logs(ctx context.Context, h driver.Handle, dir string) ([]byte, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.find(h); ok {
		return []byte(p.logs), nil, nil
	}
	return nil, nil, nil
}

func (f *Fake) Orphans(ctx context.Context, root string, known []driver.Handle) ([]driver.Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	isKnown := map[driver.Handle]bool{}
	for _, h := range known {
		isKnown[h] = true
	}
	var out []driver.Handle
	for _, p := range f.procs {
		if p.exit == nil && p.spec.Root == root && !isKnown[p.handle] {
			out = append(out, p.handle)
		}
	}
	return out, nil
}

// SandboxOf returns the sandbox id h's spec named, "" when h is unknown.
func (f *Fake) SandboxOf(ctx context.Context, h driver.Handle) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.find(h); ok {
		return p.spec.SandboxID, nil
	}
	return "", nil
}

// String is for test failure messages.
func (f *Fake) String() string {
	return fmt.Sprintf("fake runtime %s (%d running)", f.name, f.Running())
}
