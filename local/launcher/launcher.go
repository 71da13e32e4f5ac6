package launcher

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Config configures a Launcher. Zero values get the defaults noted.
type Config struct {
	// Driver runs the workloads. Required.
	Driver driver.Driver
	// Ports hands out the port each workload serves on (FreePorts).
	Ports Ports
	// Clock paces readiness polls and bounds the wait (clock.Real()).
	Clock clock.Clock
	// ReadyTimeout bounds the wait for a workload to come up (30 s, as
	// Daytona holds a create).
	ReadyTimeout time.Duration
	// StopGrace is how long a workload that End stops gets between SIGTERM
	// and SIGKILL (10 s).
	StopGrace time.Duration
	// StartGate, when set, is held from the start of a workload until
	// Request.Record returns, so that whoever takes it exclusively (an
	// orphan sweep) never sees a workload that is not on record yet.
	StartGate sync.Locker
	// Logger receives what cleanup could not do (slog.Default()).
	Logger *slog.Logger
	// OwnAddresses gives every workload with a network of its own (one
	// that is not on the host's, driver.HostNetwork) a loopback address of
	// its own, OwnAddress of its first host port, to bind its host ports
	// on: the daemon's previews need it, the simulator does not. Browsers
	// send a cookie of a host to every port of it, and *.localhost resolves
	// to 127.0.0.1 and [::1]; a sandbox's listener on either would be sent
	// every preview's cookie by a page that points a browser at
	// <port>-<another id>.localhost:<its own port>.
	OwnAddresses bool
}

// Launcher starts workloads on one driver and waits until they serve: the
// one way the daemon's manager, and the simulator's backend, bring a
// workload up. It is safe for concurrent use.
type Launcher struct {
	cfg Config
}

// New returns a Launcher. It does no I/O.
func New(cfg Config) (*Launcher, error) {
	if cfg.Driver == nil {
		return nil, errors.New("launcher: a driver is required")
	}
	if cfg.Ports == nil {
		cfg.Ports = FreePorts{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Launcher{cfg: cfg}, nil
}

// Driver is the driver the launcher starts workloads on.
func (l *Launcher) Driver() driver.Driver { return l.cfg.Driver }

// Request is one workload to launch.
type Request struct {
	// Spec is the workload; Launch sets its Port (and, with SandboxPorts,
	// its SandboxPort and ExtraPorts).
	Spec driver.Spec
	// PreferPort is the port to take again when it is free (the one a
	// stopped sandbox had); 0 for any.
	PreferPort int
	// SandboxPorts are the ports the workload serves inside the sandbox, its
	// own first, then the others it declares. Each gets a host port, and
	// the workload is told which port to bind for each: PORT for its own,
	// PORT_<sandbox port> for every one. That is the sandbox port where it
	// has a network of its own (docker, isolated native), the host port
	// where it shares the host's (driver.HostNetwork). Empty: one host port,
	// Spec.Port, and the environment Prepare leaves.
	SandboxPorts []int
	// PreferPorts are the host ports to take again by sandbox port.
	PreferPorts map[int]int
	// Ready says when the workload counts as up.
	Ready Readiness
	// Prepare, when set, completes the spec once its ports are known: the
	// environment ($PORT, unless SandboxPorts are given: the port variables
	// are then set after Prepare, over what it left), a host's own
	// adjustments. An error aborts the launch before anything runs, as it is.
	Prepare func(ctx context.Context, spec *driver.Spec) error
	// Record, when set, is told of the workload as soon as it exists, under
	// StartGate, so that a crash from then on finds it. An error discards
	// the workload and fails the launch, as it is.
	Record func(h driver.Handle, port int) error
	// Undo, when set, runs when a launch fails after Prepare succeeded,
	// once nothing of the workload runs: whatever Prepare took, it gives
	// back.
	Undo func()
	// Redact hides secret values in the workload output that a readiness
	// failure quotes. Nil: the output is not quoted.
	Redact func(string) string
}

// Workload is a launched workload.
type Workload struct {
	Handle driver.Handle
	Port   int
	// Addr is the loopback address of its host ports (Spec.HostAddr).
	Addr netip.Addr
	// Ports are the host ports by sandbox port, when the request gave
	// SandboxPorts.
	Ports map[int]int
}

// Launch takes a port, completes the spec (Prepare), checks it
// (Driver.Preflight), starts it, records it (Record) and waits until it is
// ready, in that order. On error nothing of it runs and the port is free
// again. preflight_failed and unavailable come from the driver as they are;
// create_failed: the workload did not start, or ended before it came up;
// unavailable: it did not come up within ReadyTimeout (both with the end of
// its output, a *NotReadyError for errors.As); resource_exhausted: no free
// port.
func (l *Launcher) Launch(ctx context.Context, req Request) (Workload, error) {
	spec, ports, err := l.allocate(req)
	if err != nil {
		return Workload{}, err
	}
	release := func() {
		for _, m := range spec.Mappings() {
			l.cfg.Ports.Release(m.Host)
		}
	}
	if req.Prepare != nil {
		if err := req.Prepare(ctx, &spec); err != nil {
			release()
			return Workload{}, err
		}
	}
	if len(req.SandboxPorts) > 0 {
		l.setPortEnv(&spec)
	}
	fail := func(err error) (Workload, error) {
		release()
		if req.Undo != nil {
			req.Undo()
		}
		return Workload{}, err
	}
	if err := l.cfg.Driver.Preflight(ctx, spec); err != nil {
		return fail(err)
	}
	defer l.Warm(spec)
	h, err := l.start(ctx, spec, req.Record)
	if err != nil {
		return fail(err)
	}
	if err := l.waitReady(ctx, h, spec.HostAddrPort(), req.Ready); err != nil {
		// The output first: removing a container takes its logs with it.
		out := l.output(ctx, h, spec.Dir, req.Redact)
		l.abandon(spec, h)
		return fail(notReady(err, out))
	}
	return Workload{Handle: h, Port: spec.Port, Addr: spec.HostAddr(), Ports: ports}, nil
}

// Warm lets a driver that can (driver.Warmer) prepare a launch like spec's,
// in the background. Launch calls it once it is over (its workload up or
// discarded), so that neither its start nor its answer waits for it.
func (l *Launcher) Warm(spec driver.Spec) {
	if w, ok := l.cfg.Driver.(driver.Warmer); ok {
		go w.Warm(spec)
	}
}

// Cool ends what Warm prepared, and keeps the driver from preparing more:
// for the launcher's owner to call as it shuts down.
func (l *Launcher) Cool() {
	if w, ok := l.cfg.Driver.(driver.Warmer); ok {
		w.Cool()
	}
}

// output is the end of the workload's output, redacted; "" without redact,
// which is how a request says its output may not be quoted.
func (l *Launcher) output(ctx context.Context, h driver.Handle, dir string, redact func(string) string) string {
	if redact == nil {
		return ""
	}
	stdout, stderr, _ := l.cfg.Driver.Logs(ctx, h, dir)
	return lastOutput(redact, stdout, stderr)
}

// notReady is the error of a workload that did not come up: a
// *NotReadyError with its output when it ended (create_failed) or timed out
// (unavailable); the runtime's error when it could not tell, unavailable
// when the runtime did not answer, else create_failed.
func notReady(err error, output string) error {
	var nr *NotReadyError
	if errors.As(err, &nr) {
		nr.Output = output
		return provider.Errorf(nr.code(), "%w", nr)
	}
	code := provider.CreateFailed
	if provider.Code(err) == provider.Unavailable {
		// The runtime stopped answering while the workload came up (an
		// engine that went away): not the command's fault, and a retry
		// once it answers can succeed.
		code = provider.Unavailable
	}
	return provider.Errorf(code, "%v%s", err, outputSuffix(output))
}

// allocate takes the host ports of req, one or one per sandbox port, and
// their address (see Config.OwnAddresses). On error it holds none.
func (l *Launcher) allocate(req Request) (driver.Spec, map[int]int, error) {
	spec, ports, err := l.allocatePorts(req)
	if err == nil && l.cfg.OwnAddresses && !l.onHost(spec) {
		spec.HostIP = OwnAddress(spec.Port)
	}
	return spec, ports, err
}

// OwnAddress is the loopback address of a workload whose first host port
// is port: 127.1.<port / 256>.<port % 256>. Linux routes all of
// 127.0.0.0/8 to lo, so binding it needs no setup; 127.1.0.0/16 is clear
// of the addresses systems give themselves (127.0.0.53, Debian's
// 127.0.1.1). The address is unique while the port is held, and a port
// range never hands out a port twice on one machine, even across daemons,
// so no address is shared either; a restart that takes the port again
// takes the address again, and costs nothing to find.
func OwnAddress(port int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 1, byte(port >> 8), byte(port)})
}

// onHost reports whether spec's workload runs on the host's network.
func (l *Launcher) onHost(spec driver.Spec) bool {
	hn, _ := l.cfg.Driver.(driver.HostNetwork)
	return hn != nil && hn.SharesHostNetwork(spec)
}

// allocatePorts takes the host ports of req. On error it holds none.
func (l *Launcher) allocatePorts(req Request) (driver.Spec, map[int]int, error) {
	spec := req.Spec
	if len(req.SandboxPorts) == 0 {
		port, err := l.cfg.Ports.Allocate(req.PreferPort)
		spec.Port = port
		return spec, nil, err
	}
	ports := make(map[int]int, len(req.SandboxPorts))
	var held []int
	for i, sp := range req.SandboxPorts {
		prefer := req.PreferPorts[sp]
		if i == 0 && prefer == 0 {
			prefer = req.PreferPort
		}
		port, err := l.cfg.Ports.Allocate(prefer)
		if err != nil {
			for _, p := range held {
				l.cfg.Ports.Release(p)
			}
			return spec, nil, err
		}
		held = append(held, port)
		ports[sp] = port
	}
	spec.Port, spec.SandboxPort, spec.ExtraPorts = held[0], req.SandboxPorts[0], nil
	for i, sp := range req.SandboxPorts[1:] {
		spec.ExtraPorts = append(spec.ExtraPorts, driver.PortMapping{Sandbox: sp, Host: held[i+1]})
	}
	return spec, ports, nil
}

// setPortEnv tells the workload which port to bind for each of its ports:
// PORT for its own, PORT_<sandbox port> for every one.
func (l *Launcher) setPortEnv(spec *driver.Spec) {
	onHost := l.onHost(*spec)
	bind := func(m driver.PortMapping) string {
		if onHost {
			return strconv.Itoa(m.Host)
		}
		return strconv.Itoa(m.Sandbox)
	}
	env := make(map[string]string, len(spec.Env)+len(spec.ExtraPorts)+2)
	for k, v := range spec.Env {
		env[k] = v
	}
	for i, m := range spec.Mappings() {
		if i == 0 {
			env["PORT"] = bind(m)
		}
		env[PortEnv(m.Sandbox)] = bind(m)
	}
	spec.Env = env
}

// PortEnv is the variable that tells a workload which port to bind for its
// sandbox port p.
func PortEnv(p int) string { return "PORT_" + strconv.Itoa(p) }

// start starts spec's workload and records it, both under StartGate. On
// error nothing runs.
func (l *Launcher) start(ctx context.Context, spec driver.Spec, record func(driver.Handle, int) error) (driver.Handle, error) {
	if g := l.cfg.StartGate; g != nil {
		g.Lock()
		defer g.Unlock()
	}
	h, err := l.cfg.Driver.Start(ctx, spec)
	if err != nil {
		if c := provider.Code(err); c != provider.PreflightFailed && c != provider.Unavailable && c != provider.FailedPrecondition {
			err = provider.Errorf(provider.CreateFailed, "start workload: %s", provider.Message(err))
		}
		return driver.Handle{}, err
	}
	if record != nil {
		if err := record(h, spec.Port); err != nil {
			l.Discard(h)
			return driver.Handle{}, err
		}
	}
	return h, nil
}

// End stops the workload behind h (SIGTERM, then SIGKILL after StopGrace)
// and removes what its start created. An error means it may still run; a
// failed removal of what is left is only logged.
func (l *Launcher) End(ctx context.Context, h driver.Handle) error {
	if err := l.cfg.Driver.Stop(ctx, h, l.cfg.StopGrace); err != nil {
		return err
	}
	if err := l.cfg.Driver.Remove(ctx, h); err != nil {
		l.cfg.Logger.Error("remove ended workload", "container", h.ContainerID, "err", err)
	}
	return nil
}

// abandon ends the workload of a launch that failed. One of a sandbox that
// ran before is only stopped: its container holds the sandbox's files,
// which the next start takes up again.
func (l *Launcher) abandon(spec driver.Spec, h driver.Handle) {
	if !spec.Ran {
		l.Discard(h)
		return
	}
	if err := l.cfg.Driver.Stop(context.Background(), h, l.cfg.StopGrace); err != nil {
		l.cfg.Logger.Error("stop failed workload", "pid", h.PID, "container", h.ContainerID, "err", err)
	}
}

// Discard ends a workload that is no one's, logging what fails.
func (l *Launcher) Discard(h driver.Handle) {
	if err := l.End(context.Background(), h); err != nil {
		l.cfg.Logger.Error("kill failed workload", "pid", h.PID, "container", h.ContainerID, "err", err)
	}
}
