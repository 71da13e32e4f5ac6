package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
)

func newLsCmd() *cobra.Command {
	var (
		labels  []string
		session string
		quiet   bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandboxes, oldest first",
		Long: `List sandboxes, oldest first, as the dashboard shows them. IDLE is the time
since the last activity against the auto-stop window ("45s/15m0s"); REASON
says why a sandbox last stopped ("stopped" by a person, "auto_stopped",
"exited: code 0"...). -q prints only the ids, one per line; --json prints the
API's sandbox objects as an array.`,
		Args: cobra.NoArgs,
	}
	o := newClientOptions(cmd, true)
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "only sandboxes with this label, key=value (repeatable; all must match)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the ids")
	cmd.Flags().StringVar(&session, "session", "", "only the sandboxes of this agent session")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o.bind(cmd)
		if quiet && o.json {
			return provider.Errorf(provider.InvalidArgument, "-q and --json do not go together: -q prints ids, --json whole sandboxes")
		}
		want, err := parseKeyValues("label", labels)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		p, err := o.open(ctx)
		if err != nil {
			return err
		}
		list, err := p.List(ctx, provider.ListOptions{Labels: want, SessionID: session})
		if err != nil {
			return err
		}
		if list == nil {
			list = []provider.Sandbox{}
		}
		switch {
		case o.json:
			return printJSON(o.stdout, list)
		case quiet:
			for _, s := range list {
				fmt.Fprintln(o.stdout, s.ID)
			}
			return nil
		}
		return printTable(o.stdout, list, o.clk.Now(), minuteOf(ctx, p))
	}
	return cmd
}

// printTable writes the sandboxes with the columns of the dashboard.
func printTable(w io.Writer, list []provider.Sandbox, now time.Time, minute time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tRUNTIME\tPORT\tAGE\tIDLE\tREASON\tORIGIN\tSESSION")
	for _, s := range list {
		port := "-"
		if s.Port != 0 {
			port = strconv.Itoa(s.Port)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			s.ID, s.Name, s.State, orDash(string(s.Runtime)), port,
			shortDuration(now.Sub(s.CreatedAt)), idleColumn(s, now, minute),
			orDash(s.ErrorReason), orDash(s.Labels["origin"]), orDash(deref(s.SessionID)))
	}
	return tw.Flush()
}

// idleColumn is the idle time against the auto-stop window, for a started
// sandbox; the window alone otherwise.
func idleColumn(s provider.Sandbox, now time.Time, minute time.Duration) string {
	window := "never"
	if s.AutoStopInterval > 0 {
		window = shortDuration(provider.IntervalDuration(s.AutoStopInterval, minute))
	}
	if s.State != provider.StateStarted {
		return "-/" + window
	}
	return shortDuration(now.Sub(s.LastActivityAt)) + "/" + window
}

// describe is the one line a person reads after a lifecycle command.
func describe(p provider.Provider, s *provider.Sandbox) string {
	line := fmt.Sprintf("Sandbox %s (%s) is %s", s.Name, s.ID, s.State)
	if s.Port != 0 {
		line += fmt.Sprintf(" on port %d", s.Port)
	}
	if s.ErrorReason != "" {
		line += " (" + s.ErrorReason + ")"
	}
	if s.PreviewURL != "" && s.State == provider.StateStarted {
		line += "\n  preview:   " + s.PreviewURL
	}
	if d := dashboardURL(p); d != "" {
		line += "\n  dashboard: " + d
	}
	return line
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
