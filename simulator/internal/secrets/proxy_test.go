package secrets

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandplane/sandplane/internal/testdaemon"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

const (
	allowedHost = "api.allowed.test"
	otherHost   = "other.test"
	org         = "org"
)

// received is what the upstream echo servers saw of a request.
type received struct {
	Key       string
	Auth      string
	Body      string
	ProxyAuth string
	Host      string
}

// fixture is a proxy on loopback in front of two upstreams, one plain
// and one TLS with certificates of its own CA, both answering for every
// test hostname through the proxy's injected dialer.
type fixture struct {
	store      *Store
	proxy      *Proxy
	addr       string
	logs       *testdaemon.Buffer
	upstreamCA *x509.CertPool
	upstream   *authority
}

func newFixture(t *testing.T, maxBody int64) *fixture {
	t.Helper()
	// The fake starts at the wall clock's now: the certificates it
	// dates are verified by clients against the real time.
	clk := clocktest.NewFake(time.Now())
	plain := httptest.NewServer(echo())
	t.Cleanup(plain.Close)
	upCA, err := newAuthority(clk)
	require.NoError(t, err)
	tlsSrv := newTLSUpstream(t, upCA)

	routes := map[string]string{}
	for _, h := range []string{allowedHost, otherHost, "eu.wild.test"} {
		routes[h+":80"] = plain.Listener.Addr().String()
		routes[h+":443"] = tlsSrv.Listener.Addr().String()
	}
	logs := &testdaemon.Buffer{}
	store := NewStore(clk)
	proxy, err := NewProxy(Options{
		Store: store, Clock: clk, MaxBody: maxBody,
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RootCAs: pool(upCA.pem),
		Dial:    routeDial(routes),
	})
	require.NoError(t, err)
	addr, err := proxy.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, proxy.Close()) })
	return &fixture{store: store, proxy: proxy, addr: addr.String(), logs: logs,
		upstreamCA: pool(upCA.pem), upstream: upCA}
}

func newTLSUpstream(t *testing.T, ca *authority) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(echo())
	var certs []tls.Certificate
	for _, h := range []string{allowedHost, otherHost, "eu.wild.test"} {
		c, err := ca.leaf(h)
		require.NoError(t, err)
		certs = append(certs, *c)
	}
	srv.TLS = &tls.Config{Certificates: certs}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(received{
			Key: r.Header.Get("X-Api-Key"), Auth: r.Header.Get("Authorization"), Body: string(body),
			ProxyAuth: r.Header.Get("Proxy-Authorization"), Host: r.Host,
		})
	})
}

// routeDial resolves the test's hostnames to the loopback upstreams, as
// DNS would the real ones.
func routeDial(routes map[string]string) DialFunc {
	var d net.Dialer
	return func(ctx context.Context, _, network, addr string) (net.Conn, error) {
		if to, ok := routes[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
}

// client is a sandbox's HTTP client: the proxy in its environment, and
// both the proxy's CA and the upstreams' in its roots.
func (f *fixture) client(t *testing.T, proxyURL string) *http.Client {
	t.Helper()
	u, err := url.Parse(proxyURL)
	require.NoError(t, err)
	roots := f.upstreamCA.Clone()
	require.True(t, roots.AppendCertsFromPEM(f.proxy.CACertPEM()))
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (f *fixture) sandbox(t *testing.T, id string, envs map[string]string) *http.Client {
	t.Helper()
	require.NoError(t, f.store.Mount(org, id, envs))
	return f.client(t, f.proxy.ProxyURL(id, f.addr))
}

func (f *fixture) secret(t *testing.T, name, value string, hosts ...string) Secret {
	t.Helper()
	s, err := f.store.Create(org, Spec{Name: name, Value: NewValue(value), Hosts: hosts})
	require.NoError(t, err)
	return s
}

// send makes one request and returns what the upstream received and
// which CA signed the certificate the client saw: "proxy", "upstream",
// or "" over plain HTTP.
func (f *fixture) send(t *testing.T, c *http.Client, method, rawURL string, header http.Header, body string) (received, string) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got received
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	return got, f.signer(t, resp.TLS)
}

// signer names the CA whose signature the peer's certificate carries;
// both CAs share a name, so the signature is what tells them apart.
func (f *fixture) signer(t *testing.T, state *tls.ConnectionState) string {
	t.Helper()
	if state == nil {
		return ""
	}
	leaf := state.PeerCertificates[0]
	switch {
	case leaf.CheckSignatureFrom(f.proxy.ca.cert) == nil:
		return "proxy"
	case leaf.CheckSignatureFrom(f.upstream.cert) == nil:
		return "upstream"
	}
	t.Fatalf("certificate for %v signed by neither CA", leaf.DNSNames)
	return ""
}

func TestProxySubstitutes(t *testing.T) {
	f := newFixture(t, 0)
	sec := f.secret(t, "ANTHROPIC", testValue, allowedHost)
	c := f.sandbox(t, "sb-a", map[string]string{"ANTHROPIC_API_KEY": "ANTHROPIC"})
	ph := f.store.Env("sb-a")["ANTHROPIC_API_KEY"]
	require.Equal(t, sec.Placeholder, ph)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+ph))

	tests := []struct {
		name     string
		url      string
		header   http.Header
		body     string
		want     received
		issuerCA bool // the client saw the proxy's CA, not the upstream's
	}{
		{"http header to allowed host", "http://" + allowedHost + "/v1", http.Header{"X-Api-Key": {ph}}, "",
			received{Key: testValue}, false},
		{"http body to allowed host", "http://" + allowedHost + "/v1", nil, `{"key":"` + ph + `"}`,
			received{Body: `{"key":"` + testValue + `"}`}, false},
		{"https header to allowed host", "https://" + allowedHost + "/v1", http.Header{"Authorization": {"Bearer " + ph}}, "",
			received{Auth: "Bearer " + testValue}, true},
		{"https body to allowed host", "https://" + allowedHost + "/v1", nil, "k=" + ph + "&again=" + ph,
			received{Body: "k=" + testValue + "&again=" + testValue}, true},
		{"https basic auth to allowed host", "https://" + allowedHost + "/v1", http.Header{"Authorization": {basic}}, "",
			received{Auth: "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+testValue))}, true},
		{"http to another host keeps the placeholder", "http://" + otherHost + "/", http.Header{"X-Api-Key": {ph}}, ph,
			received{Key: ph, Body: ph}, false},
		{"https to another host is tunnelled", "https://" + otherHost + "/", http.Header{"X-Api-Key": {ph}}, ph,
			received{Key: ph, Body: ph}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, issuer := f.send(t, c, http.MethodPost, tt.url, tt.header, tt.body)
			assert.Empty(t, got.ProxyAuth, "the proxy token goes no further than the proxy")
			got.ProxyAuth, got.Host = "", ""
			assert.Equal(t, tt.want, got)
			want := map[bool]string{true: "proxy", false: "upstream"}[tt.issuerCA]
			if strings.HasPrefix(tt.url, "http:") {
				want = ""
			}
			assert.Equal(t, want, issuer)
		})
	}
	assert.NotContains(t, f.logs.String(), testValue)
	assert.Contains(t, f.logs.String(), "substituted", "the test did log, and so checked something")
}

func TestProxyWildcardAndUnrestricted(t *testing.T) {
	f := newFixture(t, 0)
	f.secret(t, "WILD", "wild-value", "*.wild.test")
	f.secret(t, "ANY", "any-value")
	c := f.sandbox(t, "sb", map[string]string{"W": "WILD", "A": "ANY"})
	env := f.store.Env("sb")
	header := http.Header{"X-Api-Key": {env["W"] + " " + env["A"]}}

	got, issuer := f.send(t, c, http.MethodGet, "https://eu.wild.test/", header, "")
	assert.Equal(t, "wild-value any-value", got.Key)
	assert.Equal(t, "proxy", issuer)

	got, issuer = f.send(t, c, http.MethodGet, "https://"+otherHost+"/", header, "")
	assert.Equal(t, env["W"]+" any-value", got.Key, "a secret without hosts goes anywhere, as the SDK documents")
	assert.Equal(t, "proxy", issuer, "and so every host is intercepted")
}

func TestProxyRotationAndDetach(t *testing.T) {
	f := newFixture(t, 0)
	sec := f.secret(t, "KEY", "first-value", allowedHost)
	c := f.sandbox(t, "sb", map[string]string{"KEY": "KEY"})
	header := http.Header{"X-Api-Key": {sec.Placeholder}}

	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			u := scheme + "://" + allowedHost + "/"
			require.NoError(t, f.store.Mount(org, "sb", map[string]string{"KEY": "KEY"}))
			_, err := f.store.Update(org, sec.ID, Patch{Value: ptr(NewValue("first-value"))})
			require.NoError(t, err)
			got, _ := f.send(t, c, http.MethodGet, u, header, "")
			assert.Equal(t, "first-value", got.Key)

			_, err = f.store.Update(org, sec.ID, Patch{Value: ptr(NewValue("rotated-value"))})
			require.NoError(t, err)
			got, _ = f.send(t, c, http.MethodGet, u, header, "")
			assert.Equal(t, "rotated-value", got.Key, "rotation takes effect for the next request, on the same connection")

			require.NoError(t, f.store.Mount(org, "sb", map[string]string{}))
			got, _ = f.send(t, c, http.MethodGet, "http://"+allowedHost+"/", header, "")
			assert.Equal(t, sec.Placeholder, got.Key, "a detached secret is substituted no more")
		})
	}
}

func TestProxyIsolatesSandboxes(t *testing.T) {
	f := newFixture(t, 0)
	sec := f.secret(t, "KEY", testValue, allowedHost)
	f.sandbox(t, "owner", map[string]string{"KEY": "KEY"})
	thief := f.sandbox(t, "thief", map[string]string{})
	header := http.Header{"X-Api-Key": {sec.Placeholder}}

	for _, u := range []string{"http://" + allowedHost + "/", "https://" + allowedHost + "/"} {
		got, issuer := f.send(t, thief, http.MethodGet, u, header, "")
		assert.Equal(t, sec.Placeholder, got.Key, u)
		if strings.HasPrefix(u, "https") {
			assert.Equal(t, "upstream", issuer, "nothing of the thief's allows the host, so it is not intercepted")
		}
	}

	f.proxy.Revoke("owner")
	owner := f.client(t, "http://"+f.proxy.Credentials("thief")+"x@"+f.addr)
	resp, err := owner.Get("http://" + allowedHost + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusProxyAuthRequired, resp.StatusCode, "a wrong token is refused")
	assert.NotContains(t, f.logs.String(), testValue)
}

func TestProxyRefusesUnauthenticated(t *testing.T) {
	f := newFixture(t, 0)
	f.secret(t, "KEY", testValue, allowedHost)
	f.sandbox(t, "sb", map[string]string{"KEY": "KEY"})

	tests := []struct {
		name     string
		proxyURL string
	}{
		{"no credentials", "http://" + f.addr},
		{"unknown token", "http://sbx_not-a-token@" + f.addr},
		{"revoked token", f.proxy.ProxyURL("gone", f.addr)},
	}
	f.proxy.Revoke("gone")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := f.client(t, tt.proxyURL)
			resp, err := c.Get("http://" + allowedHost + "/")
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusProxyAuthRequired, resp.StatusCode)
			assert.NotEmpty(t, resp.Header.Get("Proxy-Authenticate"))

			_, err = c.Get("https://" + allowedHost + "/")
			require.Error(t, err, "a CONNECT without credentials is refused")
		})
	}
}

func TestProxyBodyAboveCapIsUntouched(t *testing.T) {
	f := newFixture(t, 64)
	sec := f.secret(t, "KEY", testValue, allowedHost)
	c := f.sandbox(t, "sb", map[string]string{"KEY": "KEY"})
	small := sec.Placeholder
	large := sec.Placeholder + strings.Repeat("x", 64)

	got, _ := f.send(t, c, http.MethodPost, "https://"+allowedHost+"/", http.Header{"X-Api-Key": {sec.Placeholder}}, small)
	assert.Equal(t, testValue, got.Body)
	got, _ = f.send(t, c, http.MethodPost, "https://"+allowedHost+"/", http.Header{"X-Api-Key": {sec.Placeholder}}, large)
	assert.Equal(t, large, got.Body, "a body above the cap is streamed on as it came")
	assert.Equal(t, testValue, got.Key, "its headers are still rewritten")
}

func ptr[T any](v T) *T { return &v }

func pool(pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemBytes)
	return p
}
