package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	_ "github.com/sandplane/sandplane/daytona" // --provider daytona://
	"github.com/sandplane/sandplane/internal/netguard"
	"github.com/sandplane/sandplane/internal/serve"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/relay"
	"github.com/sandplane/sandplane/provider/relay/relaymetrics"
)

// DefaultRelayListen is where `sandplane relay` listens by default.
const DefaultRelayListen = "127.0.0.1:4030"

type relayFlags struct {
	provider, listen, domain string
	idleKeepAlive            time.Duration
	maxRefreshes             int
	debug                    bool
}

func newRelayCmd() *cobra.Command {
	var f relayFlags
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Proxy preview traffic to sandboxes and keep them alive while it flows",
		Long: `Proxy HTTP, SSE and WebSocket traffic to the sandboxes of any provider, and
refresh their activity the way Daytona's proxy does: once per request
(debounced per sandbox), and on a heartbeat while a response or WebSocket
stays open, so a long generation keeps its sandbox started and a closed tab
lets it auto-stop on schedule.

Address a sandbox's port by host or by path:

  http://<port>-<id>.localhost:4030/...   (*.localhost is loopback)
  http://127.0.0.1:4030/<port>-<id>/...

A private sandbox needs its preview token in X-Daytona-Preview-Token, or once
as ?DAYTONA_SANDBOX_AUTH_KEY=<token> (a browser then gets a cookie).
X-Daytona-Skip-Last-Activity-Update: true skips the refresh for a request.
Prometheus metrics are at /metrics on the relay's own address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if f.debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return runRelay(cmd.Context(), f, cmd.ErrOrStderr(), log)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.provider, "provider", "", "local:// (the daemon at $AGENT_CONTROL_PLANE_URL or 127.0.0.1:4025), local://HOST:PORT, daytona:// (default $"+provider.EnvProvider+" or local://)")
	fl.StringVar(&f.listen, "listen", DefaultRelayListen, "loopback address to serve on")
	fl.StringVar(&f.domain, "domain", "localhost", "proxy domain of host routing: <port>-<id>.<domain>")
	fl.DurationVar(&f.idleKeepAlive, "idle-keepalive", 0, "stop counting an open connection as activity once it has moved no bytes for this long (0: never)")
	fl.IntVar(&f.maxRefreshes, "max-refreshes", 16, "activity refreshes in flight at once; more are skipped and retried by the next request")
	fl.BoolVar(&f.debug, "debug", false, "log upstream failures")
	return cmd
}

func runRelay(ctx context.Context, f relayFlags, out io.Writer, log *slog.Logger) error {
	if f.idleKeepAlive < 0 || f.maxRefreshes < 1 {
		return provider.Errorf(provider.InvalidArgument, "--idle-keepalive must be 0 or more and --max-refreshes 1 or more")
	}
	if strings.Trim(f.domain, ".") == "" || strings.ContainsAny(f.domain, " /:") {
		return provider.Errorf(provider.InvalidArgument, "--domain %q is not a domain: give the one sandboxes are addressed under, such as localhost (the default)", f.domain)
	}
	p, err := openProvider(ctx, f.provider)
	if err != nil {
		return err
	}
	ln, err := listenLoopback(f.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	clk := clock.Real()
	reg := prometheus.NewRegistry() // the relay's series only, as its /metrics has always served
	rl, err := relay.New(relay.FromProvider(p),
		relay.WithDomain(f.domain), relay.WithClock(clk), relay.WithLogger(log), relay.WithIdleKeepAlive(f.idleKeepAlive),
		relay.WithMaxConcurrentRefreshes(f.maxRefreshes), relaymetrics.WithRegisterer(reg),
		relay.WithMetricsPath("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	if err != nil {
		return err
	}
	defer rl.Close()
	if _, err := p.Info(ctx); err != nil {
		log.Warn("the provider does not answer yet; requests get 503 until it does", "provider", p.Traits().Name, "err", provider.Message(err))
	}

	_, port, _ := net.SplitHostPort(ln.Addr().String())
	fmt.Fprintf(out, "sandplane relay in front of %s\n  by host: http://<port>-<id>.%s:%s/\n  by path: http://%s/<port>-<id>/\n  metrics: http://%s/metrics\n",
		p.Traits().Name, f.domain, port, ln.Addr(), ln.Addr())
	// The banner comes first: a client that reached the relay can rely on it.
	// Open streams and WebSockets end when the grace period does.
	return serve.Serve(ctx, ln, rl, serve.WithClock(clk))
}

// listenLoopback binds a loopback address only: the relay forwards whoever
// reaches it to public sandboxes, so a network must not.
func listenLoopback(addr string) (net.Listener, error) {
	if err := checkLoopback("--listen", addr, "the relay forwards anyone who reaches it"); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, provider.Errorf(provider.Unavailable, "listen on %s: %v: pick another address with --listen", addr, err)
	}
	return ln, nil
}

// checkLoopback refuses, as a usage error, a listen address that is not
// loopback (netguard.ListenLoopback, as the daemon's own listener requires
// in daemon.Listen). setting names where addr came from; why, what a
// network could do.
func checkLoopback(setting, addr, why string) error {
	loopback, err := netguard.ListenLoopback(addr)
	if err != nil {
		return provider.Errorf(provider.InvalidArgument, "%s %q: %v", setting, addr, err)
	}
	if !loopback {
		return provider.Errorf(provider.InvalidArgument, "%s %q is not loopback: %s; use 127.0.0.1", setting, addr, why)
	}
	return nil
}
