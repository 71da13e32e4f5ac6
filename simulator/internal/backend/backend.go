package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	// Image is the snapshot's image reference from an ImageBackend; empty
	// runs the default workload.
	Image string
	// Volumes are mounted at their MountPath (VolumeBackend).
	Volumes []VolumeMount
	// Network is applied from the start (NetworkBackend).
	Network NetworkPolicy
	// Link, when set, puts the workload where it reaches its owner by name.
	Link *Link
	// CPU (cores) and Memory (GiB) limit the workload where the backend can.
	CPU, Memory int
	// Egress, when set, sends the workload's outbound HTTP(S) through the
	// simulator's secrets proxy (EgressBackend); nil leaves it direct.
	Egress *Egress
	// Entrypoint is the snapshot's own entrypoint, which the sandbox's
	// toolbox runs as its session "entrypoint", as Daytona's daemon does.
	// Empty runs the image's ENTRYPOINT and CMD (ImageBackend), or
	// DefaultEntrypoint where there is none.
	Entrypoint []string
	// ForkOf, when set, is the sandbox whose files this workload starts
	// with on its first start (ForkBackend).
	ForkOf string
}

// DefaultEntrypoint is what a sandbox runs as its entrypoint when neither
// its snapshot nor its image names one: what Daytona's default sandbox
// image runs (its Dockerfile, images/sandbox in Daytona's repository, ends
// with ENTRYPOINT ["sleep", "infinity"]), so that every sandbox has an
// entrypoint session, as on Daytona.
var DefaultEntrypoint = []string{"sleep", "infinity"}

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
	// Toolbox returns the route to the toolbox of a running sandbox, with
	// the sandbox's own secret as the Route's Token. Like Port, it never
	// leads anywhere but to the sandbox: ErrNotListening when no process of
	// the sandbox serves the toolbox's port, ErrNoWorkload without one.
	Toolbox(ctx context.Context, sandboxID string) (Route, error)
	// Port returns the route to port of a running sandbox, only when a
	// process of that sandbox listens on it: ErrNotListening otherwise,
	// whatever else may listen on that port of the host. ErrNoWorkload when
	// the backend has no workloads.
	Port(ctx context.Context, sandboxID string, port int) (Route, error)
	// Close releases the backend; workloads still running are removed.
	Close() error
}

// Route is where the proxy sends a request for a sandbox.
type Route struct {
	// URL is the base the request's path is appended to.
	URL *url.URL
	// Host is the Host header the workload sees.
	Host string
	// Token, when set, is the sandbox's own secret, which the proxy sends as
	// X-Daytona-Preview-Token in place of the caller's credentials.
	Token string
	// Transport carries the request. Its pooled connections lead to this
	// sandbox's workload only.
	Transport http.RoundTripper
	// Dial opens a connection to the route's port, as Transport does, for
	// what is not HTTP (an SSH port forward).
	Dial func(ctx context.Context) (net.Conn, error)
}

var (
	// ErrNoWorkload is returned by backends that have no workload to reach.
	ErrNoWorkload = errors.New("this simulator runs without workloads (backend none)")
	// ErrNotListening says that no process of the sandbox listens on the
	// port a request asked for.
	ErrNotListening = errors.New("sandbox workload unreachable")
)

// notListening is ErrNotListening for one sandbox and port.
func notListening(sandboxID string, port int) error {
	return fmt.Errorf("%w: no process of sandbox %s listens on port %d", ErrNotListening, sandboxID, port)
}

// None makes the simulator a pure state machine: sandboxes have no
// workload, so toolbox and preview requests fail, and every operation is
// free. It is the choice for large, fast runs. A fake backend in a test
// embeds it and overrides what it needs.
type None struct{}

func (None) Name() string                                     { return "none" }
func (None) Start(context.Context, Workload) (string, error)  { return "", nil }
func (None) Stop(context.Context, string, bool) error         { return nil }
func (None) Remove(context.Context, string) error             { return nil }
func (None) Toolbox(context.Context, string) (Route, error)   { return Route{}, ErrNoWorkload }
func (None) Port(context.Context, string, int) (Route, error) { return Route{}, ErrNoWorkload }
func (None) Close() error                                     { return nil }
