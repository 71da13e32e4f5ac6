package simulator

import (
	"context"
	"errors"
	"net/url"
)

// Workload describes what a Backend runs for one sandbox.
type Workload struct {
	SandboxID string
	Snapshot  string
	User      string
	// Env is the sandbox's env as created; values are secret.
	Env    map[string]string
	Labels map[string]string
}

// Backend runs the workloads behind simulated sandboxes. Implementations are
// safe for concurrent use; the simulator never runs two operations on one
// sandbox at the same time.
type Backend interface {
	// Name is the backend's name, as the --backend flag spells it.
	Name() string
	// Start runs the sandbox's workload, for the first time or again after
	// Stop (files written before Stop are still there), and returns the base
	// URL of its toolbox once the toolbox answers. A failure becomes the
	// sandbox's errorReason, so it must read well.
	Start(ctx context.Context, w Workload) (toolboxURL string, err error)
	// Stop ends the workload and keeps its files. force skips the grace
	// period. A workload that is not running is not an error.
	Stop(ctx context.Context, sandboxID string, force bool) error
	// Remove stops the workload if needed and deletes everything it had.
	// Idempotent.
	Remove(ctx context.Context, sandboxID string) error
	// PortURL returns where preview traffic for port of a running sandbox
	// goes, or ErrNoWorkload.
	PortURL(sandboxID string, port int) (*url.URL, error)
	// Close releases the backend; workloads still running are removed.
	Close() error
}

// ErrNoWorkload is returned by backends that have no workload to reach.
var ErrNoWorkload = errors.New("this simulator runs without workloads (backend none)")

type noneBackend struct{}

// NoneBackend makes the simulator a pure state machine: sandboxes have no
// workload, so toolbox and preview requests fail, and every operation is
// free. It is the choice for large, fast runs.
func NoneBackend() Backend { return noneBackend{} }

func (noneBackend) Name() string                                    { return "none" }
func (noneBackend) Start(context.Context, Workload) (string, error) { return "", nil }
func (noneBackend) Stop(context.Context, string, bool) error        { return nil }
func (noneBackend) Remove(context.Context, string) error            { return nil }
func (noneBackend) PortURL(string, int) (*url.URL, error)           { return nil, ErrNoWorkload }
func (noneBackend) Close() error                                    { return nil }
