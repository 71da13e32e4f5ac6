package provider

import (
	"context"

	"github.com/sandplane/sandplane/provider/wire"
)

// The wire types are generated from the contract (package wire); these aliases
// are the names host servers use.
type (
	Sandbox        = wire.SandboxInfo
	CreateRequest  = wire.CreateSandboxRequest
	ResizeRequest  = wire.ResizeRequest
	State          = wire.SandboxState
	Runtime        = wire.Runtime
	Info           = wire.Info
	EntrypointLogs = wire.EntrypointLogs
	Preview        = wire.PreviewURL
	Event          = wire.Event
	EventType      = wire.EventType
)

const (
	EventSandboxesReplaced = wire.SandboxesReplaced
	EventCreated           = wire.SandboxCreated
	EventStarted           = wire.SandboxStarted
	EventStopped           = wire.SandboxStopped
	EventDeleted           = wire.SandboxDeleted
	EventActivity          = wire.SandboxActivity
	EventUpdated           = wire.SandboxUpdated
)

// Activity sources, the Source of an EventActivity.
const (
	SourceRefresh  = "refresh"
	SourceMutation = "mutation"
	SourceProxy    = "proxy"
)

const (
	StateStarting  = wire.Starting
	StateStarted   = wire.Started
	StateStopping  = wire.Stopping
	StateStopped   = wire.Stopped
	StatePaused    = wire.Paused
	StateDestroyed = wire.Destroyed
	StateError     = wire.Error

	RuntimeNative = wire.Native
	RuntimeDocker = wire.Docker
)

// PreviewTokenHeader carries Preview.Token on requests to Preview.URL, as
// Daytona's proxy expects it.
const PreviewTokenHeader = "X-Daytona-Preview-Token"

// ErrorReasonAutoStopped is the errorReason of a sandbox stopped for idleness.
const ErrorReasonAutoStopped = "auto_stopped"

// ListOptions narrows List.
type ListOptions struct {
	// Labels must all match exactly.
	Labels map[string]string
	// SessionID, when set, is the agent session the sandboxes belong to.
	SessionID string
}

// LabelSession is the label in which a backend with no sessions of its own
// (Daytona) keeps the session a sandbox belongs to (CreateRequest.SessionID).
const LabelSession = "sandplane.session"

// Provider runs sandboxes. Every method takes the sandbox's id or its name.
// Implementations are safe for concurrent use. Errors carry a code (see Code);
// the ones each method may return are listed, and any method may also return
// unavailable (the backend cannot be reached), unauthenticated and internal.
type Provider interface {
	// Info identifies the backend.
	Info(ctx context.Context) (*Info, error)

	// Create starts a sandbox and returns it once it is started.
	// invalid_argument: a malformed request. already_exists: the id or name is
	// taken. preflight_failed: the request cannot run here (unknown snapshot,
	// missing command or image); nothing was spawned. create_failed: the
	// workload ended before it came up. unavailable: it did not come up
	// within the create's deadline (a retry may succeed), or the provider
	// cannot be reached. Either way everything was rolled back.
	// resource_exhausted: no free port.
	Create(ctx context.Context, req CreateRequest) (*Sandbox, error)

	// Get returns the sandbox. not_found.
	Get(ctx context.Context, idOrName string) (*Sandbox, error)

	// List returns the sandboxes that match opts, oldest first.
	List(ctx context.Context, opts ListOptions) ([]Sandbox, error)

	// Start respawns a stopped sandbox with its preserved state and returns it
	// started; a started sandbox is returned as it is. not_found.
	// failed_precondition: the sandbox is mid-transition or its old workload
	// could not be killed yet. create_failed: the workload ended before it
	// came up; unavailable: it did not come up within the deadline.
	Start(ctx context.Context, idOrName string) (*Sandbox, error)

	// Stop stops the workload and keeps what Start needs. not_found.
	// failed_precondition: the sandbox is mid-transition or already stopped
	// (as on Daytona; see Traits.StopStoppedIsNoop).
	Stop(ctx context.Context, idOrName string) (*Sandbox, error)

	// Delete stops and removes the sandbox. Deleting a missing sandbox is not
	// an error. failed_precondition: mid-transition.
	Delete(ctx context.Context, idOrName string) error

	// RefreshActivity resets the idle clock without changing state. not_found.
	RefreshActivity(ctx context.Context, idOrName string) error

	// SetAutoStopInterval sets the idle minutes before auto-stop; 0 disables.
	// It does not reset the idle clock. not_found, invalid_argument (< 0),
	// failed_precondition: minutes > 0 beside auto-pause (see AutoPauser).
	SetAutoStopInterval(ctx context.Context, idOrName string, minutes int) (*Sandbox, error)

	// Resize changes the sandbox's resources. not_found, invalid_argument;
	// see Traits.ResizeIsNoop.
	Resize(ctx context.Context, idOrName string, req ResizeRequest) (*Sandbox, error)

	// PreviewURL returns where port of the sandbox is reachable (URL) and
	// the token that requests to it send in the PreviewTokenHeader header;
	// port 0 means the sandbox's own port. An empty Token means the URL
	// carries its own authorisation (Daytona's signed preview URLs). The
	// token is a secret: never log it. not_found, invalid_argument,
	// failed_precondition (not started).
	PreviewURL(ctx context.Context, idOrName string, port int) (*Preview, error)

	// EntrypointLogs returns what the workload printed, with secret values
	// redacted. not_found, unsupported.
	EntrypointLogs(ctx context.Context, idOrName string) (*EntrypointLogs, error)

	// Traits tells how this backend differs from the others.
	Traits() Traits
}

// WatchOptions narrow Watch.
type WatchOptions struct {
	// Labels must all match exactly.
	Labels map[string]string
}

// Watcher is implemented by providers that stream lifecycle events.
type Watcher interface {
	// Watch streams events until ctx ends, starting with an
	// EventSandboxesReplaced snapshot. The channel is closed when ctx ends.
	// Implementations resume after a dropped connection without a gap, or
	// send a fresh snapshot when they cannot. unavailable, unsupported.
	Watch(ctx context.Context, opts WatchOptions) (<-chan Event, error)
}

// Traits are the named, deliberate differences between backends. The
// conformance suite asserts each one, so a difference is never an accident.
type Traits struct {
	// Name of the backend: "local", "daytona".
	Name string
	// StopStoppedIsNoop: stopping a stopped sandbox succeeds instead of
	// failing with failed_precondition. Daytona answers 400; the local
	// control plane treats stop as idempotent because host servers call it
	// from cleanup paths.
	StopStoppedIsNoop bool
	// ResizeIsNoop: Resize is accepted and changes nothing, because a local
	// process has no resource envelope to change.
	ResizeIsNoop bool
	// SyncStop: Stop returns once the sandbox is stopped, not while it is
	// still stopping.
	SyncStop bool
	// ReapInterval is how often, in interval minutes, auto-stop is checked;
	// an idle sandbox stops up to this much after its interval ends.
	ReapIntervalMinutes float64
	// NoEntrypointLogs: EntrypointLogs answers unsupported, because the
	// backend keeps no workload output. Both backends keep it: the local
	// control plane its workload's, Daytona its toolbox's entrypoint
	// session.
	NoEntrypointLogs bool
	// NoStopReason: a sandbox that stopped on its own, auto-stop included,
	// carries no errorReason, because the backend does not record why
	// (Daytona).
	NoStopReason bool
	// TTL: the provider implements TTLSetter and honours
	// CreateRequest.TTLMinutes; without it a create with a TTL answers
	// unsupported.
	TTL bool
	// AutoPause: the provider implements AutoPauser and honours
	// CreateRequest.AutoPauseInterval, and its sandboxes can be
	// StatePaused; without it a create with a non-zero interval answers
	// unsupported.
	AutoPause bool
	// Secrets: the provider implements SecretsAttacher and honours
	// CreateRequest.Secrets; without it a create with secrets answers
	// unsupported.
	Secrets bool
	// WarmPools: the provider implements WarmPooler.
	WarmPools bool
}
