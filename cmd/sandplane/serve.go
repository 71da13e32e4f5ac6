package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/local/daemon"
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

func newServeCmd() *cobra.Command {
	var (
		listen, root, configFile, tokenFile string
		minute                              time.Duration
		debug                               bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the local control plane on 127.0.0.1:4025",
		Long: `Run the local control plane: the /v1 API, the dashboard, and every local
sandbox's lifecycle. Sandboxes outlive the daemon; a restarted daemon adopts
them. Settings come from flags, then the environment (SANDPLANE_LISTEN,
SANDPLANE_ROOT, SANDPLANE_MINUTE, SANDPLANE_CONFIG, SANDPLANE_TOKEN_FILE,
SANDPLANE_TOKEN, AGENT_CONTROL_PLANE_AUTOSTOP_MINUTES,
AGENT_CONTROL_PLANE_REAP_INTERVAL_MS, AGENT_CONTROL_PLANE_REAP_ON_EXIT), then
the config file. A token belongs in a file of mode 0600 (--token-file): one
in SANDPLANE_TOKEN is dropped from the environment the daemon hands on, but
stays in the environment the daemon was started with.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// First, before any secret is read: no other process of this
			// user may read the daemon's memory or environment.
			if err := protectMemory(); err != nil {
				return fmt.Errorf("protect the daemon's memory from other processes: %w", err)
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find own executable for the default snapshot: %w", err)
			}
			cfg := config.Default([]string{self, "toolbox"})
			if configFile == "" {
				configFile = os.Getenv(config.EnvConfig)
			}
			if configFile != "" {
				if err := cfg.LoadFile(configFile); err != nil {
					return err
				}
			}
			if err := cfg.LoadEnv(os.Getenv); err != nil {
				return err
			}
			// Nothing the daemon starts (workloads, docker builds) inherits
			// the token.
			_ = os.Unsetenv(config.EnvToken)
			flags := cmd.Flags()
			if flags.Changed("listen") {
				cfg.Listen = listen
			}
			if flags.Changed("root") {
				cfg.Root = root
			}
			if flags.Changed("minute") {
				cfg.Minute = minute
			}
			if flags.Changed("token-file") {
				cfg.TokenFile = tokenFile
			}
			if err := cfg.ResolveToken(); err != nil {
				return provider.Errorf(provider.InvalidArgument, "%v", err)
			}
			if err := cfg.Validate(); err != nil {
				return provider.Errorf(provider.InvalidArgument, "%v", err)
			}
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return serve(cmd.Context(), cfg, log)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", config.DefaultListen, "loopback address to serve on ($SANDPLANE_LISTEN)")
	cmd.Flags().StringVar(&root, "root", config.DefaultRoot(), "state directory, one folder per sandbox ($SANDPLANE_ROOT)")
	cmd.Flags().DurationVar(&minute, "minute", time.Minute, "length of one interval minute; shrink it to test auto-stop quickly ($SANDPLANE_MINUTE)")
	cmd.Flags().StringVar(&configFile, "config", "", "YAML file with snapshots, pass-through env and ports ($SANDPLANE_CONFIG)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file (mode 0600) holding the bearer token every request must carry ($SANDPLANE_TOKEN_FILE)")
	cmd.Flags().BoolVar(&debug, "debug", false, "log every request (never bodies or env values)")
	return cmd
}

func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return fmt.Errorf("create root %s: %w", cfg.Root, err)
	}
	unlock, err := lockRoot(cfg.Root)
	if err != nil {
		return err
	}
	defer unlock()

	clk := clock.Real()
	nat := native.New(clk, native.WithIsolation(cfg.Isolation))
	if err := nat.ContainmentFallback(); err != nil {
		log.Warn("native sandboxes are contained by process groups only: a process that calls setsid outlives its sandbox", "reason", err)
	}
	runtimes := map[provider.Runtime]driver.Driver{provider.RuntimeNative: nat}
	if d, err := docker.New(clk); err != nil {
		log.Warn("docker runtime disabled", "err", err)
	} else {
		defer d.Close()
		runtimes[provider.RuntimeDocker] = d
		d.UseToolboxImage(cfg.DockerImage, log)
	}
	snapshots := map[string]manager.Snapshot{}
	for name, s := range cfg.Snapshots {
		snapshots[name] = manager.Snapshot(s)
	}
	if def, ok := snapshots[manager.DefaultSnapshot]; ok && def.Image == "" {
		def.Image = cfg.DockerImage
		snapshots[manager.DefaultSnapshot] = def
	}
	autoStop := cfg.AutoStopMinutes
	hub := daemon.NewHub(clk)
	m, err := manager.New(manager.Options{
		OnEvent:         hub.Publish,
		Root:            cfg.Root,
		Runtimes:        runtimes,
		Snapshots:       snapshots,
		Clock:           clk,
		PortMin:         cfg.Ports.Min,
		PortMax:         cfg.Ports.Max,
		Minute:          cfg.Minute,
		AutoStopMinutes: &autoStop,
		ReapInterval:    cfg.ReapInterval,
		StopGrace:       cfg.StopGrace,
		PassEnv:         cfg.PassEnvValues(os.Getenv),
		BaseEnv:         config.BaseEnv(os.Getenv),
		Logger:          log,
	})
	if err != nil {
		return err
	}
	defer m.Close()
	srv, err := daemon.New(daemon.Options{Manager: m, Hub: hub, Version: versionString(), Token: cfg.Token, Clock: clk, Logger: log,
		Containment: nat.Containment()})
	if err != nil {
		return err
	}
	// Bound only now that every request can be answered at once: the
	// manager has read its registry, and what a restart left runs in the
	// background. A client never waits in the listen backlog.
	ln, err := daemon.Listen(ctx, cfg.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	// Cancelled first at shutdown, so that event streams end instead of
	// holding Shutdown for its whole timeout. Lifecycle operations are
	// detached from request contexts and finish regardless.
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	dashboard := url + "/"
	if cfg.Token != "" {
		// Never the token itself: this output may well end up in a log.
		dashboard += " (open it once as /?token=<the token>)"
	}
	fmt.Fprintf(os.Stderr, "sandplane %s serving\n  API:       %s/v1\n  dashboard: %s\n  root:      %s\n  minute:    %s\n",
		versionString(), url, dashboard, cfg.Root, cfg.Minute)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down; sandboxes keep running unless " + config.EnvReapOnExit + "=1")
	cancelBase()
	shutdown, cancel := clock.WithTimeout(context.Background(), clk, 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	if cfg.ReapOnExit {
		m.StopAll(context.Background())
	}
	return nil
}

// lockRoot makes sure one daemon at a time owns a root: two would each
// think the other's workloads are orphans.
func lockRoot(root string) (func(), error) {
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
