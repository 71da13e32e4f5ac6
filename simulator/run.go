package simulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandplane/sandplane/internal/netguard"
	"github.com/sandplane/sandplane/internal/serve"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// DefaultListen is where Run serves unless told otherwise.
const DefaultListen = "127.0.0.1:4026"

// EnvAdminKey is the variable that holds the admin key, so that it need not
// show on a command line. Run prints a key it generated as this variable.
const EnvAdminKey = "SANDPLANE_SIM_ADMIN_KEY"

// EnvWebhookSecret is the variable that holds the webhook secret; Run
// prints one it generated as this variable.
const EnvWebhookSecret = "SANDPLANE_SIM_WEBHOOK_SECRET"

// The workload runtimes RunConfig.Workloads names.
const (
	WorkloadsNative = "native"
	WorkloadsDocker = "docker"
	WorkloadsNone   = "none"
)

// SSHOff is the SSHListen that serves no SSH gateway.
const SSHOff = "off"

// shutdownTimeout bounds a graceful shutdown.
const shutdownTimeout = 10 * time.Second

// RunConfig is the simulator as a process serves it (Run).
type RunConfig struct {
	// Config is the simulator's. Run fills in Clock (clock.Real()), Logger
	// (discard), Backend (from Workloads, unless set; Run closes it either
	// way), AnyHost (on an address that is not loopback) and AdminKey (a
	// generated one when empty).
	Config
	// Listen is the address to serve on: DefaultListen when empty. One that
	// is not loopback needs APIKeys, and then only they are accepted.
	Listen string
	// SSHListen is the SSH gateway's address (ServeSSH): empty takes
	// Listen's host and Daytona's gateway port, 22222, or any free port
	// there when that one is taken; SSHOff serves no gateway. An address
	// given must be free.
	SSHListen string
	// Workloads names what runs each sandbox when Config.Backend is nil:
	// WorkloadsNative processes (the default), WorkloadsDocker containers,
	// or WorkloadsNone, a pure state machine.
	Workloads string
	// Root is the workloads' state directory. Empty: a temporary directory,
	// removed when Run returns.
	Root string
	// Toolbox is the native workload's argv, a server of Daytona's toolbox
	// paths on $PORT. Default: this executable's toolbox command
	// (`sandplane toolbox`); `sandplane sim` passes sandplane-toolbox where
	// it is installed (toolboxcmd.Workload).
	Toolbox []string
	// ToolboxServer is the path of sandplane-toolbox of this build, already
	// checked (toolboxcmd.Workload): the docker workloads' image, when
	// built, runs it, as the daemon's does, so that the two share one image.
	// Empty: the image runs this executable's toolbox command.
	ToolboxServer string
	// Isolation is the native workloads' (native.IsolationBwrap or
	// native.IsolationNone). Empty: bwrap where a probe at start shows
	// bubblewrap works, else none, which Run logs once; an explicit bwrap
	// that cannot work fails Run (preflight_failed).
	Isolation string
	// DockerImage is the docker workloads' image. When the engine lacks it,
	// it is built from this executable (docker.Driver.UseToolboxImage).
	// Required for WorkloadsDocker.
	DockerImage string
	// Out receives the start line: what to export to reach the simulator,
	// with a generated admin key, which is printed there once and never
	// logged. Nil: discarded.
	Out io.Writer
	// Ready, when set, is called with the address once the simulator
	// serves.
	Ready func(addr net.Addr)
}

// Run is the simulator as `sandplane sim` runs it: it checks the listen
// rules, binds the address (saying what holds it when it is taken), builds
// the backend, starts the simulator, prints where it is, and serves until
// ctx ends; then it shuts the server down within ten seconds and removes
// every workload and what the backend made. invalid_argument: settings that
// break a rule, each naming its flag; unavailable: the address is taken or
// no docker engine answers.
func Run(ctx context.Context, cfg RunConfig) error {
	loopback, err := cfg.check()
	if err != nil {
		return err
	}
	cfg.withRunDefaults(loopback)
	ln, err := listen(ctx, cfg.Clock, cfg.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	sshLn, err := cfg.listenSSH(ln.Addr())
	if err != nil {
		return err
	}
	if sshLn != nil {
		defer sshLn.Close()
	}
	if cfg.Backend == nil {
		be, release, err := cfg.newBackend(ctx)
		if err != nil {
			return err
		}
		defer release()
		cfg.Backend = be
	}
	generated := generatedKeys{admin: cfg.AdminKey == "", webhook: cfg.WebhookSecret == ""}
	sim, err := New(cfg.Config)
	if err != nil {
		_ = cfg.Backend.Close()
		return err
	}
	defer sim.Close()
	if sshLn != nil {
		go cfg.serveSSH(sim, sshLn)
	}
	return cfg.serve(ctx, ln, sim, generated)
}

// listenSSH binds the SSH gateway's address (SSHListen), or returns nil
// for SSHOff.
func (cfg RunConfig) listenSSH(api net.Addr) (net.Listener, error) {
	switch cfg.SSHListen {
	case SSHOff:
		return nil, nil
	case "":
		host, _, _ := net.SplitHostPort(api.String())
		if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(sshGatewayPort))); err == nil {
			return l, nil
		}
		// Another simulator has Daytona's port: sshCommand names this one.
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, provider.Errorf(provider.Unavailable, "listen for the SSH gateway on %s: %v", host, err)
		}
		return l, nil
	}
	loopback, err := netguard.ListenLoopback(cfg.SSHListen)
	switch {
	case err != nil:
		return nil, provider.Errorf(provider.InvalidArgument, "--ssh-listen %q: %v (or --ssh-listen off)", cfg.SSHListen, err)
	case !loopback && len(cfg.APIKeys) == 0:
		return nil, provider.Errorf(provider.InvalidArgument,
			"--ssh-listen %s is not a loopback address: off loopback the simulator needs --api-key, as --listen does", cfg.SSHListen)
	}
	l, err := net.Listen("tcp", cfg.SSHListen)
	if err != nil {
		return nil, provider.Errorf(provider.Unavailable, "--ssh-listen %s: %v: pick another address, or --ssh-listen off", cfg.SSHListen, err)
	}
	return l, nil
}

// serveSSH serves the gateway until the simulator closes it.
func (cfg RunConfig) serveSSH(sim *Simulator, ln net.Listener) {
	cfg.Logger.Info("SSH gateway serving", "addr", ln.Addr().String())
	if err := sim.ServeSSH(ln); err != nil {
		cfg.Logger.Error("SSH gateway stopped", "error", err)
	}
}

// check applies the rules that guard a simulator: any-key mode is for
// loopback only, no key is empty, the admin key is no API key. It reports
// whether the listen address is loopback.
func (cfg RunConfig) check() (loopback bool, err error) {
	listen := cfg.Listen
	if listen == "" {
		listen = DefaultListen
	}
	loopback, err = netguard.ListenLoopback(listen)
	if err != nil {
		return false, provider.Errorf(provider.InvalidArgument, "--listen %q: %v", listen, err)
	}
	switch {
	case slices.Contains(cfg.APIKeys, ""):
		return false, provider.Errorf(provider.InvalidArgument, "--api-key must not be empty")
	case !loopback && len(cfg.APIKeys) == 0:
		return false, provider.Errorf(provider.InvalidArgument,
			"--listen %s is not a loopback address, where any API key would be accepted: give the keys to accept with --api-key (each is its own organization), or listen on 127.0.0.1", listen)
	case cfg.AdminKey != "" && slices.Contains(cfg.APIKeys, cfg.AdminKey):
		return false, provider.Errorf(provider.InvalidArgument, "--admin-key must differ from every --api-key")
	}
	switch cfg.Workloads {
	case "", WorkloadsNative, WorkloadsDocker, WorkloadsNone:
	default:
		return false, provider.Errorf(provider.InvalidArgument, "unknown --backend %q (want native, docker or none)", cfg.Workloads)
	}
	switch cfg.Isolation {
	case "", native.IsolationBwrap, native.IsolationNone:
	default:
		return false, provider.Errorf(provider.InvalidArgument, "unknown --isolation %q (want bwrap or none)", cfg.Isolation)
	}
	if cfg.Backend == nil && cfg.Workloads == WorkloadsDocker && cfg.DockerImage == "" {
		return false, provider.Errorf(provider.InvalidArgument, "the docker backend needs an image: give one with --docker-image")
	}
	return loopback, nil
}

// withRunDefaults fills in what Run needs before it builds anything.
func (cfg *RunConfig) withRunDefaults(loopback bool) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Workloads == "" {
		cfg.Workloads = WorkloadsNative
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	cfg.AnyHost = cfg.AnyHost || !loopback
}

// listen binds addr and, when the port is taken, says by what.
func listen(ctx context.Context, clk clock.Clock, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, provider.Errorf(provider.Unavailable, "listen on %s: %v", addr, err)
	}
	if isSimulator(ctx, clk, addr) {
		return nil, provider.Errorf(provider.Unavailable,
			"a sandplane simulator already serves %s: use it (DAYTONA_API_URL=http://%s/api), stop it first, or pick another address with --listen", addr, addr)
	}
	return nil, provider.Errorf(provider.Unavailable,
		"%s is taken by something that is not a sandplane simulator: stop it or pick another address with --listen", addr)
}

// isSimulator reports whether a sandplane simulator answers on addr.
func isSimulator(ctx context.Context, clk clock.Clock, addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	// A wildcard address is reached on loopback, by a name the simulator's
	// Host guard accepts.
	if ip, err := netip.ParseAddr(host); host == "" || err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := clock.WithTimeout(ctx, clk, 2*time.Second)
	defer cancel()
	return Identify(ctx, &http.Client{Transport: &http.Transport{Proxy: nil}}, "http://"+net.JoinHostPort(host, port))
}

// newBackend builds the backend Workloads names. release frees what it
// made besides the backend (the runtime, the engine client, a temporary
// root) and runs once the simulator has closed the backend.
func (cfg RunConfig) newBackend(ctx context.Context) (be Backend, release func(), err error) {
	if cfg.Workloads == WorkloadsNone {
		return NoneBackend(), func() {}, nil
	}
	var releases []func()
	releaseAll := func() {
		for _, r := range slices.Backward(releases) {
			r()
		}
	}
	// Not release itself, which a failed return sets to nil.
	defer func() {
		if err != nil {
			releaseAll()
		}
	}()
	rb := RuntimeBackendConfig{Clock: cfg.Clock, Root: cfg.Root, Logger: cfg.Logger}
	if rb.Root == "" {
		dir, err := os.MkdirTemp("", "sandplane-sim-")
		if err != nil {
			return nil, nil, fmt.Errorf("create a state directory: %w", err)
		}
		rb.Root = dir
		releases = append(releases, func() { _ = os.RemoveAll(dir) })
	}
	if cfg.Workloads == WorkloadsDocker {
		closeDocker, err := cfg.dockerRuntime(ctx, &rb)
		if err != nil {
			return nil, nil, err
		}
		releases = append(releases, closeDocker)
	} else if err := cfg.nativeRuntime(ctx, &rb); err != nil {
		return nil, nil, err
	}
	be, err = NewRuntimeBackend(rb)
	if err != nil {
		return nil, nil, err
	}
	return be, releaseAll, nil
}

// nativeRuntime runs the workloads as processes of the toolbox, isolated
// as cfg.Isolation says (settleIsolation).
func (cfg RunConfig) nativeRuntime(ctx context.Context, rb *RuntimeBackendConfig) error {
	// Its sandboxes end with it, however it ends: a simulator keeps them
	// in memory only, and a later one would never find them again.
	// The toolbox waits for its sandbox (nsinit.AwaitSandbox), so a parked
	// init may start it ahead of the next create.
	nat := native.New(native.WithClock(cfg.Clock), native.WithParentDeath(), native.WithParkable(cfg.ToolboxServer), native.WithIsolation(cfg.Isolation))
	if err := cfg.settleIsolation(ctx, nat); err != nil {
		return err
	}
	rb.Runtime, rb.Command = nat, cfg.Toolbox
	if len(rb.Command) == 0 {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable for the workload: %w", err)
		}
		rb.Command = []string{self, "toolbox"}
	}
	return nil
}

// dockerRuntime runs the workloads as containers of DockerImage on the
// engine the environment names, with every capability of the docker
// backend. It returns what closes the driver and the client.
func (cfg RunConfig) dockerRuntime(ctx context.Context, rb *RuntimeBackendConfig) (func(), error) {
	// One client for the runtime and the backend's own engine calls; Ping
	// negotiates its API version before any concurrent use.
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, provider.Errorf(provider.Unavailable, "docker client from the environment: %v", err)
	}
	d, err := docker.New(docker.WithClock(cfg.Clock), docker.WithClient(cli))
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	if err := d.Ping(ctx); err != nil {
		_ = d.Close()
		_ = cli.Close()
		return nil, err
	}
	d.UseToolboxImage(cfg.DockerImage, cfg.ToolboxServer, cfg.Logger)
	rb.Runtime, rb.Image, rb.Docker = d, cfg.DockerImage, cli
	return func() { _ = d.Close(); _ = cli.Close() }, nil
}

// generatedKeys says which credentials the simulator made itself, to be
// printed once.
type generatedKeys struct{ admin, webhook bool }

// serve serves sim on ln until ctx ends, then shuts down within
// shutdownTimeout (internal/serve).
func (cfg RunConfig) serve(ctx context.Context, ln net.Listener, sim *Simulator, generated generatedKeys) error {
	addr := ln.Addr().String()
	cfg.Logger.Info("Daytona simulator serving", "api", "http://"+addr+"/api", "admin", "http://"+addr+"/_sim/info")
	export := "export DAYTONA_API_URL=http://" + addr + "/api"
	if len(cfg.APIKeys) == 0 {
		export += " DAYTONA_API_KEY=sim"
	}
	// Printed once, here, so that the one who started the simulator can
	// use its admin API and verify its webhooks; they are never logged. A
	// given one is the user's, who has it.
	if generated.admin {
		export += " " + EnvAdminKey + "=" + sim.AdminKey()
	}
	if generated.webhook {
		export += " " + EnvWebhookSecret + "=" + sim.webhooks.Secret()
	}
	fmt.Fprintln(cfg.Out, export)
	return serve.Serve(ctx, ln, sim.Handler(), serve.WithClock(cfg.Clock), serve.WithGrace(shutdownTimeout), serve.WithStarted(func() {
		if cfg.Ready != nil {
			cfg.Ready(ln.Addr())
		}
	}))
}
