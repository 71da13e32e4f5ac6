package simulator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandplane/sandplane/internal/testdaemon"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The names the sandbox sends to; the proxy's resolver (a test hook)
// takes both to the one loopback TLS server.
const (
	testAllowedHost  = "api.allowed.test"
	testOtherHost    = "other.test"
	testSecretValue  = "sk-live-never-in-a-response-5e1b"
	testRotatedValue = "sk-live-testRotatedValue-value-93ad"
)

// upstream is the TLS server a sandbox's requests reach: it keeps what
// each one carried and answers without echoing it.
type upstream struct {
	srv   *httptest.Server
	caPEM string
	pool  *x509.CertPool

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	Host, Authorization, Header, Body string
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	cert, pemBytes := selfSigned(t, testAllowedHost, testOtherHost)
	u := &upstream{caPEM: string(pemBytes), pool: x509.NewCertPool()}
	require.True(t, u.pool.AppendCertsFromPEM(pemBytes))
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{Host: hostOnly(r.Host), Authorization: r.Header.Get("Authorization"),
			Header: r.Header.Get("X-Api-Key"), Body: string(body)})
		u.mu.Unlock()
		_, _ = io.WriteString(w, "received")
	}))
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func hostOnly(hostport string) string {
	h, _, _ := strings.Cut(hostport, ":")
	return h
}

func (u *upstream) port() string {
	return strconv.Itoa(int(u.srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()))
}

// take returns what arrived since the last take.
func (u *upstream) take() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.seen
	u.seen = nil
	return out
}

// selfSigned is a certificate for names that is its own root.
func selfSigned(t *testing.T, names ...string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// secretsHarness is a native harness whose proxy reaches u for the test
// names, logging at debug level into logs.
func secretsHarness(t *testing.T, u *upstream, logs *testdaemon.Buffer) *harness {
	return nativeHarness(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.egress = egressHooks{rootCAs: u.pool, resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}}
	})
}

// sendScript is what the sandbox runs: python's urllib through the
// HTTPS_PROXY it was given, trusting SSL_CERT_FILE (the proxy's CA among
// the host's roots) and the test server's own certificate, for the
// tunnelled host. It sends token (the env var's placeholder unless given)
// in a header, a Basic credential and the body, and prints the status.
func sendScript(caPEM, url, token string) string {
	tok := `os.environ["API_KEY"]`
	if token != "" {
		tok = strconv.Quote(token)
	}
	return `python3 - <<'EOF'
import base64, os, ssl, urllib.request
tok = ` + tok + `
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
ctx.load_verify_locations(cadata=` + strconv.Quote(caPEM) + `)
basic = base64.b64encode(("user:" + tok).encode()).decode()
req = urllib.request.Request(` + strconv.Quote(url) + `, data=("key=" + tok).encode(),
    headers={"Authorization": "Basic " + basic, "X-Api-Key": tok})
opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
print(opener.open(req, timeout=20).status)
EOF`
}

// basic is the Basic credential the script sends for tok.
func basic(tok string) string {
	return "Basic " + b64("user:"+tok)
}

func TestSecretsReachOnlyAllowedHostsFromANativeSandbox(t *testing.T) {
	u := newUpstream(t)
	var logs testdaemon.Buffer
	h := secretsHarness(t, u, &logs)
	var responses []string
	call := func(method, path string, body any) (int, []byte) {
		code, b, hdr := h.raw(method, path, body)
		responses = append(responses, string(b), headerText(hdr))
		return code, b
	}

	code, b := call("POST", "/api/secret", map[string]any{"name": "api-key", "value": testSecretValue, "hosts": []string{testAllowedHost}})
	require.Equal(t, http.StatusCreated, code, string(b))
	var sec secretDTO
	require.NoError(t, json.Unmarshal(b, &sec))
	ph := sec.Placeholder

	code, b = call("POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"API_KEY": "api-key"}}})
	require.Equal(t, http.StatusOK, code, string(b))
	var sb struct{ ID, State string }
	require.NoError(t, json.Unmarshal(b, &sb))
	require.Equal(t, "started", sb.State, string(b))

	run := func(url, token string) string {
		t.Helper()
		code, res, body := h.execute(sb.ID, map[string]any{"command": sendScript(u.caPEM, url, token), "timeout": 30})
		require.Equal(t, http.StatusOK, code, string(body))
		responses = append(responses, res.Result)
		return res.Result
	}
	allowed := "https://" + testAllowedHost + ":" + u.port() + "/v1/call"
	other := "https://" + testOtherHost + ":" + u.port() + "/v1/call"

	_, env, _ := h.execute(sb.ID, map[string]any{"command": "env"})
	responses = append(responses, env.Result)
	assert.Contains(t, env.Result, "API_KEY="+ph, "the sandbox sees the placeholder")
	assert.Contains(t, env.Result, "HTTPS_PROXY=http://sandbox:")
	for _, k := range []string{"SSL_CERT_FILE=", "NODE_EXTRA_CA_CERTS=", "REQUESTS_CA_BUNDLE="} {
		assert.Contains(t, env.Result, k)
	}

	steps := []struct {
		name  string
		act   func()
		url   string
		token string
		want  string
	}{
		{"an allowed host gets the value", func() {}, allowed, "", testSecretValue},
		{"another host gets the placeholder", func() {}, other, "", ph},
		{"a rotation is in force at the next request", func() {
			code, b := call("PATCH", "/api/secret/"+sec.ID, map[string]any{"value": testRotatedValue})
			require.Equal(t, http.StatusOK, code, string(b))
		}, allowed, "", testRotatedValue},
		{"a detached secret is substituted no more", func() {
			code, b := call("PUT", "/api/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{}})
			require.Equal(t, http.StatusOK, code, string(b))
		}, allowed, ph, ph},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.act()
			out := run(st.url, st.token)
			assert.Equal(t, "200\n", out)
			seen := u.take()
			require.Len(t, seen, 1)
			assert.Equal(t, st.want, seen[0].Header)
			assert.Equal(t, "key="+st.want, seen[0].Body)
			assert.Equal(t, basic(st.want), seen[0].Authorization)
		})
	}

	// The detach reached the toolbox too: a process started now has no
	// API_KEY; a new mount shows up the same way.
	code, b = call("POST", "/api/secret", map[string]any{"name": "second", "value": testSecretValue})
	require.Equal(t, http.StatusCreated, code, string(b))
	code, b = call("PUT", "/api/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{{"OTHER_KEY": "second"}}})
	require.Equal(t, http.StatusOK, code, string(b))
	require.Eventually(t, func() bool {
		_, res, _ := h.execute(sb.ID, map[string]any{"command": "echo \"${API_KEY:-none} ${OTHER_KEY:-none}\""})
		responses = append(responses, res.Result)
		return strings.HasPrefix(res.Result, "none dtn_secret_")
	}, 10*time.Second, 50*time.Millisecond, "new processes see the mounts as they are now")

	code, b = call("GET", "/api/secret/paginated", nil)
	require.Equal(t, http.StatusOK, code, string(b))
	code, b = call("GET", "/api/sandbox/"+sb.ID+"/secrets", nil)
	require.Equal(t, http.StatusOK, code, string(b))
	_, calls, _ := h.admin("GET", "/_sim/calls", nil)
	responses = append(responses, string(calls), logs.String())
	for _, r := range responses {
		assert.NotContains(t, r, testSecretValue)
		assert.NotContains(t, r, testRotatedValue)
		assert.NotContains(t, r, b64(testSecretValue))
	}
	assert.Contains(t, logs.String(), "secrets proxy: substituted", "the proxy did log, without values")
}

// A sandbox whose network settings forbid an address reaches it through
// the proxy no more than without: the native backend does not cut its
// network, and the proxy, which dials from the simulator's host, keeps to
// the settings the simulator records.
func TestSecretsProxyHonoursNetworkSettings(t *testing.T) {
	u := newUpstream(t)
	var logs testdaemon.Buffer
	h := secretsHarness(t, u, &logs)
	code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": "k", "value": testSecretValue, "hosts": []string{testAllowedHost}})
	require.Equal(t, http.StatusCreated, code, string(b))
	tests := []struct {
		name    string
		body    map[string]any
		reaches bool
	}{
		{"networkBlockAll", map[string]any{"networkBlockAll": true}, false},
		{"an allow list without the address", map[string]any{"networkAllowList": "10.9.8.0/24"}, false},
		{"an allow list with the address", map[string]any{"networkAllowList": "10.9.8.0/24,127.0.0.0/8"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"secrets": []map[string]string{{"API_KEY": "k"}}}
			for k, v := range tt.body {
				body[k] = v
			}
			code, b, _ := h.raw("POST", "/api/sandbox", body)
			require.Equal(t, http.StatusOK, code, string(b))
			var sb struct{ ID string }
			require.NoError(t, json.Unmarshal(b, &sb))
			for _, host := range []string{testAllowedHost, testOtherHost} {
				code, res, out := h.execute(sb.ID, map[string]any{"command": sendScript(u.caPEM, "https://"+host+":"+u.port()+"/", ""), "timeout": 30})
				require.Equal(t, http.StatusOK, code, string(out))
				assert.Equal(t, tt.reaches, res.ExitCode == 0, "%s: %s", host, res.Result)
			}
			if tt.reaches {
				assert.Len(t, u.take(), 2)
			} else {
				assert.Empty(t, u.take(), "nothing reached the server")
			}
		})
	}
}

func headerText(h http.Header) string {
	var b strings.Builder
	_ = h.Write(&b)
	return b.String()
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// Settings changed on a sandbox hold for the proxy from its next request,
// connections it pooled for the sandbox included.
func TestSecretsProxyKeepsToChangedNetworkSettings(t *testing.T) {
	u := newUpstream(t)
	var logs testdaemon.Buffer
	h := secretsHarness(t, u, &logs)
	code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": "k", "value": testSecretValue, "hosts": []string{testAllowedHost}})
	require.Equal(t, http.StatusCreated, code, string(b))
	code, b, _ = h.raw("POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"API_KEY": "k"}}})
	require.Equal(t, http.StatusOK, code, string(b))
	var sb struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &sb))
	send := func() executeResponse {
		code, res, out := h.execute(sb.ID, map[string]any{"command": sendScript(u.caPEM, "https://"+testAllowedHost+":"+u.port()+"/", ""), "timeout": 30})
		require.Equal(t, http.StatusOK, code, string(out))
		return res
	}
	steps := []struct {
		settings map[string]any
		reaches  bool
	}{
		{nil, true},
		{map[string]any{"networkBlockAll": true}, false},
		{map[string]any{"networkBlockAll": false}, true},
		{map[string]any{"networkAllowList": "10.9.8.0/24"}, false},
	}
	for i, st := range steps {
		if st.settings != nil {
			code, b, _ := h.raw("POST", "/api/sandbox/"+sb.ID+"/network-settings", st.settings)
			require.Equal(t, http.StatusOK, code, string(b))
		}
		res := send()
		assert.Equal(t, st.reaches, res.ExitCode == 0, "step %d: %s", i, res.Result)
		assert.Len(t, u.take(), map[bool]int{true: 1, false: 0}[st.reaches], "step %d", i)
	}
}
