package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
)

// version is stamped by the Makefile (-ldflags "-X main.version=...").
var version = ""

func main() {
	// A native sandbox's init is this binary re-executed: it runs here and
	// exits, before anything else.
	nsinit.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		msg := err.Error()
		if e, ok := err.(*provider.Error); ok {
			msg = e.Message // the code is for scripts, and they have the exit code
		}
		fmt.Fprintln(os.Stderr, "sandplane:", msg)
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
	}
	// A bad flag is a usage error, and scripts get its exit code (2).
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return provider.Errorf(provider.InvalidArgument, "%v (see %s --help)", err, cmd.CommandPath())
	})
	root.AddCommand(newServeCmd(), newToolboxCmd(), newSimCmd(),
		newRunCmd(), newLsCmd(), newCreateCmd(), newStopCmd(), newStartCmd(), newRmCmd(), newLogsCmd(), newWatchCmd(), newInfoCmd(), newRelayCmd(), newImageCmd())
	return root
}

func versionString() string {
	if version != "" {
		return version
	}
	return toolboxVersion()
}

// exitCode gives scripts a stable meaning per error class.
func exitCode(err error) int {
	switch provider.Code(err) {
	case provider.NotFound:
		return 3
	case provider.Unavailable:
		return 4
	case provider.InvalidArgument, provider.AlreadyExists, provider.FailedPrecondition, provider.PreflightFailed:
		return 2
	}
	return 1
}
