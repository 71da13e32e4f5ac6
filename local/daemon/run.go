package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/internal/serve"
	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// shutdownTimeout bounds how long Run waits for requests in flight once ctx
// ends.
const shutdownTimeout = 10 * time.Second

// Config configures Run.
type Config struct {
	// Settings are the daemon's resolved settings (config.Load).
	Settings config.Config
	// Version is what GET /v1/info reports.
	Version string
	// ToolboxServer is the path of sandplane-toolbox of this build, already
	// checked (toolboxcmd.Workload), which the default snapshot's docker
	// image then runs. Empty: the image runs `sandplane toolbox`.
	ToolboxServer string
	// Logger receives the daemon's log. Nil: slog.Default().
	Logger *slog.Logger
	// Out receives the start banner: where the API and the dashboard are.
	// Nil: nothing is printed.
	Out io.Writer
	// Ready, when set, is called with the address once the daemon serves.
	Ready func(addr net.Addr)
}

// Run is the daemon, as `sandplane serve` runs it: it takes the root, starts
// the drivers (native always, docker when an engine answers), the manager
// and its event hub on the loopback listener it bound first, and serves
// until ctx ends. Sandboxes outlive it unless
// Settings.ReapOnExit; the next Run on the same root adopts them.
//
// Run removes the token variable from the process's environment, so that
// nothing it starts inherits it.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	set, log, clk := cfg.Settings, cfg.Logger, clock.Real()
	_ = os.Unsetenv(config.EnvToken)
	// Bound first, so that a serve that cannot have its port fails before
	// it makes --root. Until it serves, a client waits in the listen
	// backlog: the manager reads its registry and leaves what a restart
	// left to the background, so that wait is short.
	ln, err := Listen(ctx, set.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	unlock, err := lockRoot(set.Root)
	if err != nil {
		return err
	}
	defer unlock()

	drivers, nat, closeDrivers := startDrivers(clk, set, cfg.ToolboxServer, log)
	defer closeDrivers()
	if err := settleIsolation(ctx, nat, log); err != nil {
		return err
	}
	hub := NewHub(clk)
	previewAddr := NewPreviewAddr(set.Listen)
	m, err := manager.New(managerOptions(set, drivers, hub, previewAddr, clk, log))
	if err != nil {
		return err
	}
	defer m.Close()
	srv, err := New(Options{Manager: m, Hub: hub, Version: cfg.Version, Token: set.Token, Clock: clk, Logger: log,
		Containment: nat.Containment(), Isolation: nat.Isolation(), IsolationFallback: nat.IsolationFallback(), PreviewIdleKeepAlive: set.PreviewIdleKeepAlive,
		PreviewNotActivity: set.Activity == config.ActivityClientPush})
	if err != nil {
		return err
	}
	defer srv.Close()
	previewAddr.Set(ln.Addr().String())
	// Requests' contexts end first at shutdown, so that event streams end
	// instead of holding it for the whole grace period. Lifecycle
	// operations are detached from request contexts and finish regardless.
	if err := serve.Serve(ctx, ln, srv.Handler(), serve.WithClock(clk), serve.WithGrace(shutdownTimeout), serve.WithLogger(log),
		serve.WithCancelRequests(), serve.WithStarted(func() { banner(cfg, ln.Addr()) })); err != nil {
		return err
	}
	if !set.ReapOnExit {
		log.Info("sandboxes keep running: the next sandplane serve on this root adopts them (" + config.EnvReapOnExit + "=1 stops them at exit)")
		return nil
	}
	log.Info("stopping every sandbox (" + config.EnvReapOnExit + "=1); their reason is \"daemon shutdown\"")
	m.StopAll(context.Background())
	return nil
}

// lockRoot makes root and makes sure one daemon at a time owns it: two would
// each think the other's workloads are orphans.
func lockRoot(root string) (func(), error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create root %s: %w", root, err)
	}
	path := filepath.Join(root, "daemon.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another sandplane daemon already uses root %s: stop it, or give this one its own --root", root)
	}
	return func() { f.Close() }, nil
}

// startDrivers returns the drivers by runtime: native always, docker when
// its client can be made (the engine itself may come later). The default
// snapshot's image is built from this binary by the first docker create
// that needs it.
func startDrivers(clk clock.Clock, set config.Config, toolboxServer string, log *slog.Logger) (map[provider.Runtime]driver.Driver, *native.Driver, func()) {
	// The toolbox waits for its sandbox (nsinit.AwaitSandbox), so a parked
	// init may start it ahead of the next create.
	nat := native.New(native.WithClock(clk), native.WithIsolation(set.Isolation), native.WithParkable(toolboxServer))
	if err := nat.ContainmentFallback(); err != nil {
		log.Warn("native sandboxes are contained by process groups only: a process that calls setsid outlives its sandbox", "reason", err)
	}
	if err := nat.InitFallback(); err != nil {
		log.Warn("native sandboxes start more slowly: this binary is their init, as "+native.InitProgramName+" beside it was refused", "reason", err)
	}
	drivers := map[provider.Runtime]driver.Driver{provider.RuntimeNative: nat}
	d, err := docker.New(docker.WithClock(clk))
	if err != nil {
		log.Warn("docker runtime disabled", "err", err)
		return drivers, nat, func() {}
	}
	d.UseToolboxImage(set.DockerImage, toolboxServer, log)
	drivers[provider.RuntimeDocker] = d
	return drivers, nat, func() { _ = d.Close() }
}

// settleIsolation fixes the native runtime's default isolation before any
// sandbox starts (native.Driver.SettleIsolation) and says once when it
// fell back to none. An isolation: bwrap that cannot work is an error
// (preflight_failed) that names the fix.
func settleIsolation(ctx context.Context, nat *native.Driver, log *slog.Logger) error {
	if err := nat.SettleIsolation(ctx); err != nil {
		return fmt.Errorf("isolation: bwrap: %w", err)
	}
	if err := nat.IsolationFallback(); err != nil {
		log.Warn(UnisolatedWarning, "reason", provider.Message(err))
	}
	return nil
}

// UnisolatedWarning is the line the daemon logs at start when native
// sandboxes run without isolation that nobody opted out of.
const UnisolatedWarning = "native sandboxes run unisolated: each sees the host's files, /tmp and network, the daemon's root " +
	"and other sandboxes' files and env; fix what the reason names so that bubblewrap isolates them, " +
	"or set isolation: none in the config to run them so without this warning"

// managerOptions maps the settings onto the manager's options.
func managerOptions(set config.Config, drivers map[provider.Runtime]driver.Driver, hub *Hub, previews *PreviewAddr, clk clock.Clock, log *slog.Logger) manager.Options {
	autoStop := set.AutoStopMinutes
	return manager.Options{
		OnEvent:         hub.Publish,
		Root:            set.Root,
		Runtimes:        drivers,
		Snapshots:       snapshots(set),
		Clock:           clk,
		PortMin:         set.Ports.Min,
		PortMax:         set.Ports.Max,
		Minute:          set.Minute,
		AutoStopMinutes: &autoStop,
		ReapInterval:    set.ReapInterval,
		StopGrace:       set.StopGrace,
		PassEnv:         set.PassEnvValues(os.Getenv),
		BaseEnv:         config.BaseEnv(os.Getenv),
		PreviewURL:      previews.URL,
		PreviewLink:     previews.Link,
		Logger:          log,
	}
}

// snapshots are the configured snapshots as the manager takes them; the
// default one runs on docker as the toolbox image.
func snapshots(set config.Config) map[string]manager.Snapshot {
	out := map[string]manager.Snapshot{}
	for name, s := range set.Snapshots {
		out[name] = manager.Snapshot(s)
	}
	if def, ok := out[manager.DefaultSnapshot]; ok && def.Image == "" {
		def.Image = set.DockerImage
		out[manager.DefaultSnapshot] = def
	}
	return out
}

// banner tells the person who started the daemon where it is.
func banner(cfg Config, addr net.Addr) {
	url := "http://" + addr.String()
	dashboard := url + "/"
	if cfg.Settings.Token != "" {
		// Never the token itself: this output may well end up in a log.
		dashboard += " (open it once as /#token=<the token>)"
	}
	_, port, _ := net.SplitHostPort(addr.String())
	fmt.Fprintf(cfg.Out, "sandplane %s serving\n  API:       %s/v1\n  dashboard: %s\n  previews:  http://<port>-<id>.localhost:%s/ and %s%s/<port>-<id>/\n  root:      %s\n  minute:    %s\n",
		cfg.Version, url, dashboard, port, url, PreviewPath, cfg.Settings.Root, cfg.Settings.Minute)
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}
}
