package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/toolbox/toolboxcmd"
)

func main() {
	// A native sandbox's init is this binary re-executed: it runs here and
	// exits, before anything else.
	nsinit.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sandplane:", cliMessage(err))
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sandplane",
		Short:         "Run, test and simulate agent sandboxes that behave like Daytona's",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		// Suggestions for a mistyped command ("lss": did you mean ls?).
		SuggestionsMinimumDistance: 2,
		// Without it cobra reports an unknown command as a plain error,
		// which would not exit with the usage code.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			hint := ""
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = " (did you mean " + strings.Join(s, " or ") + "?)"
			}
			return provider.Errorf(provider.InvalidArgument, "unknown command %q%s: see sandplane --help", args[0], hint)
		},
	}
	// A bad flag is a usage error, and scripts get its exit code (2).
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return provider.Errorf(provider.InvalidArgument, "%v (see %s --help)", err, cmd.CommandPath())
	})
	root.AddCommand(newServeCmd(), toolboxcmd.New(versionString()), newSimCmd(),
		newRunCmd(), newExecCmd(), newLsCmd(), newCreateCmd(), newStopCmd(), newStartCmd(), newRmCmd(),
		newLogsCmd(), newWatchCmd(), newInfoCmd(), newStatusCmd(), newRelayCmd(), newImageCmd(), newPoolCmd(), newVersionCmd())
	usageArgs(root)
	return root
}

// usageArgs makes every wrong count of arguments a usage error, exit code
// 2, as a bad flag is: cobra's own checks return plain errors.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				if provider.Code(err) != provider.Internal {
					return err // already coded
				}
				return provider.Errorf(provider.InvalidArgument, "%v (see %s --help)", err, c.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// exitCode gives scripts a stable meaning per error class.
func exitCode(err error) int {
	switch provider.Code(err) {
	case provider.NotFound:
		return 3
	case provider.Unavailable, provider.DeadlineExceeded:
		return 4
	case provider.Canceled:
		return interruptedCode // the CLI's context ends on Ctrl-C or SIGTERM
	case provider.InvalidArgument, provider.AlreadyExists, provider.FailedPrecondition, provider.PreflightFailed:
		return 2
	}
	return 1
}
