package toolbox

import (
	"bytes"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawRequest is a request with every header under the test's control: no
// token unless the test adds one.
type rawRequest struct {
	method, path, host, body string
	header                   map[string]string
}

func (ts *testServer) raw(t *testing.T, rr rawRequest) response {
	t.Helper()
	method := rr.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, ts.url+rr.path, strings.NewReader(rr.body))
	require.NoError(t, err)
	if rr.host != "" {
		req.Host = rr.host
	}
	for k, v := range rr.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func TestGuardRefusesCrossSiteAndUnauthenticatedCalls(t *testing.T) {
	var logs bytes.Buffer
	ts := newTestServer(t, Options{
		Token:        testToken,
		AllowedHosts: []string{"sandbox.internal"},
		Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
	})
	marker := filepath.Join(ts.workDir, "ran")
	// The attack of a web page: a form post (text/plain needs no CORS
	// preflight) or a DNS-rebinding page, running a command as the user.
	attack := `{"command":"id > ` + marker + `"}`
	const (
		json  = "application/json"
		plain = "text/plain"
		good  = testToken
		wrong = "wrong-token-value-that-must-never-be-echoed"
	)
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name   string
		req    rawRequest
		status int
	}{
		// The reproduction: curl -H 'Host: evil.com' -H 'Origin: http://evil.com'
		// -H 'Content-Type: text/plain' -d '{"command":"id"}' .../process/execute
		{"cross-site curl as reproduced", rawRequest{path: "/process/execute", host: "evil.com", body: attack,
			header: hdr("Origin", "http://evil.com", "Content-Type", plain)}, 403},
		{"the same with a loopback Host, still a foreign Origin", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Origin", "http://evil.com", "Content-Type", plain)}, 403},
		{"the same with no Origin: text/plain, no token", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Content-Type", plain)}, 401},
		{"text/plain even with the token", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Content-Type", plain, TokenHeader, good)}, 415},
		{"a form encoding with the token", rawRequest{path: "/process/execute", body: "command=id",
			header: hdr("Content-Type", "application/x-www-form-urlencoded", TokenHeader, good)}, 415},
		{"multipart on a JSON route", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Content-Type", "multipart/form-data; boundary=x", TokenHeader, good)}, 415},
		{"no Content-Type on a JSON route", rawRequest{path: "/process/execute", body: attack,
			header: hdr(TokenHeader, good)}, 415},
		{"a form post to a route without a body", rawRequest{path: "/files/folder?path=made", body: "a=b",
			header: hdr("Content-Type", "application/x-www-form-urlencoded", TokenHeader, good)}, 415},

		{"no token", rawRequest{path: "/process/execute", body: attack, header: hdr("Content-Type", json)}, 401},
		{"wrong token", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Content-Type", json, TokenHeader, wrong)}, 401},
		{"wrong bearer token", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Content-Type", json, "Authorization", "Bearer "+wrong)}, 401},
		{"the token as a Basic credential", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Content-Type", json, "Authorization", "Basic "+good)}, 401},
		{"a token that only starts right", rawRequest{path: "/process/execute", body: attack,
			header: hdr("Content-Type", json, TokenHeader, good[:len(good)-1])}, 401},
		{"no token on a read", rawRequest{method: "GET", path: "/files?path=."}, 401},
		{"no token on an unknown route", rawRequest{method: "GET", path: "/nothing/here"}, 401},
		{"no token on a path the mux would redirect", rawRequest{method: "GET", path: "/process//session"}, 401},

		// DNS rebinding: the attacker's own name, resolved to 127.0.0.1.
		{"rebinding name", rawRequest{method: "GET", path: "/files?path=.", host: "attacker.example:8080",
			header: hdr(TokenHeader, good)}, 403},
		{"rebinding name that starts like localhost", rawRequest{method: "GET", path: "/files?path=.", host: "localhost.attacker.example",
			header: hdr(TokenHeader, good)}, 403},
		{"rebinding name that embeds a loopback address", rawRequest{method: "GET", path: "/files?path=.", host: "127.0.0.1.nip.io",
			header: hdr(TokenHeader, good)}, 403},
		{"an open route is Host-checked too", rawRequest{method: "GET", path: "/version", host: "evil.com"}, 403},
		{"Origin null (sandboxed frame, file page)", rawRequest{method: "GET", path: "/version", header: hdr("Origin", "null")}, 403},
		{"cross-site GET without Origin", rawRequest{method: "GET", path: "/files/download?path=x",
			header: hdr(TokenHeader, good, "Sec-Fetch-Site", "cross-site")}, 403},

		{"the token header", rawRequest{path: "/process/execute", body: `{"command":"true"}`,
			header: hdr("Content-Type", json, TokenHeader, good)}, 200},
		{"the token as a bearer", rawRequest{path: "/process/execute", body: `{"command":"true"}`,
			header: hdr("Content-Type", "application/json; charset=utf-8", "Authorization", "Bearer "+good)}, 200},
		{"localhost with a port", rawRequest{method: "GET", path: "/work-dir", host: "localhost:4100", header: hdr(TokenHeader, good)}, 200},
		{"a .localhost name", rawRequest{method: "GET", path: "/work-dir", host: "4000-sbx.localhost:4025", header: hdr(TokenHeader, good)}, 200},
		{"IPv6 loopback", rawRequest{method: "GET", path: "/work-dir", host: "[::1]:4100", header: hdr(TokenHeader, good)}, 200},
		{"anywhere in 127/8", rawRequest{method: "GET", path: "/work-dir", host: "127.3.2.1", header: hdr(TokenHeader, good)}, 200},
		{"a configured host", rawRequest{method: "GET", path: "/work-dir", host: "Sandbox.Internal:80", header: hdr(TokenHeader, good)}, 200},
		{"localhost with a trailing dot", rawRequest{method: "GET", path: "/work-dir", host: "localhost.:4100", header: hdr(TokenHeader, good)}, 200},
		{"IPv4-mapped loopback", rawRequest{method: "GET", path: "/work-dir", host: "[::ffff:127.0.0.1]:4100", header: hdr(TokenHeader, good)}, 200},
		{"a short form a browser normalises", rawRequest{method: "GET", path: "/work-dir", host: "127.1", header: hdr(TokenHeader, good)}, 403},
		{"brackets around a name", rawRequest{method: "GET", path: "/work-dir", host: "[localhost]", header: hdr(TokenHeader, good)}, 403},
		{"a preview page's Origin", rawRequest{method: "GET", path: "/work-dir",
			header: hdr(TokenHeader, good, "Origin", "http://3000-abc.localhost:4025")}, 403},
		{"a page on localhost", rawRequest{method: "GET", path: "/work-dir",
			header: hdr(TokenHeader, good, "Origin", "http://localhost:3000", "Sec-Fetch-Site", "cross-site")}, 200},
		{"a same-site navigation", rawRequest{method: "GET", path: "/version", header: hdr("Sec-Fetch-Site", "same-site")}, 200},
		{"a body-less route with a JSON type", rawRequest{method: "DELETE", path: "/process/session/none",
			header: hdr(TokenHeader, good, "Content-Type", json)}, 404},
		// The official TypeScript SDK's createFolder: axios in Node labels
		// an empty POST as a form.
		{"an empty POST labelled as a form", rawRequest{path: "/files/folder?path=made",
			header: hdr("Content-Type", "application/x-www-form-urlencoded", TokenHeader, good)}, 201},

		{"the version without a token", rawRequest{method: "GET", path: "/version"}, 200},
		{"the probe without a token", rawRequest{method: "GET", path: "/api/info"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.raw(t, tt.req)
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			assert.NotContains(t, string(resp.body), good, "the token is never echoed")
			assert.NotContains(t, string(resp.body), wrong, "nor what was presented")
			if tt.status >= 400 && tt.status != 404 {
				e := resp.apiErr(t)
				assert.Equal(t, tt.req.pathOnly(), e.Path)
			}
			if tt.status == 401 {
				assert.Equal(t, "UNAUTHORIZED", resp.apiErr(t).Code)
				assert.Contains(t, resp.header.Get("WWW-Authenticate"), "Bearer")
			}
			if tt.status == 415 {
				assert.Equal(t, "UNSUPPORTED_MEDIA_TYPE", resp.apiErr(t).Code)
			}
		})
	}
	_, err := os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "no refused request ran its command")
	assert.NotContains(t, logs.String(), good)
	assert.NotContains(t, logs.String(), wrong)
}

func (r rawRequest) pathOnly() string {
	p, _, _ := strings.Cut(r.path, "?")
	return p
}

func TestProbeRevealsPIDAndPathsOnlyWithTheToken(t *testing.T) {
	ts := newTestServer(t, Options{Version: "v9", SandboxID: "sbx-7"})
	var open map[string]any
	ts.raw(t, rawRequest{method: "GET", path: "/api/info"}).json(t, &open)
	assert.Equal(t, map[string]any{"name": Name, "version": "v9", "sandboxId": "sbx-7"}, open)

	var full map[string]any
	ts.get(t, "/api/info").json(t, &full)
	assert.Equal(t, float64(os.Getpid()), full["pid"])
	assert.Equal(t, ts.workDir, full["workDir"])
}

func TestUploadWithTheTokenStillWorks(t *testing.T) {
	ts := newTestServer(t, Options{})
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, err := mw.CreateFormFile("file", "hello.txt")
	require.NoError(t, err)
	_, err = fw.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, mw.Close())

	refused := ts.raw(t, rawRequest{path: "/files/upload?path=hello.txt", body: b.String(),
		header: map[string]string{"Content-Type": mw.FormDataContentType()}})
	require.Equal(t, http.StatusUnauthorized, refused.status, "body: %s", refused.body)

	resp := ts.do(t, http.MethodPost, "/files/upload?path=hello.txt", &b, mw.FormDataContentType())
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	got, err := os.ReadFile(filepath.Join(ts.workDir, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
}

func TestWithoutATokenOnlyTheTokenCheckIsOff(t *testing.T) {
	s, err := newServer(Options{WorkDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ts := &testServer{server: s, url: newHTTPTest(t, s)}
	resp := ts.raw(t, rawRequest{path: "/process/execute", body: `{"command":"true"}`,
		header: map[string]string{"Content-Type": "application/json"}})
	assert.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	resp = ts.raw(t, rawRequest{path: "/process/execute", body: `{"command":"true"}`, host: "evil.com",
		header: map[string]string{"Content-Type": "application/json"}})
	assert.Equal(t, http.StatusForbidden, resp.status)
	resp = ts.raw(t, rawRequest{path: "/process/execute", body: `{"command":"true"}`,
		header: map[string]string{"Content-Type": "text/plain"}})
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.status)
}
