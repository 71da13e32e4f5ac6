package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/provider"
)

func newInfoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Describe the provider: daemon version, root, runtimes, snapshots",
		Long: `Describe the provider: for the local daemon, what it says about itself (its
version, pid, root, interval minute, runtimes and snapshots) and the
dashboard's address. Exit code 4 means no daemon answers.`,
		Args: cobra.NoArgs,
	}
	o := newClientOptions(cmd, true)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o.bind(cmd)
		ctx := cmd.Context()
		p, err := o.open(ctx)
		if err != nil {
			return err
		}
		info, err := p.Info(ctx)
		if err != nil {
			return err
		}
		lp, isLocal := p.(*local.Provider)
		var withheld error
		if isLocal && info.PID == 0 {
			// A daemon tells a caller without its token only what
			// identifies it.
			withheld = provider.Errorf(provider.Unauthenticated, "%s; without it the daemon tells only its name and version", tokenRefused(os.Getenv(local.EnvToken) != ""))
		}
		if o.json {
			if err := printJSON(o.stdout, info); err != nil {
				return err
			}
			return withheld
		}
		tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "provider:\t%s\n", p.Traits().Name)
		fmt.Fprintf(tw, "name:\t%s\n", info.Name)
		fmt.Fprintf(tw, "version:\t%s (API %s)\n", info.Version, info.APIVersion)
		if info.Auth.State != "" {
			fmt.Fprintf(tw, "credentials:\t%s\n", info.Auth.State)
		}
		if isLocal {
			fmt.Fprintf(tw, "url:\t%s\n", lp.URL())
			fmt.Fprintf(tw, "dashboard:\t%s\n", dashboardURL(p))
		}
		if withheld != nil {
			if err := tw.Flush(); err != nil {
				return err
			}
			return withheld
		}
		if info.PID != 0 {
			fmt.Fprintf(tw, "pid:\t%d\n", info.PID)
		}
		if info.RootDir != "" {
			fmt.Fprintf(tw, "root:\t%s\n", info.RootDir)
		}
		if info.Minute != "" {
			fmt.Fprintf(tw, "minute:\t%s\n", info.Minute)
		}
		runtimes := make([]string, len(info.Runtimes))
		for i, r := range info.Runtimes {
			runtimes[i] = string(r)
		}
		fmt.Fprintf(tw, "runtimes:\t%s\n", strings.Join(runtimes, ", "))
		fmt.Fprintf(tw, "snapshots:\t%s\n", strings.Join(info.Snapshots, ", "))
		return tw.Flush()
	}
	return cmd
}
