package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/simulator"
	"github.com/sandplane/sandplane/toolbox/toolboxcmd"
)

// envSimAdminKey holds the admin key, so that it need not show on a
// command line.
const envSimAdminKey = simulator.EnvAdminKey

// envSimAPIKeys holds the accepted API keys, comma-separated, so that they
// need not show on a command line, which every local user can read.
const envSimAPIKeys = "SANDPLANE_SIM_API_KEYS"

// simFlags are the flags of `sandplane sim`.
type simFlags struct {
	listen, sshListen, profile, backend, isolation, root, baseURL, image, adminKey, specPath, webhookSecret string
	webhooks                                                                                                []string
	apiKeys, snapshots                                                                                      []string
	minute, proxyIdleKeepAlive                                                                              time.Duration
	seed                                                                                                    uint64
	warmPool                                                                                                int
	noValidate, debug                                                                                       bool
}

func newSimCmd() *cobra.Command {
	var flags simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run a stateful Daytona API simulator on 127.0.0.1:4026",
		Long: `Run a stateful simulator of the Daytona API (v0.205.1). Point the official
SDKs at it with DAYTONA_API_URL=http://127.0.0.1:4026/api and any
DAYTONA_API_KEY (or one of --api-key). On an address that is not loopback
--api-key is required, and only those keys are accepted.

Sandboxes move through Daytona's states with the delays of --profile
(instant, or daytona's measured figures), auto-stop/archive/delete run every
10 s of --minute-scaled time, and each sandbox runs a real workload on
--backend (native processes by default, isolated with bubblewrap where it
works: see --isolation; docker containers; or none for a pure state machine). The toolbox is served under /toolbox, preview links under
/_preview/<port>-<id> (reaching only ports the sandbox itself listens on),
and the admin API (faults, call log, cost) under /_sim with its own key:
--admin-key, $SANDPLANE_SIM_ADMIN_KEY, or one generated and printed at start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.runConfig(os.Getenv)
			if err != nil {
				return err
			}
			cfg.Logger, cfg.Out = newLogger(flags.debug), cmd.ErrOrStderr()
			return simulator.Run(cmd.Context(), cfg)
		},
	}
	cmd.AddCommand(newSimAdminCmds()...)
	flags.bind(cmd)
	return cmd
}

// bind adds the flags of sim to cmd.
func (s *simFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.listen, "listen", simulator.DefaultListen, "address to serve on; one that is not loopback needs --api-key")
	f.StringVar(&s.sshListen, "ssh-listen", "", "address of the SSH gateway, where an SSH access token is the user name (default: --listen's host, port 22222, or a free one when taken; off: none)")
	f.StringSliceVar(&s.apiKeys, "api-key", nil, "accepted API key, repeatable ($"+envSimAPIKeys+", comma-separated); on loopback any key is accepted when none is given")
	f.StringSliceVar(&s.webhooks, "webhook", nil, "URL every organization's webhooks are delivered to, as Daytona's (Svix-signed), repeatable")
	f.StringVar(&s.webhookSecret, "webhook-secret", "", "whsec_ secret the webhooks are signed with ($"+simulator.EnvWebhookSecret+"; default: generated and printed at start)")
	f.StringVar(&s.adminKey, "admin-key", "", "bearer key of the /_sim admin API ($"+envSimAdminKey+"; default: generated and printed at start)")
	f.StringVar(&s.profile, "profile", "instant", "transition delays: instant, or daytona (create 1.2-1.7 s, start 0.7-0.8 s, restore 33-66 s)")
	f.DurationVar(&s.minute, "minute", time.Minute, "length of one interval minute; the 10 s jobs and activity timings scale with it")
	f.StringVar(&s.backend, "backend", simulator.WorkloadsNative, "what runs each sandbox: native (processes), docker (containers) or none (state machine only)")
	f.StringVar(&s.isolation, "isolation", "", "isolation of the native backend's sandboxes: bwrap (bubblewrap: a private home, /tmp and root view, and a network of their own) or none (the host's view); default: bwrap where it works, else none, said once at start")
	f.DurationVar(&s.proxyIdleKeepAlive, "proxy-idle-keep-alive", 0, "how long an open preview or toolbox connection that moves no bytes keeps its sandbox alive (0: while open, as Daytona)")
	f.Uint64Var(&s.seed, "seed", 0, "seed for ids, delay jitter and random faults (0 picks one)")
	f.StringVar(&s.root, "root", "", "state directory for workloads (default: a temporary directory removed on exit)")
	f.StringVar(&s.baseURL, "base-url", "", "public base URL for toolboxProxyUrl and preview links (default: from each request's Host)")
	f.StringSliceVar(&s.snapshots, "snapshot", nil, "extra snapshot name creates may use, repeatable; \"*\" accepts any")
	f.IntVar(&s.warmPool, "warm-pool", 0, "size of the default warm pool: started sandboxes of the default snapshot that matching creates take over at once (listed in GET /warm-pools)")
	f.StringVar(&s.image, "docker-image", config.Default(nil).DockerImage, "image of the docker backend's workload (built from this binary when missing)")
	f.StringVar(&s.specPath, "spec", "", "Daytona OpenAPI document to validate against (default: the v"+strings.TrimPrefix(simulator.SpecVersion(), "v")+" one built in)")
	f.BoolVar(&s.noValidate, "no-validate", false, "do not validate requests against the upstream OpenAPI document")
	f.BoolVar(&s.debug, "debug", false, "log more")
}

// runConfig maps the flags, and $SANDPLANE_SIM_ADMIN_KEY read with getenv,
// onto the simulator's settings. invalid_argument: a flag out of range.
func (s *simFlags) runConfig(getenv func(string) string) (simulator.RunConfig, error) {
	prof, err := simulator.ProfileByName(s.profile)
	if err != nil {
		return simulator.RunConfig{}, provider.Errorf(provider.InvalidArgument, "%v", err)
	}
	if s.minute <= 0 {
		return simulator.RunConfig{}, provider.Errorf(provider.InvalidArgument, "--minute must be positive")
	}
	if s.warmPool < 0 {
		return simulator.RunConfig{}, provider.Errorf(provider.InvalidArgument, "--warm-pool must be 0 (no warm pool) or the number of sandboxes to keep warm")
	}
	if s.proxyIdleKeepAlive < 0 {
		return simulator.RunConfig{}, provider.Errorf(provider.InvalidArgument, "--proxy-idle-keep-alive must be 0 (open connections count while open) or positive")
	}
	adminKey := s.adminKey
	if adminKey == "" {
		adminKey = getenv(envSimAdminKey)
	}
	apiKeys := s.apiKeys
	if len(apiKeys) == 0 && getenv(envSimAPIKeys) != "" {
		apiKeys = strings.Split(getenv(envSimAPIKeys), ",")
	}
	webhookSecret := s.webhookSecret
	if webhookSecret == "" {
		webhookSecret = getenv(simulator.EnvWebhookSecret)
	}
	var snaps []simulator.Snapshot
	for _, name := range s.snapshots {
		snaps = append(snaps, simulator.Snapshot{Name: name})
	}
	toolbox := simToolbox()
	return simulator.RunConfig{
		Config: simulator.Config{
			APIKeys:            apiKeys,
			AdminKey:           adminKey,
			Profile:            prof,
			Minute:             s.minute,
			Seed:               s.seed,
			BaseURL:            s.baseURL,
			DisableValidation:  s.noValidate,
			SpecPath:           s.specPath,
			Snapshots:          snaps,
			WarmPool:           s.warmPool,
			ProxyIdleKeepAlive: s.proxyIdleKeepAlive,
			Webhooks:           s.webhooks,
			WebhookSecret:      webhookSecret,
		},
		Listen:        s.listen,
		SSHListen:     s.sshListen,
		Workloads:     s.backend,
		Isolation:     s.isolation,
		Root:          s.root,
		Toolbox:       toolbox,
		ToolboxServer: toolboxServer(toolbox),
		DockerImage:   s.image,
	}, nil
}

// simToolbox is the native sandboxes' workload: the daemon's default one,
// sandplane-toolbox where it is installed beside this binary. Nil leaves
// the simulator's default, this binary's toolbox command.
func simToolbox() []string {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	command, why := toolboxcmd.Workload(self, versionString())
	if why != nil {
		fmt.Fprintf(os.Stderr, "sandplane: warning: sandboxes start more slowly: they run %s toolbox, as %s was refused: %v\n", self, toolboxcmd.ProgramName, why)
	}
	if len(command) != 1 {
		return nil // this binary's toolbox command: the simulator's own default
	}
	return command
}
