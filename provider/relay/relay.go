package relay

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Relay is an http.Handler that proxies to sandboxes and keeps them alive
// while they are used. See the package documentation.
type Relay struct {
	opts      options
	clk       clock.Clock
	log       *slog.Logger
	cookieKey []byte
	decoy     string // the token of every sandbox that does not exist
	stats     *stats
	track     *tracker
	res       *resolver
	proxy     *httputil.ReverseProxy
	base      context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the invalidation loop
}

// New returns a relay in front of res. Close it to stop its heartbeats.
// invalid_argument: a bad option.
func New(res Resolver, opts ...Option) (*Relay, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	rl := &Relay{opts: o, clk: o.Clock, log: o.Logger, cookieKey: o.CookieKey, decoy: rand.Text(), stats: &stats{}}
	rl.track = newTracker(res.RefreshActivity, o.Clock, o.Logger, rl.stats, o)
	base, cancel := context.WithCancel(context.Background())
	rl.base, rl.cancel = base, cancel
	rl.res = &resolver{
		res: res, clk: o.Clock, ttl: o.CacheTTL, timeout: o.ResolveTimeout, base: base, daytona: o.DaytonaTiming,
		track: rl.track, entries: map[routeKey]*entry{}, lastSweep: o.Clock.Now(),
	}
	rl.proxy = &httputil.ReverseProxy{
		Rewrite:        rl.rewrite,
		Transport:      o.Transport,
		ModifyResponse: rl.modifyResponse,
		ErrorHandler:   rl.proxyError,
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	// Last of what can fail, so that nothing is left running when it does.
	if err := o.Observer.Attach(rl); err != nil {
		cancel()
		return nil, err
	}
	if inv, ok := res.(Invalidator); ok {
		rl.wg.Add(1)
		go rl.invalidate(inv)
	}
	return rl, nil
}

// invalidate forgets the resolutions the backend says went stale. When the
// stream cannot be had or ends, everything cached may have been missed: it
// is dropped, and the stream asked for again a cache lifetime later.
func (rl *Relay) invalidate(inv Invalidator) {
	defer rl.wg.Done()
	for {
		ch, err := inv.Stale(rl.base)
		if provider.Code(err) == provider.Unsupported {
			return
		}
		if err == nil {
			for id := range ch {
				rl.res.forgetSandbox(id)
				rl.retime(id)
			}
		}
		if rl.base.Err() != nil {
			return
		}
		rl.res.forgetSandbox("")
		rl.retime("")
		if clock.Sleep(rl.base, rl.clk, rl.opts.CacheTTL) != nil {
			return
		}
	}
}

// retime resolves again, in the background, the sandboxes (id, or every
// one for "") that have a connection open, so that their heartbeats follow
// what changed, such as a shorter auto-stop interval: an open stream never
// resolves again by itself, and its beat, set for the old interval, could
// come after the new one has stopped the sandbox. Only the invalidation
// loop calls it: its own count in wg keeps Close's Wait from passing before
// these are counted.
func (rl *Relay) retime(id string) {
	for sid, port := range rl.track.withConns(id) {
		rl.wg.Add(1)
		go func() {
			defer rl.wg.Done()
			_, _ = rl.res.resolve(rl.base, routeKey{id: sid, port: port})
		}()
	}
}

// Close stops every heartbeat and cancels the refreshes and resolutions
// under way. Requests still being proxied go on, without activity refreshes.
func (rl *Relay) Close() error {
	rl.cancel()
	rl.track.close()
	rl.wg.Wait()
	return nil
}

// Stats returns the counters.
func (rl *Relay) Stats() Stats { return rl.stats.snapshot() }

// reqState travels with a proxied request through the ReverseProxy hooks.
type reqState struct {
	in      *http.Request
	route   route
	entry   *entry
	conn    *conn // nil when the request asked for no activity refresh
	rest    string
	retried bool
}

type stateKey struct{}

// moveTo points rs at e, where its request is sent again: its connection,
// if it counts, counts toward e's sandbox from now on, bumped as a new
// request's would be, and no longer keeps the sandbox it left alive. No
// byte of the request has moved yet (a retry has no body, and the first
// try was refused).
func (rs *reqState) moveTo(e *entry, now time.Time) {
	if rs.conn != nil && e.sb != rs.entry.sb {
		rs.entry.sb.close(rs.conn)
		e.sb.touch(now)
		e.sb.open(rs.conn, now)
	}
	rs.entry = e
}

func stateOf(r *http.Request) *reqState {
	rs, _ := r.Context().Value(stateKey{}).(*reqState)
	return rs
}

func (rl *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, rest, ok := rl.route(r)
	if !ok {
		rl.serveOwn(w, r)
		return
	}
	rl.serve(w, r, rt, rest)
}

// Forward proxies r to port of the sandbox idOrName whatever r's Host and
// path say, the upstream seeing path (and r's query): for a handler that
// routes requests itself, such as a toolbox proxy under /toolbox/<id>/.
// The rest is as for a routed request: the token check, activity,
// streaming, errors.
func (rl *Relay) Forward(w http.ResponseWriter, r *http.Request, idOrName string, port int, path string) {
	if port < 1 || port > 65535 || !validID(idOrName) {
		rl.writeError(w, r, provider.Errorf(provider.NotFound, "no sandbox %.130q with a port %d", idOrName, port))
		return
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	fwd := r.WithContext(r.Context())
	u := *r.URL
	u.Path, u.RawPath = path, ""
	fwd.URL = &u
	rl.serve(w, fwd, route{port: port, id: idOrName}, "")
}

// serve proxies a request routed to rt; rest is what follows a path
// route's prefix.
func (rl *Relay) serve(w http.ResponseWriter, r *http.Request, rt route, rest string) {
	rl.stats.requests.Add(1)
	if rt.prefix != "" && rest == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// Relative links of the sandbox's pages resolve under its prefix.
		u := *r.URL
		u.Path, u.RawPath = rt.prefix+"/", ""
		http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
		return
	}
	e, err := rl.res.resolve(r.Context(), rt.key())
	if err != nil {
		rl.refuse(w, r, rt, err)
		return
	}
	if rl.authorize(w, r, rt, e) != allowed {
		return
	}
	rs := &reqState{route: rt, entry: e, rest: rest}
	if strings.EqualFold(r.Header.Get(SkipActivityHeader), "true") {
		rl.stats.skippedHeader.Add(1)
	} else {
		// The bump first, then the connection: a heartbeat armed after it
		// counts from it.
		now := rl.clk.Now()
		e.sb.touch(now)
		rs.conn = &conn{port: rt.port}
		e.sb.open(rs.conn, now)
		defer func() { rs.entry.sb.close(rs.conn) }() // the sandbox a retry moved it to
	}
	rs.in = r.WithContext(context.WithValue(r.Context(), stateKey{}, rs))
	rl.proxy.ServeHTTP(w, rs.in)
}

// route reads the sandbox from the Host, else from the first path segment
// of a request to the relay's own host.
func (rl *Relay) route(r *http.Request) (route, string, bool) {
	if rt, ok := parseHost(r.Host, rl.opts.Domain); ok {
		return rt, "", true
	}
	if !isOwnHost(r.Host, rl.opts.Domain) {
		return route{}, "", false
	}
	p, ok := strings.CutPrefix(r.URL.EscapedPath(), rl.opts.PathPrefix)
	if !ok {
		return route{}, "", false
	}
	rt, rest, ok := parsePath(p)
	rt.prefix = rl.opts.PathPrefix + rt.prefix
	return rt, rest, ok
}

// serveOwn answers what is not a sandbox's: the metrics, or a clear 404.
func (rl *Relay) serveOwn(w http.ResponseWriter, r *http.Request) {
	if _, sandboxHost := parseHost(r.Host, rl.opts.Domain); !sandboxHost && !isOwnHost(r.Host, rl.opts.Domain) {
		rl.writeError(w, r, provider.Errorf(provider.PermissionDenied,
			"host %q is not served here: address a sandbox as <port>-<id>.%s", hostname(r.Host), rl.opts.Domain))
		return
	}
	if rl.opts.MetricsPath != "" && r.URL.Path == rl.opts.MetricsPath {
		rl.opts.MetricsHandler.ServeHTTP(w, r)
		return
	}
	rl.writeError(w, r, provider.Errorf(provider.NotFound,
		"no sandbox at this address: use %s, or http://%s%s/<port>-<id>/", rl.hostURL(r, "<port>-<id>"), r.Host, rl.opts.PathPrefix))
}

// hostURL is the host route of label (<port>-<id>) on the port r came to:
// under Domain or, when any host is routed (Domain "*"), under the name r
// came to, or localhost (which browsers and curl take for loopback) when
// it came to an address.
func (rl *Relay) hostURL(r *http.Request, label string) string {
	domain := rl.opts.Domain
	if domain == "*" {
		domain = hostname(r.Host)
		if _, err := netip.ParseAddr(strings.Trim(domain, "[]")); err == nil || domain == "" {
			domain = "localhost"
		}
	}
	host := label + "." + domain
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		host = net.JoinHostPort(host, port)
	}
	return "http://" + host + "/"
}

func (rl *Relay) rewrite(pr *httputil.ProxyRequest) {
	rs := stateOf(pr.In)
	t := rs.entry.target
	if rs.route.prefix != "" {
		pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, rs.route.prefix)
		pr.Out.URL.RawPath = ""
		if pr.In.URL.RawPath != "" {
			pr.Out.URL.RawPath = rs.rest
		}
	}
	if _, rest, found := cutParam(pr.Out.URL.RawQuery, TokenParam); found {
		pr.Out.URL.RawQuery = rest
	}
	pr.SetURL(t.URL)
	pr.SetXForwarded()
	h := pr.Out.Header
	if o := h.Get("Origin"); o != "" && sameHost(o, pr.In.Host) {
		// The page is the sandbox's own, served here: to the upstream, whose
		// Host the request now carries, it is same-origin too.
		h.Set("Origin", t.URL.Scheme+"://"+t.URL.Host)
	}
	h.Del(TokenHeader)
	h.Del(SkipActivityHeader)
	stripCookies(h, rl.opts.StripCookies)
	for k, vs := range t.Header {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if rs.conn != nil && pr.Out.Body != nil && pr.Out.Body != http.NoBody {
		pr.Out.Body = &countingBody{ReadCloser: pr.Out.Body, c: rs.conn}
	}
}

// modifyResponse counts the bytes of the answer, and takes a 502 from the
// upstream for a sign that the sandbox moved or stopped.
func (rl *Relay) modifyResponse(resp *http.Response) error {
	rs := stateOf(resp.Request)
	if resp.StatusCode == http.StatusBadGateway {
		rl.res.forget(rs.route.key(), rs.entry)
		if _, err := rl.res.resolve(resp.Request.Context(), rs.route.key()); err != nil {
			return &resolveFailure{resolveError(rs.route, err)}
		}
	}
	if rs.conn != nil {
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			resp.Body = &countingConn{ReadWriteCloser: rwc, c: rs.conn} // a WebSocket or other upgrade
		} else {
			resp.Body = &countingBody{ReadCloser: resp.Body, c: rs.conn}
		}
	}
	return nil
}

type resolveFailure struct{ err error }

func (f *resolveFailure) Error() string { return f.err.Error() }

// proxyError answers a request the upstream did not: when the sandbox
// stopped, 503 at once; when it moved, the request goes to the new address
// once (if it has no body to replay); otherwise 502. The transport error is
// never shown: it holds the upstream URL, which may hold a signed token.
func (rl *Relay) proxyError(w http.ResponseWriter, out *http.Request, err error) {
	rs := stateOf(out)
	var rf *resolveFailure
	if errors.As(err, &rf) {
		rl.writeError(w, out, rf.err)
		return
	}
	if rs.in.Context().Err() != nil {
		return // the client left; nobody reads an answer
	}
	key := rs.route.key()
	rl.res.forget(key, rs.entry)
	e, rerr := rl.res.resolve(rs.in.Context(), key)
	if rerr != nil {
		rl.writeError(w, out, resolveError(rs.route, rerr))
		return
	}
	if !rs.retried && e != rs.entry && e.target.URL.String() != rs.entry.target.URL.String() &&
		errors.Is(err, syscall.ECONNREFUSED) && (rs.in.Body == nil || rs.in.Body == http.NoBody) {
		// The sandbox it moved to may hold another token (a start gives a
		// new one) or be another sandbox of that name: the caller must
		// prove access to it too.
		if rl.authorize(w, rs.in, rs.route, e) != allowed {
			return
		}
		rs.retried = true
		rs.moveTo(e, rl.clk.Now())
		rl.proxy.ServeHTTP(w, rs.in)
		return
	}
	rl.log.Debug("relay: upstream failed", "sandbox", e.target.ID, "port", rs.route.port, "cause", causeOf(err))
	rl.writeError(w, out, provider.Errorf(provider.Unavailable,
		"sandbox %s does not answer on port %d (%s): is its server listening there?", rs.route.id, rs.route.port, causeOf(err)))
}

// causeOf names a transport failure without its URL.
func causeOf(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed early"
	}
	return "upstream error"
}

// resolveError turns a resolution failure into what the client sees: a
// sandbox that is not started is a 503 at once, never a hang.
// refuse answers a request whose sandbox cannot be reached. Why is the
// business of whoever may use the sandbox: the caller first passes the
// check a reachable sandbox would make, against the token the resolver
// still knew, or, for a sandbox that does not exist, against a token nobody
// has, so that a stranger cannot tell a missing sandbox from a private one
// (WithRevealMissing aside) nor learn a private one's state.
func (rl *Relay) refuse(w http.ResponseWriter, r *http.Request, rt route, err error) {
	gate := &entry{target: Target{ID: rt.id, Token: rl.decoy}}
	var u *unreachable
	switch {
	case errors.As(err, &u):
		gate.target = Target{ID: u.id, Token: u.token}
	case provider.Code(err) != provider.NotFound || rl.opts.RevealMissing:
		rl.writeError(w, r, resolveError(rt, err))
		return
	}
	if rl.authorize(w, r, rt, gate) == allowed {
		rl.writeError(w, r, resolveError(rt, err))
	}
}

func resolveError(rt route, err error) error {
	switch provider.Code(err) {
	case provider.NotFound:
		return provider.Errorf(provider.NotFound, "no sandbox %s: check the id in the address", rt.id)
	case provider.InvalidArgument:
		return provider.Errorf(provider.InvalidArgument, "sandbox %s port %d: %s", rt.id, rt.port, provider.Message(err))
	case provider.FailedPrecondition:
		return provider.Errorf(provider.Unavailable, "%s: start it, then retry", provider.Message(err))
	case provider.Unavailable:
		return provider.Errorf(provider.Unavailable, "sandbox %s cannot be resolved now (%s): retry shortly", rt.id, provider.Message(err))
	}
	return provider.Errorf(provider.Internal, "sandbox %s cannot be resolved (%s)", rt.id, provider.Message(err))
}

// writeError answers err in the backend's shape (WithWriteError), or
// the project's.
func (rl *Relay) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if rl.opts.WriteError != nil {
		rl.opts.WriteError(w, r, err)
		return
	}
	writeError(w, err)
}

// writeError writes the project's error body with the code's status.
func writeError(w http.ResponseWriter, err error) {
	code := provider.Code(err)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(provider.HTTPStatus(code))
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // people read these in a browser: keep <port>-<id> legible
	_ = enc.Encode(map[string]any{
		"error": map[string]string{"code": string(code), "message": provider.Message(err)},
	})
}
