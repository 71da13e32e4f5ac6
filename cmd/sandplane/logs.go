package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// followInterval is how often logs -f asks for more.
const followInterval = 500 * time.Millisecond

func newLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ID|NAME",
		Short: "Print a sandbox's entrypoint logs",
		Long: `Print what the sandbox's workload wrote: its stdout to stdout, its stderr to
stderr, with secret values redacted. -f keeps printing what it writes next
until the sandbox stops or is deleted, and then says which and why (on
stderr), or until Ctrl-C. --json prints the logs object ({stdout, stderr,
output}) once.`,
		Args: cobra.ExactArgs(1),
	}
	o := newClientOptions(cmd, true)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the sandbox stops")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.bind(cmd)
		if follow && o.json {
			return provider.Errorf(provider.InvalidArgument, "--follow and --json do not go together: poll with --json instead")
		}
		ctx := cmd.Context()
		p, err := o.open(ctx)
		if err != nil {
			return err
		}
		if !follow {
			logs, err := p.EntrypointLogs(ctx, args[0])
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(o.stdout, logs)
			}
			if _, err := io.WriteString(o.stdout, logs.Stdout); err != nil {
				return err
			}
			_, err = io.WriteString(o.stderr, logs.Stderr)
			return err
		}
		_, err = followLogs(ctx, p, o.clk, args[0], o.stdout, o.stderr, o.stderr, followInterval)
		if ctx.Err() != nil {
			return nil // Ctrl-C is how a person ends -f
		}
		return err
	}
	return cmd
}

// followLogs copies the sandbox's entrypoint output as it grows until the
// sandbox leaves the started state, says on notes why it ended, and returns
// the sandbox as it last saw it. The state is read before the logs, so the
// last logs read after the workload ended hold all it wrote. A deleted
// sandbox ends it with nil.
func followLogs(ctx context.Context, p provider.Provider, clk clock.Clock, id string, stdout, stderr, notes io.Writer, every time.Duration) (*provider.Sandbox, error) {
	var out, errOut growing
	seen := false
	for {
		s, err := p.Get(ctx, id)
		if provider.IsNotFound(err) && seen {
			fmt.Fprintf(notes, "sandplane: sandbox %s was deleted\n", id)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		seen = true
		logs, err := p.EntrypointLogs(ctx, s.ID)
		if err != nil && !provider.IsNotFound(err) {
			return s, err
		}
		if logs != nil {
			if err := out.copy(stdout, logs.Stdout); err != nil {
				return s, err
			}
			if err := errOut.copy(stderr, logs.Stderr); err != nil {
				return s, err
			}
		}
		if s.State != provider.StateStarted && s.State != provider.StateStarting {
			fmt.Fprintf(notes, "sandplane: sandbox %s is %s%s\n", id, s.State, reasonSuffix(s))
			return s, nil
		}
		if err := clock.Sleep(ctx, clk, every); err != nil {
			return s, err
		}
	}
}

// reasonSuffix says why a sandbox stopped, when it says: " (exited: code 0)".
func reasonSuffix(s *provider.Sandbox) string {
	if s.ErrorReason == "" {
		return ""
	}
	return " (" + s.ErrorReason + ")"
}

// growing remembers how much of a growing log was already written.
type growing struct{ n int }

func (g *growing) copy(w io.Writer, log string) error {
	if len(log) < g.n {
		g.n = len(log) // a different log: print only what comes next
		return nil
	}
	_, err := io.WriteString(w, log[g.n:])
	g.n = len(log)
	return err
}
