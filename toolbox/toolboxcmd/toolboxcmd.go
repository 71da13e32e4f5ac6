package toolboxcmd

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/toolbox"
)

// tokenEnv is where the daemon (and the simulator's backend) hands a
// sandbox's workload its token.
const tokenEnv = "SANDPLANE_SANDBOX_TOKEN"

// entrypointEnv holds a shell command that the toolbox starts as the
// sandbox's entrypoint, for images that cannot pass arguments.
const entrypointEnv = toolbox.EntrypointEnv

// New is the toolbox command: `sandplane toolbox`, and the whole of
// `sandplane-toolbox`. version is what GET /api/info reports.
func New(version string) *cobra.Command {
	var listen, host, root, tokenFile string
	var allowHosts, rewrites []string
	var noToken, entrypoint bool
	cmd := &cobra.Command{
		Use:   "toolbox [--entrypoint -- COMMAND [ARG...]]",
		Short: "Serve the in-sandbox toolbox API (the Daytona toolbox subset the SDKs use)",
		Long: `Serve the in-sandbox toolbox API: process execution, sessions and files, as
Daytona's toolbox daemon answers them, plus GET /api/info.

It listens on --listen, or on $PORT of --host (127.0.0.1) when --listen is not
given; in a container, --host 0.0.0.0 lets the published port reach it. The
working directory is the current directory. SIGTERM or SIGINT shut it down
gracefully and it exits 0.

Every request must carry the sandbox's token in the X-Daytona-Preview-Token
header (or as "Authorization: Bearer <token>"), come with a loopback Host
(or one given with --allow-host) and no foreign Origin. The token is read from
$` + tokenEnv + `, which the daemon sets, or from --token-file (mode 0600);
it is removed from the environment of the commands the toolbox runs.
Without a token the toolbox refuses to start: --insecure-no-token starts it
anyway, with no token check, for use by hand only. Anything that can reach
the port can then run commands as you.

With --entrypoint, the arguments after -- are the sandbox's entrypoint (an
image's own ENTRYPOINT and CMD): the toolbox starts it at once as the only
command of the session "entrypoint", whose logs GET
/process/session/entrypoint/logs answers (follow=true over a WebSocket) and
whose stdin takes session input, as Daytona's daemon runs an image's
entrypoint. $` + entrypointEnv + `, a shell command line, does the same. The
entrypoint, and whatever it started, ends when the toolbox stops.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && !entrypoint {
				return fmt.Errorf("toolbox: unexpected arguments %q: pass --entrypoint -- COMMAND to run them as the sandbox's entrypoint", args)
			}
			return nil
		},
		SilenceUsage: true,
		// --version: how the daemon tells a sandplane-toolbox of another
		// build from its own (see Workload).
		Version: version,
		RunE: func(cmd *cobra.Command, args []string) error {
			token, err := toolboxToken(tokenFile, noToken)
			if err != nil {
				return err
			}
			entry, err := toolboxEntrypoint(entrypoint, args)
			if err != nil {
				return err
			}
			addr, err := toolboxListenAddr(listen, os.Getenv("PORT"))
			if err != nil {
				return err
			}
			if listen == "" {
				_, port, _ := net.SplitHostPort(addr)
				addr = net.JoinHostPort(host, port)
			}
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("toolbox: %w", err)
			}
			if token == "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "toolbox: WARNING: --insecure-no-token: anything that can reach "+addr+" can run commands as you")
			}
			var gitRewrites []toolbox.GitURLRewrite
			for _, s := range rewrites {
				rw, err := toolbox.ParseGitURLRewrite(s)
				if err != nil {
					return provider.Errorf(provider.InvalidArgument, "%v (see %s --help)", err, cmd.CommandPath())
				}
				gitRewrites = append(gitRewrites, rw)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return toolbox.Serve(ctx, addr, toolbox.Options{
				WorkDir:   wd,
				HomeAlias: os.Getenv(toolbox.HomeAliasEnv),
				Version:   version,
				SandboxID: sandboxID(),
				Root:      root,
				// Other sandboxes of the daemon keep their files there.
				Hidden:         []string{os.Getenv("SANDPLANE_ROOT")},
				Token:          token,
				AllowedHosts:   allowHosts,
				GitURLRewrites: gitRewrites,
				Entrypoint:     entry,
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default --host and $PORT)")
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "interface to listen on at $PORT when --listen is not given")
	cmd.MarkFlagsMutuallyExclusive("listen", "host")
	cmd.Flags().StringVar(&root, "root", "", "confine the file endpoints to this directory")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "read the sandbox token from this file (mode 0600) instead of $"+tokenEnv)
	cmd.Flags().StringSliceVar(&allowHosts, "allow-host", nil, "also accept requests whose Host is this name (repeatable), for a proxy that keeps the caller's Host")
	cmd.Flags().BoolVar(&noToken, "insecure-no-token", false, "start without a token and check none: for use by hand only, never for a sandbox others can reach")
	cmd.Flags().BoolVar(&entrypoint, "entrypoint", false, "run the arguments after -- as the sandbox's entrypoint session")
	cmd.Flags().StringArrayVar(&rewrites, "git-url-rewrite", nil, "FROM=TO: git fetches and pushes TO for URLs starting with FROM, like url.TO.insteadOf=FROM (repeatable)")
	return cmd
}

// toolboxToken reads the token from file, else from the environment, and
// takes it out of the environment either way so that the commands the
// toolbox runs do not inherit it. Without a token it fails unless noToken.
func toolboxToken(file string, noToken bool) (string, error) {
	token := strings.TrimSpace(os.Getenv(tokenEnv))
	if err := os.Unsetenv(tokenEnv); err != nil {
		return "", fmt.Errorf("toolbox: %w", err)
	}
	if file != "" {
		fi, err := os.Stat(file)
		if err != nil {
			return "", fmt.Errorf("toolbox: token file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("toolbox: token file %s is readable by others (mode %v): chmod 600 it", file, fi.Mode().Perm())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("toolbox: token file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return "", fmt.Errorf("toolbox: token file %s is empty", file)
		}
	}
	if token == "" && !noToken {
		return "", fmt.Errorf("toolbox: no token: set $%s or --token-file (the daemon sets it for its sandboxes); --insecure-no-token starts without one, for use by hand only", tokenEnv)
	}
	return token, nil
}

// toolboxEntrypoint is the entrypoint's command line: argv (after
// --entrypoint --) quoted, else $SANDPLANE_ENTRYPOINT, which it takes out
// of the environment so that commands do not inherit it.
func toolboxEntrypoint(flag bool, argv []string) (string, error) {
	env := os.Getenv(entrypointEnv)
	if err := os.Unsetenv(entrypointEnv); err != nil {
		return "", fmt.Errorf("toolbox: %w", err)
	}
	switch {
	case flag && len(argv) == 0:
		return "", errors.New("toolbox: --entrypoint needs the command after --: sandplane toolbox --entrypoint -- COMMAND [ARG...]")
	case flag && strings.TrimSpace(env) != "":
		return "", fmt.Errorf("toolbox: both --entrypoint and $%s are set: give the entrypoint once", entrypointEnv)
	case flag:
		return toolbox.ShellJoin(argv), nil
	}
	return strings.TrimSpace(env), nil
}

func toolboxListenAddr(listen, port string) (string, error) {
	if listen != "" {
		return listen, nil
	}
	if port == "" {
		return "", errors.New("toolbox: no --listen given and PORT is not set")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("toolbox: PORT %q is not a port number", port)
	}
	return net.JoinHostPort("127.0.0.1", port), nil
}

// sandboxID is the id the sandbox's user knows it by: Daytona's, which a
// simulator's sandbox carries as Daytona's do, else the runtime's marker
// (the simulator's workloads are named apart from its sandboxes, whose
// seeded ids repeat from run to run).
func sandboxID() string {
	return cmp.Or(os.Getenv("DAYTONA_SANDBOX_ID"), os.Getenv("SANDPLANE_SANDBOX_ID"))
}
