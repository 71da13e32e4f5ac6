package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
)

func newStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Whether the provider is set up and takes its credentials",
		Long: `Check the provider as a host's health page would: one cheap call that needs
the credentials, then the settled answer of the evidence so far: configured
(the settings are there), authenticated (a call with them was answered) or
required (the backend refused them: log in or fix the key). A failure exits
with its code's exit code; --json prints the status object.`,
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
		sr, ok := p.(provider.StatusReporter)
		if !ok {
			return provider.Errorf(provider.Unsupported, "the %s provider cannot report its status", p.Traits().Name)
		}
		st := sr.Status(ctx)
		if o.json {
			if err := printJSON(o.stdout, st); err != nil {
				return err
			}
		} else if err := printStatus(o, st); err != nil {
			return err
		}
		if st.Code != "" {
			return provider.Errorf(st.Code, "%s", st.Message)
		}
		return nil
	}
	return cmd
}

// printStatus writes st for a person.
func printStatus(o *clientOptions, st provider.Status) error {
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "provider:\t%s\n", st.Provider)
	fmt.Fprintf(tw, "endpoint:\t%s\n", st.Endpoint)
	auth := string(st.Auth.State)
	if !st.Auth.Since.IsZero() {
		auth += fmt.Sprintf(" (%s ago)", shortDuration(o.clk.Now().Sub(st.Auth.Since).Truncate(time.Second)))
	}
	fmt.Fprintf(tw, "credentials:\t%s\n", auth)
	fmt.Fprintf(tw, "why:\t%s\n", st.Auth.Why)
	return tw.Flush()
}
