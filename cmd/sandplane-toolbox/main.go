// Command sandplane-toolbox is the in-sandbox toolbox server alone: what
// `sandplane toolbox` runs, with the same flags, in a program that links
// nothing else. The daemon's default snapshot runs it when it sits beside
// the sandplane binary (make build installs it there), because every
// native create waits for its workload to listen: this program listens in
// a few milliseconds, where `sandplane toolbox` first initialises every
// package of the daemon, the simulator and their dependencies.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/internal/buildversion"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/toolbox/toolboxcmd"
)

// version is stamped by the Makefile, as sandplane's is.
var version = ""

func main() {
	// Started ahead by a parked init, it waits here for its sandbox, its
	// package initialisation done.
	nsinit.AwaitSandbox()
	cmd := toolboxcmd.New(buildversion.Of(version))
	cmd.Use = "sandplane-toolbox [--entrypoint -- COMMAND [ARG...]]"
	cmd.SilenceErrors = true
	// A bad flag is a usage error, and scripts get its exit code (2).
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return provider.Errorf(provider.InvalidArgument, "%v (see %s --help)", err, c.CommandPath())
	})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sandplane-toolbox:", provider.Message(err))
		if provider.Code(err) == provider.InvalidArgument {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
