package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandplane/sandplane/local/driver"
)

var (
	_ PauseBackend = nativeBackend{}
	_ PauseBackend = dockerBackend{}
)

// freezer is a runtime that pauses a workload itself (the native driver's
// SIGSTOP and SIGCONT).
type freezer interface {
	Pause(ctx context.Context, h driver.Handle) error
	Resume(ctx context.Context, h driver.Handle) error
}

func (n nativeBackend) Pause(ctx context.Context, sandboxID string) error {
	return n.setPaused(ctx, sandboxID, true)
}

func (n nativeBackend) Resume(ctx context.Context, sandboxID string) error {
	return n.setPaused(ctx, sandboxID, false)
}

// Pause freezes the container with the cgroup freezer (docker pause).
func (d dockerBackend) Pause(ctx context.Context, sandboxID string) error {
	return d.setPaused(ctx, sandboxID, true)
}

// Resume thaws the container (docker unpause).
func (d dockerBackend) Resume(ctx context.Context, sandboxID string) error {
	return d.setPaused(ctx, sandboxID, false)
}

// setPaused pauses or resumes the sandbox's running workload and records
// it, so that a second call is a no-op and Stop knows to resume first.
func (b *runtimeBackend) setPaused(ctx context.Context, sandboxID string, pause bool) error {
	b.mu.Lock()
	wl := b.workloads[sandboxID]
	if wl == nil || !wl.running {
		b.mu.Unlock()
		return fmt.Errorf("sandbox %s has no running workload to pause or resume", sandboxID)
	}
	h, already := wl.handle, wl.paused == pause
	b.mu.Unlock()
	if already {
		return nil
	}
	if err := b.freeze(ctx, h, pause); err != nil {
		return err
	}
	b.mu.Lock()
	wl.paused = pause
	b.mu.Unlock()
	return nil
}

// freeze pauses or resumes h on the runtime: the engine's freezer for a
// container, the runtime's own for native processes.
func (b *runtimeBackend) freeze(ctx context.Context, h driver.Handle, pause bool) error {
	if b.ext != nil {
		return b.ext.freeze(ctx, h, pause)
	}
	f, ok := b.cfg.Runtime.(freezer)
	if !ok {
		return errors.New("the " + string(b.cfg.Runtime.Name()) + " runtime cannot pause a workload")
	}
	if pause {
		return f.Pause(ctx, h)
	}
	return f.Resume(ctx, h)
}

// thawForStop resumes a paused workload before it is stopped or removed:
// a frozen process would see the SIGTERM only after the grace period. A
// thaw that fails (the workload died while frozen, say) does not hold the
// stop up: its SIGKILL, or the engine's, ends a frozen workload too.
func (b *runtimeBackend) thawForStop(ctx context.Context, sandboxID string) {
	b.mu.Lock()
	wl := b.workloads[sandboxID]
	paused := wl != nil && wl.paused
	b.mu.Unlock()
	if !paused {
		return
	}
	if err := b.setPaused(ctx, sandboxID, false); err != nil {
		b.cfg.Logger.Warn("resume a paused workload before its stop", "sandbox", sandboxID, "err", err)
	}
}

func (e *dockerExt) freeze(ctx context.Context, h driver.Handle, pause bool) error {
	if pause {
		if err := e.cli.ContainerPause(ctx, h.ContainerID); err != nil {
			return fmt.Errorf("pause the container: %w", err)
		}
		return nil
	}
	if err := e.cli.ContainerUnpause(ctx, h.ContainerID); err != nil {
		return fmt.Errorf("unpause the container: %w", err)
	}
	return nil
}
