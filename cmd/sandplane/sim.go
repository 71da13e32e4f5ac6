package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator"
)

func newSimCmd() *cobra.Command {
	var (
		listen, profile, backend, root, baseURL, image, adminKey, specPath string
		apiKeys, snapshots                                                 []string
		minute                                                             time.Duration
		seed                                                               uint64
		warmPool                                                           int
		noValidate, debug                                                  bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run a stateful Daytona API simulator on 127.0.0.1:4026",
		Long: `Run a stateful simulator of the Daytona API (v0.190.0). Point the official
SDKs at it with DAYTONA_API_URL=http://127.0.0.1:4026/api and any
DAYTONA_API_KEY (or one of --api-key). On an address that is not loopback
--api-key is required, and only those keys are accepted.

Sandboxes move through Daytona's states with the delays of --profile
(instant, or daytona's measured figures), auto-stop/archive/delete run every
10 s of --minute-scaled time, and each sandbox runs a real workload on
--backend (native processes by default, docker containers, or none for a pure
state machine). The toolbox is served under /toolbox, preview links under
/_preview/<port>-<id> (reaching only ports the sandbox itself listens on),
and the admin API (faults, call log, cost) under /_sim with its own key:
--admin-key, $SANDPLANE_SIM_ADMIN_KEY, or one generated and printed at start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loopback, err := checkSimListen(listen, apiKeys)
			if err != nil {
				return err
			}
			adminKey, generated, err := simAdminKey(adminKey, apiKeys)
			if err != nil {
				return err
			}
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			prof, err := simulator.ProfileByName(profile)
			if err != nil {
				return provider.Errorf(provider.InvalidArgument, "%v", err)
			}
			if minute <= 0 {
				return provider.Errorf(provider.InvalidArgument, "--minute must be positive")
			}
			clk := clock.Real()
			ln, err := listenSim(cmd.Context(), clk, listen)
			if err != nil {
				return err
			}
			defer ln.Close()
			be, cleanup, err := simBackend(cmd.Context(), backend, root, image, clk, log)
			if err != nil {
				return err
			}
			defer cleanup()
			var snaps []simulator.Snapshot
			for _, name := range snapshots {
				snaps = append(snaps, simulator.Snapshot{Name: name})
			}
			sim, err := simulator.New(simulator.Config{
				Clock:             clk,
				APIKeys:           apiKeys,
				AdminKey:          adminKey,
				AnyHost:           !loopback,
				Profile:           prof,
				Minute:            minute,
				Backend:           be,
				Seed:              seed,
				BaseURL:           baseURL,
				DisableValidation: noValidate,
				SpecPath:          specPath,
				Snapshots:         snaps,
				WarmPool:          warmPool,
				Logger:            log,
			})
			if err != nil {
				_ = be.Close()
				return err
			}
			defer sim.Close()
			hint := simHint{anyKey: len(apiKeys) == 0}
			if generated {
				hint.adminKey = adminKey
			}
			return serveSim(cmd.Context(), clk, ln, sim, hint, cmd.ErrOrStderr(), log)
		},
	}
	cmd.AddCommand(newSimAdminCmds()...)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:4026", "address to serve on; one that is not loopback needs --api-key")
	f.StringSliceVar(&apiKeys, "api-key", nil, "accepted API key, repeatable; on loopback any key is accepted when none is given")
	f.StringVar(&adminKey, "admin-key", "", "bearer key of the /_sim admin API ($"+envSimAdminKey+"; default: generated and printed at start)")
	f.StringVar(&profile, "profile", "instant", "transition delays: instant, or daytona (create 1.2-1.7 s, start 0.7-0.8 s, restore 33-66 s)")
	f.DurationVar(&minute, "minute", time.Minute, "length of one interval minute; the 10 s jobs and activity timings scale with it")
	f.StringVar(&backend, "backend", "native", "what runs each sandbox: native (processes), docker (containers) or none (state machine only)")
	f.Uint64Var(&seed, "seed", 0, "seed for ids, delay jitter and random faults (0 picks one)")
	f.StringVar(&root, "root", "", "state directory for workloads (default: a temporary directory removed on exit)")
	f.StringVar(&baseURL, "base-url", "", "public base URL for toolboxProxyUrl and preview links (default: from each request's Host)")
	f.StringSliceVar(&snapshots, "snapshot", nil, "extra snapshot name creates may use, repeatable; \"*\" accepts any")
	f.IntVar(&warmPool, "warm-pool", 0, "pre-started sandboxes that creates take over instantly, as Daytona's warm pool")
	f.StringVar(&image, "docker-image", config.Default(nil).DockerImage, "image of the docker backend's workload (built from this binary when missing)")
	f.StringVar(&specPath, "spec", "", "Daytona OpenAPI document to validate against (default: the v"+strings.TrimPrefix(simulator.SpecVersion(), "v")+" one built in)")
	f.BoolVar(&noValidate, "no-validate", false, "do not validate requests against the upstream OpenAPI document")
	f.BoolVar(&debug, "debug", false, "log more")
	return cmd
}

// simBackend builds the --backend; cleanup removes what it created.
func simBackend(ctx context.Context, name, root, image string, clk clock.Clock, log *slog.Logger) (simulator.Backend, func(), error) {
	if name == "none" {
		return simulator.NoneBackend(), func() {}, nil
	}
	cleanup := func() {}
	if root == "" {
		dir, err := os.MkdirTemp("", "sandplane-sim-")
		if err != nil {
			return nil, nil, fmt.Errorf("create a state directory: %w", err)
		}
		root, cleanup = dir, func() { _ = os.RemoveAll(dir) }
	}
	self, err := os.Executable()
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("find own executable for the workload: %w", err)
	}
	cfg := simulator.RuntimeBackendConfig{Clock: clk, Root: root}
	switch name {
	case "native":
		cfg.Runtime = native.New(clk)
		cfg.Command = []string{self, "toolbox"}
	case "docker":
		// One client for the runtime and for finding containers' addresses;
		// Ping negotiates its API version before any concurrent use.
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			cleanup()
			return nil, nil, provider.Errorf(provider.Unavailable, "docker client from the environment: %v", err)
		}
		d, err := docker.New(clk, docker.WithClient(cli))
		if err != nil {
			_ = cli.Close()
			cleanup()
			return nil, nil, err
		}
		if err := d.Ping(ctx); err != nil {
			_ = d.Close()
			_ = cli.Close()
			cleanup()
			return nil, nil, err
		}
		d.UseToolboxImage(image, log)
		cfg.Runtime, cfg.Image = d, image
		cfg.WorkloadAddr = containerAddr(cli)
		cfg.Docker = cli
		prev := cleanup
		cleanup = func() { _ = d.Close(); _ = cli.Close(); prev() }
	default:
		cleanup()
		return nil, nil, provider.Errorf(provider.InvalidArgument, "unknown --backend %q (want native, docker or none)", name)
	}
	be, err := simulator.NewRuntimeBackend(cfg)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return be, cleanup, nil
}

// envSimAdminKey holds the admin key, so that it need not show on a
// command line.
const envSimAdminKey = "SANDPLANE_SIM_ADMIN_KEY"

// checkSimListen refuses a listen address that is not loopback unless API
// keys restrict who may call: any-key mode is for loopback only.
func checkSimListen(listen string, apiKeys []string) (loopback bool, err error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, provider.Errorf(provider.InvalidArgument, "--listen %q: %v", listen, err)
	}
	ip, perr := netip.ParseAddr(host)
	loopback = host == "localhost" || perr == nil && ip.IsLoopback()
	if slices.Contains(apiKeys, "") {
		return false, provider.Errorf(provider.InvalidArgument, "--api-key must not be empty")
	}
	if !loopback && len(apiKeys) == 0 {
		return false, provider.Errorf(provider.InvalidArgument,
			"--listen %s is not a loopback address, where any API key would be accepted: give the keys to accept with --api-key (each is its own organization), or listen on 127.0.0.1", listen)
	}
	return loopback, nil
}

// simAdminKey is the --admin-key, else $SANDPLANE_SIM_ADMIN_KEY, else a
// new one: 32 random bytes, URL-safe.
func simAdminKey(flag string, apiKeys []string) (key string, generated bool, err error) {
	key = flag
	if key == "" {
		key = os.Getenv(envSimAdminKey)
	}
	if key != "" {
		if slices.Contains(apiKeys, key) {
			return "", false, provider.Errorf(provider.InvalidArgument, "--admin-key must differ from every --api-key")
		}
		return key, false, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", false, fmt.Errorf("make the admin key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), true, nil
}

// containerAddr is the docker backend's WorkloadAddr: the running
// container's IP on its network, which the host reaches directly on Linux.
func containerAddr(cli *client.Client) func(context.Context, driver.Handle) (netip.Addr, error) {
	return func(ctx context.Context, h driver.Handle) (netip.Addr, error) {
		c, err := cli.ContainerInspect(ctx, h.ContainerID)
		if err != nil {
			return netip.Addr{}, err
		}
		if c.State == nil || !c.State.Running || c.NetworkSettings == nil {
			return netip.Addr{}, errors.New("the container is not running")
		}
		for _, n := range c.NetworkSettings.Networks {
			if ip, err := netip.ParseAddr(n.IPAddress); err == nil {
				return ip, nil
			}
		}
		return netip.Addr{}, errors.New("the container has no IP address: is it on a network?")
	}
}

// listenSim binds addr and, when the port is taken, says by what.
func listenSim(ctx context.Context, clk clock.Clock, addr string) (net.Listener, error) {
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
	return simulator.Identify(ctx, &http.Client{Transport: &http.Transport{Proxy: nil}}, "http://"+net.JoinHostPort(host, port))
}

// simHint is what the start message tells the user to export.
type simHint struct {
	anyKey   bool
	adminKey string // only a generated one: a given key is the user's
}

func serveSim(ctx context.Context, clk clock.Clock, ln net.Listener, sim *simulator.Simulator, hint simHint, stderr io.Writer, log *slog.Logger) error {
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	addr := ln.Addr().String()
	log.Info("Daytona simulator serving", "api", "http://"+addr+"/api", "admin", "http://"+addr+"/_sim/info")
	export := "export DAYTONA_API_URL=http://" + addr + "/api"
	if hint.anyKey {
		export += " DAYTONA_API_KEY=sim"
	}
	if hint.adminKey != "" {
		// Printed once, here, so that the one who started the simulator
		// can use its admin API; it is never logged.
		export += " " + envSimAdminKey + "=" + hint.adminKey
	}
	fmt.Fprintln(stderr, export)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := detached(ctx, clk, 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close()
	}
	return nil
}
