package secrets

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// DialFunc opens a connection out for sandbox. The simulator passes one
// that applies the sandbox's own network limits: the proxy dials from
// the simulator's host, so without them it would be a way around them.
type DialFunc func(ctx context.Context, sandbox, network, addr string) (net.Conn, error)

// Options configure a Proxy.
type Options struct {
	Store *Store
	Clock clock.Clock
	// Logger gets debug lines naming sandboxes, hosts and counts of
	// secrets, never a value or a header; nil discards.
	Logger *slog.Logger
	// RootCAs verify upstream servers; nil is the system's.
	RootCAs *x509.CertPool
	// Dial opens upstream connections; nil dials directly.
	Dial DialFunc
	// MaxBody is the largest request body rewritten; 0 is DefaultMaxBody.
	MaxBody int64
}

// Proxy is the HTTP(S) forward proxy a sandbox's HTTP_PROXY and
// HTTPS_PROXY name. It substitutes secret values for placeholders in the
// requests a sandbox sends to the hosts those secrets allow, opening TLS
// with its own CA for those hosts only, and tunnels everything else
// untouched. Each sandbox authenticates with its own credentials.
type Proxy struct {
	store   *Store
	ca      *authority
	log     *slog.Logger
	rootCAs *x509.CertPool
	dial    DialFunc
	maxBody int64

	mu      sync.RWMutex
	clients map[[sha256.Size]byte]*client // token hash → sandbox
	tokens  map[string]string             // sandbox → token

	server  *http.Server
	mitm    *http.Server
	mitmL   *connListener
	tunnels tracked
}

// client is one sandbox's side of the proxy; its transport dials for it
// alone, so a connection pooled for one sandbox never carries another's.
type client struct {
	sandbox   string
	transport *http.Transport
	reverse   *httputil.ReverseProxy
}

// NewProxy makes a proxy and its CA, valid from o.Clock's now.
func NewProxy(o Options) (*Proxy, error) {
	ca, err := newAuthority(o.Clock)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		store: o.Store, ca: ca, log: o.Logger, rootCAs: o.RootCAs, dial: o.Dial, maxBody: o.MaxBody,
		clients: map[[sha256.Size]byte]*client{}, tokens: map[string]string{},
	}
	p.defaults()
	return p, nil
}

func (p *Proxy) defaults() {
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.dial == nil {
		var d net.Dialer
		p.dial = func(ctx context.Context, _, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}
	}
	if p.maxBody <= 0 {
		p.maxBody = DefaultMaxBody
	}
}

// CACertPEM is the certificate sandboxes trust so that intercepted TLS
// verifies. It must be added to, not replace, their usual roots: other
// hosts are tunnelled and show their own certificates.
func (p *Proxy) CACertPEM() []byte { return append([]byte(nil), p.ca.pem...) }

// Credentials returns sandbox's proxy token, made on first use and the
// same after until Revoke.
func (p *Proxy) Credentials(sandbox string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.tokens[sandbox]; ok {
		return t
	}
	t := "sbx_" + rand.Text()
	p.tokens[sandbox] = t
	p.clients[sha256.Sum256([]byte(t))] = p.newClient(sandbox)
	return t
}

// Revoke ends sandbox's credentials, when it is deleted.
func (p *Proxy) Revoke(sandbox string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tokens[sandbox]
	if !ok {
		return
	}
	key := sha256.Sum256([]byte(t))
	p.clients[key].transport.CloseIdleConnections()
	delete(p.clients, key)
	delete(p.tokens, sandbox)
}

// Redial closes the idle upstream connections kept for sandbox, so that
// its next request dials anew, through Options.Dial: the simulator calls
// it when the sandbox's network settings change, which a pooled
// connection would otherwise outlive. Tunnels already open stay open.
func (p *Proxy) Redial(sandbox string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if t, ok := p.tokens[sandbox]; ok {
		p.clients[sha256.Sum256([]byte(t))].transport.CloseIdleConnections()
	}
}

// ProxyURL is what sandbox's HTTP_PROXY and HTTPS_PROXY hold, for the
// proxy listening at hostport. The token is the password, under a fixed
// user: Python's urllib sends proxy credentials only when a URL has both.
func (p *Proxy) ProxyURL(sandbox, hostport string) string {
	return "http://sandbox:" + p.Credentials(sandbox) + "@" + hostport
}

func (p *Proxy) newClient(sandbox string) *client {
	c := &client{sandbox: sandbox}
	c.transport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return p.dial(ctx, sandbox, network, addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: p.rootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		IdleConnTimeout:   90 * time.Second,
	}
	c.reverse = &httputil.ReverseProxy{
		// The request's URL is already where it goes; the Host header
		// follows it, so that what is matched is what is dialled.
		Rewrite:      func(pr *httputil.ProxyRequest) { pr.Out.Host = "" },
		Transport:    c.transport,
		ErrorLog:     slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: p.upstreamFailed,
	}
	return c
}

// Start listens on addr (loopback, "127.0.0.1:0") and serves until
// Close; it returns the address listened on.
func (p *Proxy) Start(addr string) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: time.Minute, ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)}
	p.mitmL = newConnListener(l.Addr())
	p.mitm = &http.Server{
		Handler:           http.HandlerFunc(p.serveIntercepted),
		ReadHeaderTimeout: time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, interceptedKey{}, c)
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	go func() { _ = p.server.Serve(l) }()
	go func() { _ = p.mitm.Serve(p.mitmL) }()
	return l.Addr(), nil
}

// Close stops serving and ends every connection, tunnels included.
func (p *Proxy) Close() error {
	var errs []error
	if p.server != nil {
		errs = append(errs, p.server.Close(), p.mitm.Close(), p.mitmL.Close())
	}
	p.tunnels.closeAll()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		c.transport.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

type interceptedKey struct{}

// ServeHTTP is the proxy's front: every request must carry a sandbox's
// credentials; CONNECTs open tunnels, absolute http:// URLs are
// forwarded.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := p.authenticate(r)
	if c == nil {
		p.log.Debug("secrets proxy: refused unauthenticated request", "host", hostOf(r.Host))
		w.Header().Set("Proxy-Authenticate", `Basic realm="sandplane"`)
		http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
		return
	}
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r, c)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		p.forward(w, r, c)
	default:
		http.Error(w, "the proxy forwards absolute http:// URLs and CONNECT only", http.StatusBadRequest)
	}
}

// authenticate finds the sandbox whose token the Proxy-Authorization
// carries, as the password or, for a URL with a user only, as the user.
func (p *Proxy) authenticate(r *http.Request) *client {
	token := proxyToken(r.Header.Get("Proxy-Authorization"))
	if token == "" {
		return nil
	}
	key := sha256.Sum256([]byte(token))
	p.mu.RLock()
	defer p.mu.RUnlock()
	c, ok := p.clients[key]
	// The lookup is by hash; comparing the token too costs nothing and
	// keeps the check from resting on the map alone.
	if !ok || subtle.ConstantTimeCompare([]byte(p.tokens[c.sandbox]), []byte(token)) != 1 {
		return nil
	}
	return c
}

func proxyToken(header string) string {
	scheme, encoded, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ""
	}
	decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return ""
	}
	user, pass, _ := strings.Cut(string(decoded), ":")
	if pass != "" {
		return pass
	}
	return user
}

// connect opens TLS for a host some secret of the sandbox allows, and
// tunnels any other untouched.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, c *client) {
	target := withPort(r.Host, "443")
	host := hostOf(target)
	if p.store.intercepts(c.sandbox, host) {
		p.intercept(w, c, target, host)
		return
	}
	p.tunnel(w, r, c, target)
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, c *client, target string) {
	upstream, err := p.dial(r.Context(), c.sandbox, "tcp", target)
	if err != nil {
		p.log.Debug("secrets proxy: tunnel dial failed", "sandbox", c.sandbox, "host", hostOf(target), "err", err)
		http.Error(w, "proxy could not reach "+target, http.StatusBadGateway)
		return
	}
	down, err := establish(w)
	if err != nil {
		_ = upstream.Close()
		return
	}
	p.log.Debug("secrets proxy: tunnel", "sandbox", c.sandbox, "host", hostOf(target))
	p.splice(down, upstream)
}

// splice copies both ways until either side ends, then closes both.
func (p *Proxy) splice(a, b net.Conn) {
	if !p.tunnels.add(a) || !p.tunnels.add(b) {
		_ = a.Close()
		_ = b.Close()
		return
	}
	defer p.tunnels.remove(a)
	defer p.tunnels.remove(b)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}

func (p *Proxy) intercept(w http.ResponseWriter, c *client, target, host string) {
	down, err := establish(w)
	if err != nil {
		return
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: the server reading these conns is handed a
		// wrapper, not a *tls.Conn, and so does not speak h2 on it.
		NextProtos:     []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.ca.leaf(host) },
	}
	p.log.Debug("secrets proxy: intercept", "sandbox", c.sandbox, "host", host)
	if !p.mitmL.push(&intercepted{Conn: tls.Server(down, cfg), client: c, target: target}) {
		_ = down.Close()
	}
}

// establish answers a CONNECT and takes its connection over.
func establish(w http.ResponseWriter) (net.Conn, error) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "proxy cannot tunnel on this connection", http.StatusInternalServerError)
		return nil, err
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return newHijacked(conn, rw), nil
}

// serveIntercepted forwards a request read from an intercepted
// connection to where that connection was CONNECTed.
func (p *Proxy) serveIntercepted(w http.ResponseWriter, r *http.Request) {
	ic, ok := r.Context().Value(interceptedKey{}).(*intercepted)
	if !ok {
		http.Error(w, "not an intercepted connection", http.StatusInternalServerError)
		return
	}
	r.URL.Scheme = "https"
	r.URL.Host = ic.target
	p.forward(w, r, ic.client)
}

// forward substitutes the sandbox's secrets that allow the request's
// host and sends it on.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, c *client) {
	host := hostOf(r.URL.Host)
	if subs := p.store.substitutions(c.sandbox, host); len(subs) > 0 {
		rewriteHeaders(r.Header, subs)
		if err := rewriteBody(r, subs, p.maxBody); err != nil {
			http.Error(w, "proxy could not read the request body", http.StatusBadRequest)
			return
		}
		p.log.Debug("secrets proxy: substituted", "sandbox", c.sandbox, "host", host, "secrets", len(subs))
	}
	c.reverse.ServeHTTP(w, r)
}

func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	p.log.Debug("secrets proxy: upstream failed", "host", hostOf(r.URL.Host), "err", err)
	w.WriteHeader(http.StatusBadGateway)
}

func withPort(hostport, port string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	return net.JoinHostPort(strings.Trim(hostport, "[]"), port)
}
