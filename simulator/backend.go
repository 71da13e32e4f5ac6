package simulator

import "github.com/sandplane/sandplane/simulator/internal/backend"

// The backend part lives in simulator/internal/backend; these names are the
// simulator's public API for it, so that a caller configures a Simulator
// without importing an internal package.
type (
	// Backend runs the workloads behind simulated sandboxes.
	Backend = backend.Backend
	// Workload describes what a Backend runs for one sandbox.
	Workload = backend.Workload
	// Route is where the proxy sends a request for a sandbox.
	Route = backend.Route
	// ImageBackend runs a snapshot's own image.
	ImageBackend = backend.ImageBackend
	// ImageSpec is what a snapshot is made from.
	ImageSpec = backend.ImageSpec
	// VolumeBackend gives volumes storage and mounts them.
	VolumeBackend = backend.VolumeBackend
	// NetworkBackend applies a sandbox's network settings.
	NetworkBackend = backend.NetworkBackend
	// ResizeBackend changes a running workload's CPU and memory.
	ResizeBackend = backend.ResizeBackend
	// PauseBackend freezes a running workload in place and lets it run on.
	PauseBackend = backend.PauseBackend
	// NetworkPolicy is a sandbox's network settings.
	NetworkPolicy = backend.NetworkPolicy
	// VolumeMount is one volume in a Workload.
	VolumeMount = backend.VolumeMount
	// Link puts a workload beside another's so that it reaches it by name.
	Link = backend.Link
	// RuntimeBackendConfig configures NewRuntimeBackend.
	RuntimeBackendConfig = backend.RuntimeConfig
)

// TokenEnv is the variable a sandbox's workload finds its own secret in.
const TokenEnv = backend.TokenEnv

var (
	// ErrNoWorkload is returned by backends that have no workload to reach.
	ErrNoWorkload = backend.ErrNoWorkload
	// ErrNotListening says that no process of the sandbox listens on the
	// port a request asked for.
	ErrNotListening = backend.ErrNotListening
)

// NoneBackend makes the simulator a pure state machine: sandboxes have no
// workload, so toolbox and preview requests fail, and every operation is
// free.
func NoneBackend() Backend { return backend.None{} }

// NewRuntimeBackend runs each sandbox's workload on a sandplane runtime
// (native processes or docker containers); see backend.NewRuntime.
func NewRuntimeBackend(cfg RuntimeBackendConfig) (Backend, error) { return backend.NewRuntime(cfg) }
