package relay

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Option tunes a Relay. Without any, New uses the defaults each option
// names.
type Option func(*options)

// options are what the Options set; the zero value is the defaults.
type options struct {
	Domain                 string
	PathPrefix             string
	Clock                  clock.Clock
	Logger                 *slog.Logger
	Transport              http.RoundTripper
	MaxConcurrentRefreshes int
	RefreshTimeout         time.Duration
	DaytonaTiming          bool
	InlineRefresh          bool
	IdleKeepAlive          time.Duration
	StripCookies           []string
	RevealMissing          bool
	CacheTTL               time.Duration
	ResolveTimeout         time.Duration
	WriteError             func(w http.ResponseWriter, r *http.Request, err error)
	CookieKey              []byte
	MetricsPath            string
	MetricsHandler         http.Handler
	Observer               Observer
}

// WithDomain sets the proxy domain of host routing, <port>-<id>.<domain>.
// Default "localhost", which browsers and curl resolve to loopback. "*"
// routes by the first label of any host, for a server whose own Host guard
// says which names it answers (the simulator's).
func WithDomain(domain string) Option { return func(o *options) { o.Domain = domain } }

// WithPathPrefix moves path routing on the relay's own host under prefix:
// <prefix>/<port>-<id>/... ("/preview" on the daemon, whose API has the
// rest of the paths). Default: at the root.
func WithPathPrefix(prefix string) Option { return func(o *options) { o.PathPrefix = prefix } }

// WithClock runs every timer on c. Default clock.Real().
func WithClock(c clock.Clock) Option { return func(o *options) { o.Clock = c } }

// WithLogger sends refresh failures (at most one line a minute per
// sandbox) and upstream errors at debug level to l. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.Logger = l } }

// WithTransport carries requests to the upstreams on rt. Default: a clone
// of http.DefaultTransport without environment proxies.
func WithTransport(rt http.RoundTripper) Option { return func(o *options) { o.Transport = rt } }

// WithMaxConcurrentRefreshes bounds RefreshActivity calls in flight; a
// refresh past the bound is skipped and the next request tries again.
// Default 16.
func WithMaxConcurrentRefreshes(n int) Option {
	return func(o *options) { o.MaxConcurrentRefreshes = n }
}

// WithRefreshTimeout bounds one RefreshActivity call. Default 10 s;
// negative: unbounded, for an in-process backend that never blocks.
func WithRefreshTimeout(d time.Duration) Option { return func(o *options) { o.RefreshTimeout = d } }

// WithDaytonaTiming, on, keeps Daytona's own timing for every sandbox: a
// refresh at most every 45 s and a heartbeat every 50 s (scaled with the
// interval minute), whatever its auto-stop interval. By default both widen
// to a third of the interval, which spares a remote backend calls; a
// backend in the same process (the daemon, the simulator) refreshes for
// the price of a write and keeps Daytona's.
func WithDaytonaTiming(on bool) Option { return func(o *options) { o.DaytonaTiming = on } }

// WithInlineRefresh, on, sends a request's refresh before the request is
// proxied, on its goroutine, rather than beside it: for an in-process
// backend whose refresh is a write, so that whatever the response lets a
// client do next already sees the sandbox refreshed. Heartbeats run on
// their timers' goroutines either way.
func WithInlineRefresh(on bool) Option { return func(o *options) { o.InlineRefresh = on } }

// WithIdleKeepAlive, when d is positive, is how long one open connection
// that moves no bytes keeps its sandbox alive: past it, its heartbeat
// stops refreshing (checked at each heartbeat), so a leaked WebSocket
// cannot keep a forgotten sandbox running forever. Traffic makes it count
// again. Default 0: an open connection counts for as long as it is open.
func WithIdleKeepAlive(d time.Duration) Option { return func(o *options) { o.IdleKeepAlive = d } }

// WithStripCookies names the cookies of the server the relay is mounted in
// (the daemon's token cookie) that a browser sends along with preview
// requests to its host: they never reach a sandbox. The relay's own cookie
// is always stripped.
func WithStripCookies(names ...string) Option {
	return func(o *options) { o.StripCookies = append(o.StripCookies, names...) }
}

// WithRevealMissing, on, answers not_found for a sandbox that does not
// exist before any credential is checked, as the Daytona simulator's proxy
// does. By default a missing sandbox is refused like a private one whose
// token the caller lacks, so that no one without a sandbox's token learns
// whether it exists.
func WithRevealMissing(on bool) Option { return func(o *options) { o.RevealMissing = on } }

// WithCacheTTL sets how long a resolution is reused. Default 30 s;
// negative: never, for an in-process resolver whose answer is a lookup, so
// that the next request sees a rotated token or a stopped sandbox.
func WithCacheTTL(d time.Duration) Option { return func(o *options) { o.CacheTTL = d } }

// WithResolveTimeout bounds one resolution. Default 10 s; negative:
// unbounded, for an in-process resolver that never blocks.
func WithResolveTimeout(d time.Duration) Option { return func(o *options) { o.ResolveTimeout = d } }

// WithWriteError answers the errors the relay itself gives (a bad token,
// an unknown or stopped sandbox, an upstream that does not answer) with f,
// in the backend's own shape: the simulator answers as Daytona's proxy
// does. err carries the provider code and message. Default: the project's
// JSON body {"error": {"code", "message"}}.
func WithWriteError(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(o *options) { o.WriteError = f }
}

// WithCookieKey signs access cookies with key. Default: random per relay,
// so cookies end with the process.
func WithCookieKey(key []byte) Option { return func(o *options) { o.CookieKey = key } }

// WithMetricsPath serves h, the host's metrics (relaymetrics has the
// relay's), at path on the relay's own host (not on a sandbox's). Default:
// not served.
func WithMetricsPath(path string, h http.Handler) Option {
	return func(o *options) { o.MetricsPath, o.MetricsHandler = path, h }
}

// WithObserver tells ob of the relay, for metrics: see Observer.
// relaymetrics.WithRegisterer is the one for Prometheus. Default: none.
func WithObserver(ob Observer) Option { return func(o *options) { o.Observer = ob } }

func (o options) withDefaults() (options, error) {
	if o.Domain == "" {
		o.Domain = "localhost"
	}
	o.Domain = strings.ToLower(strings.Trim(o.Domain, "."))
	o.StripCookies = append([]string{CookieName}, o.StripCookies...)
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.MaxIdleConnsPerHost = 64
		o.Transport = t
	}
	if o.MaxConcurrentRefreshes <= 0 {
		o.MaxConcurrentRefreshes = 16
	}
	if o.RefreshTimeout == 0 {
		o.RefreshTimeout = 10 * time.Second
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = 30 * time.Second
	}
	if o.ResolveTimeout == 0 {
		o.ResolveTimeout = 10 * time.Second
	}
	o.PathPrefix = strings.TrimSuffix(o.PathPrefix, "/")
	if o.PathPrefix != "" && !strings.HasPrefix(o.PathPrefix, "/") {
		return o, provider.Errorf(provider.InvalidArgument, "path prefix %q must start with /", o.PathPrefix)
	}
	if len(o.CookieKey) == 0 {
		o.CookieKey = make([]byte, 32)
		if _, err := rand.Read(o.CookieKey); err != nil {
			return o, provider.Errorf(provider.Internal, "make a cookie key: %v", err)
		}
	}
	if o.MetricsPath != "" && !strings.HasPrefix(o.MetricsPath, "/") {
		return o, provider.Errorf(provider.InvalidArgument, "metrics path %q must start with /", o.MetricsPath)
	}
	if o.MetricsPath != "" && o.MetricsHandler == nil {
		return o, provider.Errorf(provider.InvalidArgument, "metrics path %q has no handler", o.MetricsPath)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return o, nil
}
