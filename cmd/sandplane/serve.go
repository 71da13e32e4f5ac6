package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/local/daemon"
	"github.com/sandplane/sandplane/toolbox/toolboxcmd"
)

func newServeCmd() *cobra.Command {
	var (
		listen, root, configFile, tokenFile, activity string
		minute                                        time.Duration
		debug                                         bool
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
stays in the environment the daemon was started with.

Ctrl-C or SIGTERM stops the daemon within ten seconds. Its sandboxes keep
running, and the next serve on the same root adopts them; with
AGENT_CONTROL_PLANE_REAP_ON_EXIT=1 it stops them first (sandplane rm --all
deletes them). GET /healthz answers while it runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// First, before any secret is read: no other process of this
			// user may read the daemon's memory or environment.
			if err := daemon.ProtectMemory(); err != nil {
				return fmt.Errorf("protect the daemon's memory from other processes: %w", err)
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find own executable for the default snapshot: %w", err)
			}
			flags := cmd.Flags()
			workload, why := toolboxcmd.Workload(self, versionString())
			if why != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "sandplane: warning: native sandboxes start more slowly: the default snapshot runs %s toolbox, as %s was refused: %v\n", self, toolboxcmd.ProgramName, why)
			}
			cfg, err := config.Load(workload, configFile, os.Getenv, func(c *config.Config) {
				if flags.Changed("listen") {
					c.Listen = listen
				}
				if flags.Changed("root") {
					c.Root = root
				}
				if flags.Changed("minute") {
					c.Minute = minute
				}
				if flags.Changed("token-file") {
					c.TokenFile = tokenFile
				}
				if flags.Changed("activity") {
					c.Activity = activity
				}
			})
			if err != nil {
				return err
			}
			// The daemon refuses it too, but only once it has taken its
			// root and adopted its sandboxes, and as a plain error.
			if err := checkLoopback(listenSetting(flags.Changed("listen"), cfg.Listen), cfg.Listen, "the daemon has no authentication strong enough for a network"); err != nil {
				return err
			}
			return daemon.Run(cmd.Context(), daemon.Config{Settings: cfg, Version: versionString(), ToolboxServer: toolboxServer(workload), Logger: newLogger(debug), Out: os.Stderr})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", config.DefaultListen, "loopback address to serve on ($SANDPLANE_LISTEN)")
	cmd.Flags().StringVar(&root, "root", config.DefaultRoot(), "state directory, one folder per sandbox ($SANDPLANE_ROOT)")
	cmd.Flags().DurationVar(&minute, "minute", time.Minute, "length of one interval minute; shrink it to test auto-stop quickly ($SANDPLANE_MINUTE)")
	cmd.Flags().StringVar(&configFile, "config", "", "YAML file with snapshots, pass-through env and ports ($SANDPLANE_CONFIG)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file (mode 0600) holding the bearer token every request must carry ($SANDPLANE_TOKEN_FILE)")
	cmd.Flags().BoolVar(&debug, "debug", false, "log every request (never bodies or env values)")
	cmd.Flags().StringVar(&activity, "activity", config.ActivityDaytona, "what keeps a sandbox alive: daytona (refresh, mutating calls and preview traffic, as on Daytona) or client-push (refresh and mutating calls only) ($SANDPLANE_ACTIVITY)")
	return cmd
}

// newLogger is the text log on stderr of the long-running commands.
func newLogger(debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// listenSetting names where the daemon's listen address came from: the
// flag, the environment, or the config file.
func listenSetting(flag bool, listen string) string {
	switch {
	case flag:
		return "--listen"
	case os.Getenv(config.EnvListen) == listen:
		return config.EnvListen
	}
	return "listen (in the config file)"
}

// toolboxServer is the sandplane-toolbox that workload runs, or "" when
// workload is this binary's own toolbox command: toolboxcmd.Workload
// returns one or the other.
func toolboxServer(workload []string) string {
	if len(workload) == 1 {
		return workload[0]
	}
	return ""
}
