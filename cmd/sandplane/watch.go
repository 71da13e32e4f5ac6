package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
)

func newWatchCmd() *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print lifecycle events as they happen",
		Long: `Print the provider's lifecycle events until Ctrl-C: first every sandbox as it
is now, then each created, started, stopped, updated, activity and deleted
event. A dropped connection is resumed where it left off; a stream that
ends for good once watching (a provider that stops serving it) ends watch
with exit code 4. A stream refused from the start exits as any command
refused (1 for a refused token, 4 for no daemon). --json prints one event
object per line.`,
		Args: cobra.NoArgs,
	}
	o := newClientOptions(cmd, true)
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "only sandboxes with this label, key=value (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o.bind(cmd)
		want, err := parseKeyValues("label", labels)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		p, err := o.open(ctx)
		if err != nil {
			return err
		}
		w, ok := p.(provider.Watcher)
		if !ok {
			return provider.Errorf(provider.Unsupported, "provider %s has no event stream: poll with `sandplane ls --json` instead", p.Traits().Name)
		}
		events, err := w.Watch(ctx, provider.WatchOptions{Labels: want})
		if err != nil {
			return err
		}
		for ev := range events {
			if o.json {
				if err := writeJSONLine(o.stdout, ev); err != nil {
					return err
				}
				continue
			}
			if err := printEvent(o.stdout, ev); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil // Ctrl-C is how a person ends watch
		}
		// The provider gave up on the stream (the daemon refuses it for
		// good); a script must not take that for a clean end.
		return provider.Errorf(provider.Unavailable, "the event stream of provider %s ended: no more events will come", p.Traits().Name)
	}
	return cmd
}

func writeJSONLine(w io.Writer, v any) error {
	// printJSON indents; a stream wants one object per line.
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// printEvent writes one line per event, and one more per sandbox of a
// snapshot.
func printEvent(w io.Writer, ev provider.Event) error {
	ts := ev.Time.Local().Format("15:04:05.000")
	if ev.Type == provider.EventSandboxesReplaced {
		noun := "sandboxes"
		if len(ev.Sandboxes) == 1 {
			noun = "sandbox"
		}
		if _, err := fmt.Fprintf(w, "%s  %-18s %d %s\n", ts, "snapshot", len(ev.Sandboxes), noun); err != nil {
			return err
		}
		for _, s := range ev.Sandboxes {
			if _, err := fmt.Fprintf(w, "%s  %-18s %s\n", ts, "", sandboxSummary(s, "")); err != nil {
				return err
			}
		}
		return nil
	}
	if ev.Sandbox == nil {
		_, err := fmt.Fprintf(w, "%s  %s\n", ts, ev.Type)
		return err
	}
	_, err := fmt.Fprintf(w, "%s  %-18s %s\n", ts, strings.TrimPrefix(string(ev.Type), "sandbox."), sandboxSummary(*ev.Sandbox, ev.Source))
	return err
}

func sandboxSummary(s provider.Sandbox, source string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", s.Name)
	if s.Name != s.ID {
		fmt.Fprintf(&b, " (%s)", s.ID)
	}
	fmt.Fprintf(&b, " %s", s.State)
	if s.Port != 0 {
		fmt.Fprintf(&b, " port=%d", s.Port)
	}
	if s.ErrorReason != "" {
		fmt.Fprintf(&b, " reason=%q", s.ErrorReason)
	}
	if source != "" {
		fmt.Fprintf(&b, " source=%s", source)
	}
	if o := s.Labels["origin"]; o != "" {
		fmt.Fprintf(&b, " origin=%s", o)
	}
	return b.String()
}
