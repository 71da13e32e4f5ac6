package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	// Every client command takes --provider daytona:// too.
	_ "github.com/sandplane/sandplane/daytona"
	"github.com/sandplane/sandplane/internal/humanize"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// The client commands (run, ls, create, stop, start, rm, logs, watch, info)
// talk to any provider. Tables are for people; --json is for scripts; the
// exit code follows the error's class (see exitCode).

// clientOptions are the flags every client command shares.
type clientOptions struct {
	provider string
	json     bool
	clk      clock.Clock
	stdout   io.Writer
	stderr   io.Writer
	// events, when set, carries what a command run in a sandbox writes as
	// JSON lines (run --json, exec --json).
	events *jsonEvents
}

func newClientOptions(cmd *cobra.Command, withJSON bool) *clientOptions {
	o := &clientOptions{clk: clock.Real()}
	cmd.Flags().StringVar(&o.provider, "provider", "", "local:// (the daemon at $AGENT_CONTROL_PLANE_URL or 127.0.0.1:4025), local://HOST:PORT, daytona:// (default $"+provider.EnvProvider+" or local://)")
	if withJSON {
		cmd.Flags().BoolVar(&o.json, "json", false, "print JSON for scripts instead of text")
	}
	return o
}

// bind takes the command's output streams; call it first in RunE.
func (o *clientOptions) bind(cmd *cobra.Command) {
	o.stdout, o.stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
}

// streamJSON makes --json carry a command's output as JSON lines.
func (o *clientOptions) streamJSON() {
	if o.json {
		o.events = newJSONEvents(o.stdout)
	}
}

// outputs are where what a command in a sandbox writes goes: the terminal,
// or JSON lines.
func (o *clientOptions) outputs() (stdout, stderr io.Writer) {
	if o.events != nil {
		return o.events.stream("stdout"), o.events.stream("stderr")
	}
	return o.stdout, o.stderr
}

func (o *clientOptions) open(ctx context.Context) (provider.Provider, error) {
	return openProvider(ctx, o.provider)
}

// openProvider is provider.Open, with an unknown provider named in this
// command line's terms: the flag (or the variable) that chose it.
func openProvider(ctx context.Context, rawURL string) (provider.Provider, error) {
	given := rawURL
	if given == "" {
		given = os.Getenv(provider.EnvProvider)
	}
	if given != "" {
		withScheme := given
		if !strings.Contains(withScheme, "://") {
			withScheme += "://" // as provider.Open reads it
		}
		if u, err := url.Parse(withScheme); err == nil && !slices.Contains(provider.Schemes(), u.Scheme+"://") {
			return nil, provider.Errorf(provider.InvalidArgument, "unknown provider %q: --provider (or %s) must be one of %s",
				given, provider.EnvProvider, strings.Join(provider.Schemes(), ", "))
		}
	}
	return provider.Open(ctx, rawURL)
}

// dashboardURL is where a person sees the provider's sandboxes, when it has
// a dashboard this binary knows of.
func dashboardURL(p provider.Provider) string {
	if lp, ok := p.(*local.Provider); ok {
		return lp.URL() + "/"
	}
	return ""
}

// cliMessage is what the person at the terminal reads for err: the message
// without its code (scripts have the exit code), in this command line's
// terms rather than the HTTP API's.
func cliMessage(err error) string {
	msg := err.Error()
	if e, ok := err.(*provider.Error); ok {
		msg = e.Message
	}
	switch provider.Code(err) {
	case provider.NotFound:
		msg += " (sandplane ls lists the sandboxes)"
	case provider.Canceled, provider.DeadlineExceeded:
		// The request may have reached the server before the CLI gave up.
		msg += " (it may still have taken effect: sandplane ls shows what is there)"
	case provider.Unauthenticated:
		if strings.Contains(msg, "Authorization: Bearer") {
			// The daemon's own words are for API clients.
			msg = tokenRefused(os.Getenv(local.EnvToken) != "")
		}
	}
	return msg
}

// tokenRefused says what to do about a daemon that refused a request for
// its token, which the daemon takes from its --token-file (or
// SANDPLANE_TOKEN_FILE), else from SANDPLANE_TOKEN as it started.
func tokenRefused(sent bool) string {
	if sent {
		return "the daemon refused the token in " + local.EnvToken + ": set it to the daemon's token, which is in the daemon's --token-file (or " +
			config.EnvTokenFile + "), or was in " + local.EnvToken + " when the daemon started"
	}
	return "the daemon refused the request: set " + local.EnvToken + " to the token it was started with (its --token-file)"
}

// failedOf is the error of a command that acted on several sandboxes and
// failed for some: the first failure's code, so that the exit code is
// its, and a message without code prefixes.
func failedOf(failed, total int, first error) error {
	return &provider.Error{Code: provider.Code(first), Message: fmt.Sprintf("%d of %d failed: %s", failed, total, provider.Message(first)), Err: first}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseKeyValues reads repeated k=v flags.
func parseKeyValues(flag string, items []string) (map[string]string, error) {
	out := map[string]string{}
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" {
			return nil, provider.Errorf(provider.InvalidArgument, "--%s %q: want key=value", flag, it)
		}
		out[k] = v
	}
	return out, nil
}

// shortDuration formats d with no spaces, so that a table column stays one
// word: "250ms", "3m12s".
func shortDuration(d time.Duration) string { return humanize.Duration(d, "") }

// minuteOf is the length of the provider's interval minute: shrunk on a
// daemon started with --minute, a real minute everywhere else.
func minuteOf(ctx context.Context, p provider.Provider) time.Duration {
	info, err := p.Info(ctx)
	if err != nil || info.Minute == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(info.Minute)
	if err != nil || d <= 0 {
		return time.Minute
	}
	return d
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// isTerminal reports whether w is a terminal, where a redrawn progress line
// makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress redraws "what... 3s" on w while a long wait runs, when w is a
// terminal; the returned stop erases it. Scripts see nothing.
func progress(w io.Writer, clk clock.Clock, what string) (stop func()) {
	if !isTerminal(w) {
		return func() {}
	}
	start := clk.Now()
	tick := clk.NewTicker(100 * time.Millisecond)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		for i := 0; ; i++ {
			fmt.Fprintf(w, "\r\033[K%c %s... %s", frames[i%len(frames)], what, shortDuration(clk.Since(start).Truncate(time.Second)))
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-tick.C():
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			tick.Stop()
			close(done)
			wg.Wait()
		})
	}
}

// detached is a context for cleanup that must run even though ctx ended
// (an interrupted run still deletes its sandbox), bounded by d on clk.
func detached(ctx context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(context.WithoutCancel(ctx), clk, d)
}
