package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/local/runtime/docker"
	"github.com/sandplane/sandplane/local/runtime/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator"
)

func newSimCmd() *cobra.Command {
	var (
		listen, profile, backend, root, baseURL, image string
		apiKeys, snapshots                             []string
		minute                                         time.Duration
		seed                                           uint64
		warmPool                                       int
		noValidate, debug                              bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run a stateful Daytona API simulator on 127.0.0.1:4026",
		Long: `Run a stateful simulator of the Daytona API (v0.190.0). Point the official
SDKs at it with DAYTONA_API_URL=http://127.0.0.1:4026/api and any
DAYTONA_API_KEY (or one of --api-key).

Sandboxes move through Daytona's states with the delays of --profile
(instant, or daytona's measured figures), auto-stop/archive/delete run every
10 s of --minute-scaled time, and each sandbox runs a real workload on
--backend (native processes by default, docker containers, or none for a pure
state machine). The toolbox is served under /toolbox, preview links under
/_preview/<port>-<id>, and the admin API (faults, call log, cost) under /_sim.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
				Profile:           prof,
				Minute:            minute,
				Backend:           be,
				Seed:              seed,
				BaseURL:           baseURL,
				DisableValidation: noValidate,
				Snapshots:         snaps,
				WarmPool:          warmPool,
				Logger:            log,
			})
			if err != nil {
				_ = be.Close()
				return err
			}
			defer sim.Close()
			return serveSim(cmd.Context(), clk, listen, sim, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:4026", "address to serve on")
	f.StringSliceVar(&apiKeys, "api-key", nil, "accepted API key, repeatable; any key is accepted when none is given")
	f.StringVar(&profile, "profile", "instant", "transition delays: instant, or daytona (create 1.2-1.7 s, start 0.7-0.8 s, restore 33-66 s)")
	f.DurationVar(&minute, "minute", time.Minute, "length of one interval minute; the 10 s jobs and activity timings scale with it")
	f.StringVar(&backend, "backend", "native", "what runs each sandbox: native (processes), docker (containers) or none (state machine only)")
	f.Uint64Var(&seed, "seed", 0, "seed for ids, delay jitter and random faults (0 picks one)")
	f.StringVar(&root, "root", "", "state directory for workloads (default: a temporary directory removed on exit)")
	f.StringVar(&baseURL, "base-url", "", "public base URL for toolboxProxyUrl and preview links (default: from each request's Host)")
	f.StringSliceVar(&snapshots, "snapshot", nil, "extra snapshot name creates may use, repeatable; \"*\" accepts any")
	f.IntVar(&warmPool, "warm-pool", 0, "pre-started sandboxes that creates take over instantly, as Daytona's warm pool")
	f.StringVar(&image, "docker-image", config.Default(nil).DockerImage, "image of the docker backend's workload (built from this binary when missing)")
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
		d, err := docker.New(clk)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		if err := d.Ping(ctx); err != nil {
			_ = d.Close()
			cleanup()
			return nil, nil, err
		}
		d.SetImageSource(image, func(ctx context.Context) error { return ensureToolboxImage(ctx, d, image, log) })
		cfg.Runtime, cfg.Image = d, image
		// Docker publishes only the workload's own port on the host.
		cfg.PortURL = func(string, int) (*url.URL, error) {
			return nil, errors.New("preview links reach only native sandboxes; run the simulator with --backend native")
		}
		prev := cleanup
		cleanup = func() { _ = d.Close(); prev() }
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

func serveSim(ctx context.Context, clk clock.Clock, listen string, sim *simulator.Simulator, log *slog.Logger) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return provider.Errorf(provider.Unavailable, "listen on %s: %v", listen, err)
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	addr := ln.Addr().String()
	log.Info("Daytona simulator serving", "api", "http://"+addr+"/api", "admin", "http://"+addr+"/_sim/info")
	fmt.Fprintf(os.Stderr, "export DAYTONA_API_URL=http://%s/api DAYTONA_API_KEY=sim\n", addr)
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
