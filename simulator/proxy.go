package simulator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/relay"
	"github.com/sandplane/sandplane/provider/relay/relaymetrics"
)

// proxyAPI serves the toolbox and preview traffic of the proxies: it finds
// the sandbox a request names, applies its faults, and forwards.
type proxyAPI struct{ *Simulator }

const previewTokenHeader = "X-Daytona-Preview-Token"

// The simulator is its own proxy, as Daytona's proxy stands in front of its
// sandboxes: previews by host (<port>-<id>.<domain>) and by path
// (/_preview/<port>-<id>/), and the toolbox under /toolbox/<id>/. Both run
// on provider/relay, the code the local daemon serves its previews with, so
// that proxied traffic counts as activity as on Daytona: a bump per request,
// deduplicated for 45 s, and every 50 s while a request or WebSocket stays
// open, unless X-Daytona-Skip-Last-Activity-Update says otherwise. The
// relays resolve sandboxes in the simulator's own store; their transport
// re-checks every request against the backend, so a request reaches only a
// port a process of its sandbox listens on.

// toolboxPort names the toolbox in the toolbox relay's routes; the backend
// says where the toolbox really is.
const toolboxPort = 2280

// Kinds of upstream, in the relays' virtual target hosts:
// <id>.<kind>.invalid:<port>, which the transport turns into the backend's
// route for that sandbox and port.
const (
	kindPreview = "preview"
	kindToolbox = "toolbox"
)

// proxies are the simulator's relays.
type proxies struct {
	preview *relay.Relay
	toolbox *relay.Relay
}

func (p *proxies) close() {
	_ = p.preview.Close()
	_ = p.toolbox.Close()
}

// newProxies makes the relays. Their options are the simulator's own, so
// an error is a bug.
func (s *Simulator) newProxies() *proxies {
	mk := func(kind string, own ...relay.Option) *relay.Relay {
		o := []relay.Option{
			relay.WithClock(s.clk), relay.WithLogger(s.cfg.Logger),
			relay.WithTransport(&proxyTransport{s: s, kind: kind}),
			relay.WithWriteError(proxyAPI{s}.writeProxyError),
			relay.WithIdleKeepAlive(s.cfg.ProxyIdleKeepAlive),
			// In process: the store answers at once and a bump is a write, so
			// no cache, no timers per request, Daytona's own timing, and the
			// bump is done before the request goes on.
			relay.WithDaytonaTiming(true), relay.WithInlineRefresh(true),
			relay.WithCacheTTL(-1), relay.WithResolveTimeout(-1), relay.WithRefreshTimeout(-1),
			// A missing sandbox is Daytona's 404 (its ids are random; a
			// stopped one resolves, and the transport answers after the token
			// check).
			relay.WithRevealMissing(true),
			relaymetrics.WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"proxy": kind}, s.metrics.reg)),
		}
		rl, err := relay.New(storeResolver{s: s, kind: kind}, append(o, own...)...)
		if err != nil {
			panic(fmt.Sprintf("simulator: the %s proxy: %v", kind, err))
		}
		return rl
	}
	return &proxies{
		preview: mk(kindPreview, relay.WithDomain("*"), relay.WithPathPrefix("/_preview")),
		toolbox: mk(kindToolbox),
	}
}

// storeResolver resolves sandboxes in the simulator's store.
type storeResolver struct {
	s    *Simulator
	kind string
}

// Resolve finds label's sandbox: a sandbox id, or for previews the token
// of a signed preview URL, which opens one port of it without the preview
// token. not_found.
func (r storeResolver) Resolve(_ context.Context, label string, port int) (relay.Target, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, token := s.rows.Get(label), ""
	switch {
	case r.kind == kindToolbox:
		// The API key was checked before; the backend adds the secret.
	case sb != nil:
		if !sb.Public {
			token = sb.AuthToken
		}
	default:
		sb = proxyAPI{s}.signedSandboxLocked(label, port)
	}
	if sb == nil || sb.gone {
		return relay.Target{}, provider.Errorf(provider.NotFound, "preview URL not found or expired")
	}
	// A sandbox that is not started resolves too: the transport answers
	// for it as Daytona's proxy does (400), after the token check.
	return relay.Target{
		ID:       sb.ID,
		URL:      &url.URL{Scheme: "http", Host: net.JoinHostPort(sb.ID+"."+r.kind+".invalid", strconv.Itoa(port))},
		Token:    token,
		AutoStop: provider.IntervalDuration(sb.AutoStop, s.cfg.Minute),
		Minute:   s.cfg.Minute,
	}, nil
}

// signedSandboxLocked is the sandbox a signed preview token opens port of,
// if it has not expired; an expired one is forgotten. Called with s.mu held.
func (s proxyAPI) signedSandboxLocked(token string, port int) *sandbox {
	t := s.signed[token]
	if t == nil {
		return nil
	}
	if !s.clk.Now().Before(t.expires) {
		delete(s.signed, token)
		return nil
	}
	if t.port != port {
		return nil
	}
	return s.rows.Get(t.sandboxID)
}

// RefreshActivity is the proxy's bump, through the API's throttle. The
// proxy's own 45 s dedupe and 50 s heartbeat are the relay's: a second
// dedupe here, on another clock, would drop the bump a relay's heartbeat
// is timed from.
func (r storeResolver) RefreshActivity(_ context.Context, id string) error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.rows.Get(id)
	if sb == nil || sb.gone {
		return provider.Errorf(provider.NotFound, "sandbox %s not found", id)
	}
	if sb.State == stStarted {
		// A request to a sandbox that is not started is refused, not
		// activity.
		s.eng.bumpLocked(sb)
	}
	return nil
}

// writeProxyError answers what the relays refuse themselves (a missing or
// wrong preview token, an unknown sandbox) with the gin body of Daytona's
// proxy, in the name of the caller's request.
func (s proxyAPI) writeProxyError(w http.ResponseWriter, r *http.Request, err error) {
	in := r
	if log := callOf(r.Context()); log.Path != "" {
		u := *r.URL
		u.Path = log.Path
		in = r.WithContext(r.Context())
		in.URL = &u
	}
	s.writeGinError(w, in, errorf(provider.HTTPStatus(provider.Code(err)), "%s", provider.Message(err)))
}

// callKey carries a proxied request's call-log entry to the transport,
// which notes the fault it applies and answers errors in the request's
// name.
type callKey struct{}

func callOf(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	if c == nil {
		c = &Call{}
	}
	return c
}

// proxyTransport carries the relays' requests to the sandboxes: for each
// request it asks the backend for the route to the sandbox's port (so
// nothing reaches a port that is not the sandbox's, whatever held it a
// moment ago), applies the preview faults, and drops the caller's
// credentials. What it refuses it answers itself, as Daytona's proxy would.
type proxyTransport struct {
	s    *Simulator
	kind string
}

func (t *proxyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s, log := t.s, callOf(req.Context())
	id, port, ok := virtualTarget(req.URL, t.kind)
	if !ok {
		return t.answer(req, errorf(http.StatusBadGateway, "no route to %s", req.URL.Host)), nil
	}
	s.mu.Lock()
	sb := s.rows.Get(id)
	s.mu.Unlock()
	if sb == nil {
		return t.answer(req, t.notFound(id)), nil
	}
	if t.kind == kindPreview {
		if ft, ok := s.faults.Match("preview", sb.OrgID, id, sb.Name); ok {
			log.Fault = ft.ID
			if e := (proxyAPI{s}).applyProxyFault(req.Context(), sb, ft); e != nil {
				return t.answer(req, e), nil
			}
		}
	}
	s.mu.Lock()
	state, gone := sb.State, sb.gone
	s.mu.Unlock()
	switch {
	case gone:
		return t.answer(req, t.notFound(id)), nil
	case state != stStarted:
		return t.answer(req, errorf(http.StatusBadRequest, msgNotStarted)), nil
	}
	route, err := t.route(req.Context(), id, port)
	if err != nil {
		return t.answer(req, routeError(err)), nil
	}
	out := t.toRoute(req, route)
	resp, err := route.Transport.RoundTrip(out)
	if err != nil && req.Context().Err() == nil {
		// The port was the sandbox's, but nothing answered there (in a
		// container, whose ports the backend does not list).
		return t.answer(req, errorf(http.StatusBadGateway, "sandbox workload unreachable: %v", err)), nil
	}
	return resp, err
}

func (t *proxyTransport) notFound(id string) *apiError {
	if t.kind == kindToolbox {
		return errorf(http.StatusNotFound, "sandbox %s not found", id)
	}
	return errorf(http.StatusNotFound, "preview URL not found or expired")
}

func (t *proxyTransport) route(ctx context.Context, id string, port int) (Route, error) {
	if t.kind == kindToolbox {
		return t.s.backend.Toolbox(ctx, id)
	}
	return t.s.backend.Port(ctx, id, port)
}

// toRoute is req aimed at route: its address and Host, without the
// caller's API key, and with the sandbox's own secret for the toolbox.
func (t *proxyTransport) toRoute(req *http.Request, route Route) *http.Request {
	out := req.Clone(req.Context())
	virtual := req.URL.Scheme + "://" + req.URL.Host
	out.URL.Scheme, out.URL.Host = route.URL.Scheme, route.URL.Host
	out.URL.Path = strings.TrimRight(route.URL.Path, "/") + req.URL.Path
	out.URL.RawPath = ""
	out.Host = route.Host
	out.Header.Del("Authorization")
	out.Header.Del(previewTokenHeader)
	if route.Token != "" {
		out.Header.Set(previewTokenHeader, route.Token)
	}
	if out.Header.Get("Origin") == virtual {
		// The relay made a page of the sandbox's own same-origin with the
		// upstream: the workload's own Host it is.
		out.Header.Set("Origin", route.URL.Scheme+"://"+route.Host)
	}
	return out
}

// virtualTarget reads the sandbox and port of a relay's target URL.
func virtualTarget(u *url.URL, kind string) (id string, port int, ok bool) {
	id, ok = strings.CutSuffix(u.Hostname(), "."+kind+".invalid")
	port, err := strconv.Atoi(u.Port())
	return id, port, ok && err == nil
}

// answer is the gin error body the proxy answers e with, in the name of
// the caller's request.
func (t *proxyTransport) answer(req *http.Request, e *apiError) *http.Response {
	log := callOf(req.Context())
	body, _ := json.Marshal(ginBody(log.Path, log.Method, t.s.clk.Now(), e))
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	for k, vs := range e.Header {
		h[k] = append(h[k], vs...)
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status)), StatusCode: e.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// routeError is the answer for a request the backend found no route for. A
// port that is not the sandbox's gets the answer of a port nothing listens
// on: the proxy never says whether something else holds it.
func routeError(err error) *apiError {
	switch {
	case errors.Is(err, ErrNoWorkload):
		return errorf(http.StatusServiceUnavailable, "%s", err.Error())
	case errors.Is(err, ErrNotListening):
		return errorf(http.StatusBadGateway, "%s", err.Error())
	}
	return errorf(http.StatusBadGateway, "%s: %v", ErrNotListening.Error(), err)
}

// serveToolbox proxies {toolboxProxyUrl}/{sandboxId}/<path> to the
// sandbox's toolbox, as Daytona's proxy does, bumping activity on the way:
// with the API key of the sandbox's organization, or, for a pre-signed
// file URL, with its signature.
func (s *Simulator) serveToolbox(w http.ResponseWriter, r *http.Request) {
	proxyAPI{s}.serveToolboxAs(w, r, true)
}

// serveDeprecatedToolbox proxies the API's deprecated toolbox routes,
// which only the API key opens: signed file URLs name the proxy.
func (s *Simulator) serveDeprecatedToolbox(w http.ResponseWriter, r *http.Request) {
	proxyAPI{s}.serveToolboxAs(w, r, false)
}

func (s proxyAPI) serveToolboxAs(w http.ResponseWriter, r *http.Request, fileURLs bool) {
	start := s.clk.Now()
	id := r.PathValue("sandboxId")
	rec := &statusRecorder{ResponseWriter: w}
	c := Call{Time: start, Method: r.Method, Path: r.URL.Path, Operation: "toolbox", SandboxID: id}
	s.proxyToolbox(rec, r.WithContext(context.WithValue(r.Context(), callKey{}, &c)), id, &c, fileURLs)
	c.Status = rec.status
	s.calls.add(c)
}

// proxyToolbox serves a toolbox request and notes its organization and
// fault in log. fileURLs lets a signature stand in for the API key.
func (s proxyAPI) proxyToolbox(w http.ResponseWriter, r *http.Request, id string, log *Call, fileURLs bool) {
	rest := r.PathValue("rest")
	if fileURLs {
		if op, ok := signedFileOp(r, rest); ok {
			s.proxySignedFile(w, r, id, op, log)
			return
		}
	}
	org, aerr := s.authenticate(r)
	if aerr != nil {
		s.writeGinError(w, r, aerr)
		return
	}
	log.Org = org
	s.mu.Lock()
	sb := s.lookupID(org, id)
	s.mu.Unlock()
	if sb == nil {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "sandbox %s not found", id))
		return
	}
	s.forwardToolbox(w, r, sb, id, "/"+rest, log)
}

// proxySignedFile serves a pre-signed file URL: it checks the signature
// against the signing key of the sandbox the path names and forwards the
// one operation it signs, on the one path it signs, with nothing else of
// the caller's query or credentials. Whatever fails answers 400 or 401 in
// the proxy's gin shape and is never forwarded. A sandbox that does not
// exist, has no key yet or is another's is one more signature that does
// not hold: the answer never says which ids exist.
func (s proxyAPI) proxySignedFile(w http.ResponseWriter, r *http.Request, id string, op fileOp, log *Call) {
	s.mu.RLock()
	sb, key := s.rows.Get(id), ""
	if sb != nil && !sb.gone {
		key = sb.signingKey
		log.Org = sb.OrgID // the owner's call log shows what was tried
	}
	s.mu.RUnlock()
	path, expires, sig, perr := s.parseFileURL(r)
	if perr != nil {
		s.writeGinError(w, r, perr)
		return
	}
	if !validFileSignature(key, op.method, path, expires, sig) {
		s.writeGinError(w, r, errorf(http.StatusUnauthorized, "invalid signature"))
		return
	}
	fwd := r.Clone(r.Context())
	u := *r.URL
	u.RawQuery = url.Values{"path": {path}}.Encode()
	fwd.URL = &u
	// The signature, not the caller, opens the operation: nothing of what
	// the caller's client carries for other sites reaches the toolbox.
	for _, h := range []string{"Authorization", "Cookie", "Origin", "Referer", previewTokenHeader,
		"Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"} {
		fwd.Header.Del(h)
	}
	s.forwardToolbox(w, fwd, sb, id, op.target, log)
}

// forwardToolbox applies the toolbox faults and the sandbox's state to a
// request its caller may make, and forwards it to path of the toolbox.
func (s proxyAPI) forwardToolbox(w http.ResponseWriter, r *http.Request, sb *sandbox, id, path string, log *Call) {
	s.mu.Lock()
	name := sb.Name
	s.mu.Unlock()
	if ft, ok := s.faults.Match("toolbox", log.Org, id, name); ok {
		log.Fault = ft.ID
		if e := s.applyProxyFault(r.Context(), sb, ft); e != nil {
			s.writeGinError(w, r, e)
			return
		}
	}
	s.resumeForToolbox(r.Context(), sb)
	s.mu.Lock()
	state, target, gone := sb.State, sb.toolboxURL, sb.gone
	s.mu.Unlock()
	switch {
	case gone:
		s.writeGinError(w, r, errorf(http.StatusNotFound, "sandbox %s not found", id))
		return
	case state != stStarted:
		s.writeGinError(w, r, errorf(http.StatusBadRequest, msgNotStarted))
		return
	case target == "":
		s.writeGinError(w, r, errorf(http.StatusServiceUnavailable, "%s", ErrNoWorkload.Error()))
		return
	}
	s.proxies.toolbox.Forward(w, r, id, toolboxPort, path)
}

// applyProxyFault applies a fault's delay, vanish and status to a proxied
// request.
func (s proxyAPI) applyProxyFault(ctx context.Context, sb *sandbox, ft Fault) *apiError {
	if ft.Delay > 0 {
		if err := clock.Sleep(ctx, s.clk, durationOf(ft.Delay)); err != nil {
			return errorf(499, "client gone")
		}
	}
	if ft.Vanish {
		s.mu.Lock()
		if !sb.gone {
			s.vanishLocked(sb)
		}
		s.mu.Unlock()
	}
	if ft.Status != 0 {
		return faultError("toolbox", ft)
	}
	return nil
}

var (
	previewHost  = regexp.MustCompile(`^([0-9]{1,5})-([A-Za-z0-9-]+)\.`)
	previewLabel = regexp.MustCompile(`^[0-9]{1,5}-[a-z0-9-]+$`)
)

// hostRouter sends requests whose Host is <port>-<id-or-token>.<domain> to
// the preview proxy, like Daytona's proxy domain.
func (s *Simulator) hostRouter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := previewHost.FindStringSubmatch(r.Host); m != nil {
			proxyAPI{s}.servePreview(w, r, m[2])
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Simulator) servePreviewPath(w http.ResponseWriter, r *http.Request) {
	_, label, _ := strings.Cut(r.PathValue("label"), "-")
	proxyAPI{s}.servePreview(w, r, label)
}

// servePreview proxies preview traffic through the preview relay: label
// is the sandbox id of a preview link, authorised by its preview token (or
// a public sandbox), or the token of a signed preview URL.
func (s proxyAPI) servePreview(w http.ResponseWriter, r *http.Request, label string) {
	start := s.clk.Now()
	rec := &statusRecorder{ResponseWriter: w}
	c := Call{Time: start, Method: r.Method, Path: r.URL.Path, Operation: "preview"}
	s.noteSandbox(&c, label)
	s.proxies.preview.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), callKey{}, &c)))
	c.Status = rec.status
	s.calls.add(c)
}

// noteSandbox puts in c the sandbox label names, and its organization.
func (s proxyAPI) noteSandbox(c *Call, label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.rows.Get(label)
	if sb == nil {
		if t := s.signed[label]; t != nil {
			sb = s.rows.Get(t.sandboxID)
		}
	}
	if sb != nil {
		c.SandboxID, c.Org = sb.ID, sb.OrgID
	}
}

// statusRecorder notes the status of a proxied response for the call log
// and passes everything else through: bodies stream (the proxy flushes
// through Unwrap) and are never kept, and a WebSocket upgrade hijacks the
// connection (the SDKs follow logs, drive PTYs and the interpreter over
// WebSockets), noted as 101.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status < 200 { // an informational 1xx is not the answer
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush passes a streamed response's flushes on.
func (r *statusRecorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack takes over the connection for an upgrade, whose 101 the proxy
// writes to the connection itself.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}
