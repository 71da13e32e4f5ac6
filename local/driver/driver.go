package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// Spec is everything a runtime needs to spawn one workload.
type Spec struct {
	// SandboxID identifies the sandbox; runtimes mark the workload with it.
	SandboxID string
	// Root is the daemon's state directory. Runtimes mark workloads with it
	// too, so that Orphans finds only this daemon's.
	Root string
	// Dir is the sandbox's own directory. It survives stop and start; the
	// native runtime writes stdout.log and stderr.log there and uses it as the
	// working directory unless WorkDir is set.
	Dir string
	// Command is the argv. For docker it overrides the image's command when
	// non-empty.
	Command []string
	// Image is the Docker image; unused by the native runtime.
	Image   string
	WorkDir string
	User    string
	// Env is the workload's complete environment (PORT included). Values are
	// secret: never log them.
	Env map[string]string
	// Port is the host port the workload is reached at, on HostIP. A
	// workload on the host's network (HostNetwork) serves there itself, on
	// 127.0.0.1; one with a network of its own serves on SandboxPort, and
	// Port leads there: docker publishes it, an isolated native workload's
	// init forwards it.
	Port int
	// HostIP is the loopback address the host ports of a workload with a
	// network of its own are bound on; the zero Addr means 127.0.0.1. An
	// address of its own keeps browsers from sending it the cookies of
	// 127.0.0.1 and of *.localhost, which are scoped by host, never by
	// port. A workload on the host's network ignores it.
	HostIP netip.Addr
	// SandboxPort is the port the workload serves on in a network of its
	// own; 0 means Port.
	SandboxPort int
	// ExtraPorts are more ports of the workload, reached the same way.
	ExtraPorts []PortMapping
	Labels     map[string]string
	// Isolation asks for more than the runtime's containment: "bwrap" runs
	// a native workload in a bubblewrap sandbox (its own mounts, /proc and
	// network, the port forwarded in). Empty means the runtime's default;
	// "none" means containment only. Docker ignores it.
	Isolation string
	// Network is docker's network for the workload: "" for the runtime's
	// isolated bridge with Port published on loopback, "host" for the
	// host's network (no port proxy, no isolation of ports). The native
	// runtime ignores it.
	Network string
	// Mounts are engine volumes the workload sees at their Target (docker).
	// The native runtime ignores them; its callers map volumes themselves.
	Mounts []Mount
	// CPU (cores) and MemoryGiB limit the workload where the runtime can
	// enforce them (docker); zero is no limit. The native runtime ignores
	// them.
	CPU, MemoryGiB int
	// Binds are host directories a native workload sees at other paths, in
	// a mount namespace of its own, without any change to the host's file
	// system (runtimes whose Binder says so; others refuse them). WorkDir
	// may name a path inside a bind's Target. Docker ignores them.
	Binds []Bind
	// Ran says the sandbox ran before: this is a start after a stop. A
	// runtime whose workload holds the sandbox's files (docker's container)
	// fails that start with ErrWorkloadRemoved when the workload is gone,
	// rather than start afresh without them.
	Ran bool
}

// ReasonWorkloadRemoved is the exit reason of a workload that was removed
// behind the daemon's back (docker rm, docker system prune), and with it
// the sandbox's files.
const ReasonWorkloadRemoved = "container_removed"

// ErrWorkloadRemoved is (wrapped in a failed_precondition) Start's error
// for a sandbox that ran before whose workload, and its files, are gone.
var ErrWorkloadRemoved = errors.New(ReasonWorkloadRemoved)

// Bind shows the host directory Source at Target inside a workload.
type Bind struct {
	Source string
	Target string
}

// Binder is implemented by runtimes that can honour Spec.Binds.
type Binder interface {
	// CanBind reports whether this runtime, on this platform, shows a
	// workload Spec.Binds; false means a spec with binds fails preflight
	// (preflight_failed).
	CanBind() bool
}

// PortMapping is a port of a workload: where it serves in a network of its
// own, and the host port that leads there.
type PortMapping struct {
	Sandbox int
	Host    int
}

// HostAddr is the loopback address s's host ports are bound on: HostIP, or
// 127.0.0.1.
func (s Spec) HostAddr() netip.Addr {
	if s.HostIP.IsValid() {
		return s.HostIP
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// HostAddrPort is where the workload of s is reached on the host: its own
// port, Port, on HostAddr.
func (s Spec) HostAddrPort() netip.AddrPort {
	return netip.AddrPortFrom(s.HostAddr(), uint16(s.Port))
}

// Inside is the port the workload of s serves on in a network of its own.
func (s Spec) Inside() int {
	if s.SandboxPort != 0 {
		return s.SandboxPort
	}
	return s.Port
}

// Mappings are every port of s, its own first.
func (s Spec) Mappings() []PortMapping {
	return append([]PortMapping{{Sandbox: s.Inside(), Host: s.Port}}, s.ExtraPorts...)
}

// Mount is an engine volume inside a workload.
type Mount struct {
	// Volume names the engine volume.
	Volume string
	// Subpath, when set, mounts only that directory of the volume.
	Subpath string
	// Target is the absolute path inside the workload.
	Target string
}

// Handle identifies a spawned workload. It is persisted in sandbox.json, so
// its fields must be enough to find the workload again after the daemon
// restarts.
type Handle struct {
	Runtime provider.Runtime `json:"runtime"`
	// PID and StartTime (the process start time in clock ticks since boot, from
	// /proc/PID/stat) together prove a pid still names our child after pid
	// reuse.
	PID         int    `json:"pid,omitempty"`
	StartTime   uint64 `json:"startTime,omitempty"`
	ContainerID string `json:"containerId,omitempty"`
}

// Exit says how a workload ended.
type Exit struct {
	// Reason is what errorReason shows: "exited: code N", "killed: signal S",
	// or "process gone" when the status cannot be known (a workload adopted
	// after a daemon restart).
	Reason string
	// Code is the exit code when known.
	Code *int
}

// Status is a point-in-time view of a workload.
type Status struct {
	Running bool
	// Exit is set when Running is false.
	Exit Exit
}

// Driver spawns and controls workloads. Implementations are safe for
// concurrent use; the manager serialises operations on one sandbox.
type Driver interface {
	// Name is the runtime's name in the API.
	Name() provider.Runtime

	// Preflight checks, without side effects, that spec can run here.
	// preflight_failed: a missing command or image, naming it.
	// unavailable: the engine does not answer, naming the fix.
	Preflight(ctx context.Context, spec Spec) error

	// Start spawns the workload and returns as soon as it exists; readiness
	// is the manager's business. On error nothing is left behind.
	// preflight_failed, create_failed, unavailable.
	Start(ctx context.Context, spec Spec) (Handle, error)

	// Status reports whether the workload behind h still runs. A handle whose
	// process or container is gone, or whose pid now names another process,
	// is not running. unavailable.
	Status(ctx context.Context, h Handle) (Status, error)

	// Wait blocks until the workload ends and reports how, or returns ctx's
	// error. It works for workloads adopted after a restart too.
	Wait(ctx context.Context, h Handle) (Exit, error)

	// Stop asks the workload to end (SIGTERM to every process of it, or
	// docker stop), then kills it after grace. A workload already gone is not an
	// error. An error means the workload may still run; callers retry.
	Stop(ctx context.Context, h Handle, grace time.Duration) error

	// Remove releases everything Start created apart from Spec.Dir (the
	// container, for docker). The workload must be stopped. Idempotent.
	Remove(ctx context.Context, h Handle) error

	// Logs returns what the workload wrote to stdout and stderr, unredacted.
	Logs(ctx context.Context, h Handle, dir string) (stdout, stderr []byte, err error)

	// Orphans returns the workloads marked with root that are not among
	// known: leftovers of a daemon that died mid-create.
	Orphans(ctx context.Context, root string, known []Handle) ([]Handle, error)
}

// Prober is implemented by runtimes for which a connection to the published
// port does not prove the workload listens (Docker's userland proxy accepts
// before the container does). The launcher asks it for a workload that
// declares ready: port, which speaks something other than HTTP; without it
// the launcher dials the port. The default readiness, an HTTP answer, needs
// neither: no proxy writes one.
type Prober interface {
	// Probe reports whether the workload behind h serves on addr, one of
	// its host ports.
	Probe(ctx context.Context, h Handle, addr netip.AddrPort) (bool, error)
}

// PortLister is implemented by runtimes whose workloads share the host's
// network stack (native processes), where a port number alone does not say
// whose it is. A proxy that must reach only a sandbox's own ports asks it
// which sockets the sandbox listens on.
type PortLister interface {
	// ListeningPorts returns the local addresses of the TCP sockets in LISTEN
	// state that the processes of h's sandbox hold: the workload and every
	// process of its PID namespace, or, when it shares the caller's, its
	// descendants and the members of its session. A workload that is not
	// running listens on nothing (no error). The answer is read at the time
	// of the call, never cached. unavailable: /proc cannot be read.
	ListeningPorts(ctx context.Context, h Handle) ([]netip.AddrPort, error)
}

// HostNetwork is implemented by runtimes whose workloads may share the
// host's network stack (a native process without isolation). Such a
// workload binds host ports itself, so it is told Spec.Port and the Host of
// each mapping rather than the sandbox ports.
type HostNetwork interface {
	// SharesHostNetwork reports whether spec's workload runs on the host's
	// network.
	SharesHostNetwork(spec Spec) bool
}

// PortDialer is implemented by runtimes that reach, from the host, any port
// of a workload on a network of its own, not only those forwarded to host
// ports (a native workload under bwrap isolation).
type PortDialer interface {
	// DialPort connects to port on the loopback of the workload whose
	// sandbox directory is dir. unavailable: nothing listens there, or the
	// workload has no network of its own.
	DialPort(ctx context.Context, dir string, port int) (net.Conn, error)
}

// Marker is implemented by runtimes that can read back the sandbox id Start
// marked a workload with (an environment variable, a label). The manager
// uses it to spare the workloads of a sandbox whose record it cannot read.
// A runtime without it makes the manager spare every unknown workload of
// that runtime while any record is unreadable.
type Marker interface {
	// SandboxOf returns the sandbox id the workload behind h is marked with,
	// or "" when it carries no mark or is gone. unavailable.
	SandboxOf(ctx context.Context, h Handle) (string, error)
}

// Sweeper is implemented by runtimes whose interrupted operations can leave
// something behind besides workloads (an image a replace committed).
type Sweeper interface {
	// Sweep removes what operations on workloads marked with root left
	// behind and nothing uses any more. The manager calls it when no spawn
	// is under way. unavailable.
	Sweep(ctx context.Context, root string) error
}

// Warmer is a runtime that can prepare, ahead of a Start, what starting a
// workload like spec's takes, so that the next such Start pays less. Warm
// may block while it prepares; it cannot fail its caller (a failure only
// means the next Start pays in full). What it prepares ends with the
// runtime's process, or at Cool, after which Warm prepares nothing: the
// owner's shutdown. The launcher calls Warm once a launch is over.
type Warmer interface {
	Warm(spec Spec)
	Cool()
}

// Containment is implemented by runtimes that can say how they keep a
// workload's processes together, so that a stop ends them all.
type Containment interface {
	// Containment names the mechanism in use: "pid-namespace" (the kernel
	// ends every process of the workload with its init) or "process-group"
	// (a signal to the group, which setsid escapes).
	Containment() string
}
