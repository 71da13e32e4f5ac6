package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/drivertest"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/wire"
)

func newTestServer(t *testing.T, token string) (*httptest.Server, *manager.Manager) {
	t.Helper()
	return newTestServerIn(t, t.TempDir(), token)
}

// newTestServerIn is newTestServer on an existing root.
func newTestServerIn(t *testing.T, root, token string) (*httptest.Server, *manager.Manager) {
	t.Helper()
	return newTestServerWith(t, root, Options{Token: token, Containment: "pid-namespace"})
}

// newTestServerWith is newTestServerIn with more of the server's options;
// Manager, Hub and Version are its own.
func newTestServerWith(t *testing.T, root string, opts Options) (*httptest.Server, *manager.Manager) {
	t.Helper()
	hub := NewHub(nil)
	m, err := manager.New(manager.Options{
		OnEvent:   hub.Publish,
		Root:      root,
		Runtimes:  map[provider.Runtime]driver.Driver{provider.RuntimeNative: drivertest.New(provider.RuntimeNative)},
		Snapshots: map[string]manager.Snapshot{manager.DefaultSnapshot: {Command: []string{"w"}, Ready: "none"}},
		Clock:     clocktest.NewFake(time.Time{}),
		PortMin:   15100,
		PortMax:   15199,
	})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	opts.Manager, opts.Hub, opts.Version = m, hub, "test"
	s, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, m
}

type answer struct {
	status int
	body   string
	header http.Header
}

func do(t *testing.T, ts *httptest.Server, method, path, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}
}

func errorCode(t *testing.T, a answer) provider.ErrorCode {
	t.Helper()
	var e wire.ErrorResponse
	require.NoError(t, json.Unmarshal([]byte(a.body), &e), a.body)
	assert.NotEmpty(t, e.Error.Message)
	assert.Equal(t, "application/json", a.header.Get("Content-Type"))
	return e.Error.Code
}

func TestErrorsAreCodedAndMapped(t *testing.T) {
	ts, _ := newTestServer(t, "")
	do(t, ts, "POST", "/v1/sandboxes", `{"id":"taken"}`)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     provider.ErrorCode
	}{
		{"unknown field", "POST", "/v1/sandboxes", `{"bogus":1}`, 400, provider.InvalidArgument},
		{"wrong type", "POST", "/v1/sandboxes", `{"labels":"x"}`, 400, provider.InvalidArgument},
		{"bad id pattern", "POST", "/v1/sandboxes", `{"id":"a b"}`, 400, provider.InvalidArgument},
		{"negative autostop", "POST", "/v1/sandboxes", `{"autoStopInterval":-1}`, 400, provider.InvalidArgument},
		{"unknown runtime", "POST", "/v1/sandboxes", `{"runtime":"vm"}`, 400, provider.InvalidArgument},
		{"not json", "POST", "/v1/sandboxes", `{`, 400, provider.InvalidArgument},
		{"conflict", "POST", "/v1/sandboxes", `{"id":"taken"}`, 409, provider.AlreadyExists},
		{"unknown snapshot", "POST", "/v1/sandboxes", `{"snapshot":"nope"}`, 422, provider.PreflightFailed},
		{"missing", "GET", "/v1/sandboxes/nope", ``, 404, provider.NotFound},
		{"missing stop", "POST", "/v1/sandboxes/nope/stop", ``, 404, provider.NotFound},
		{"autostop body", "POST", "/v1/sandboxes/taken/autostop", `{}`, 400, provider.InvalidArgument},
		{"autostop negative", "POST", "/v1/sandboxes/taken/autostop", `{"interval":-2}`, 400, provider.InvalidArgument},
		{"port range", "GET", "/v1/sandboxes/taken/preview-url?port=99999", ``, 400, provider.InvalidArgument},
		{"port type", "GET", "/v1/sandboxes/taken/preview-url?port=abc", ``, 400, provider.InvalidArgument},
		{"bad filter", "GET", "/v1/sandboxes?labels.a=b", ``, 400, provider.InvalidArgument},
		{"unknown route", "GET", "/v1/nothing", ``, 404, provider.NotFound},
		{"wrong method", "PUT", "/v1/sandboxes", ``, 405, provider.InvalidArgument},
		{"wrong method on a sandbox", "PUT", "/v1/sandboxes/taken", `{}`, 405, provider.InvalidArgument},
		{"unknown page", "GET", "/nothing", ``, 404, provider.NotFound},
		{"body too large", "POST", "/v1/sandboxes", `{"labels":{"a":"` + strings.Repeat("x", maxBody) + `"}}`, 413, provider.InvalidArgument},
		{"a second JSON value", "POST", "/v1/sandboxes", `{"name":"first"} {"name":"second"}`, 400, provider.InvalidArgument},
		{"trailing garbage", "POST", "/v1/sandboxes", `{"name":"first"}garbage`, 400, provider.InvalidArgument},
		{"trailing data on a setter", "POST", "/v1/sandboxes/taken/autostop", `{"interval":3}{"interval":0}`, 400, provider.InvalidArgument},
		{"NUL in an env value", "POST", "/v1/sandboxes", `{"envVars":{"K":"a\u0000b"}}`, 400, provider.InvalidArgument},
		{"label key too long", "POST", "/v1/sandboxes", `{"labels":{"` + strings.Repeat("k", manager.MaxLabelKeyLen+1) + `":"v"}}`, 400, provider.InvalidArgument},
		{"too many labels", "POST", "/v1/sandboxes", `{"labels":{` + manyLabels(manager.MaxLabels+1) + `}}`, 400, provider.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, ts, tt.method, tt.path, tt.body)
			assert.Equal(t, tt.status, a.status, a.body)
			assert.Equal(t, tt.code, errorCode(t, a))
		})
	}
}

// A method a path does not take is 405 with the methods it takes, as HTTP
// says, for each shape of path.
func TestWrongMethodSaysWhatThePathTakes(t *testing.T) {
	ts, _ := newTestServer(t, "")
	tests := []struct{ method, path, allow string }{
		{"PUT", "/v1/sandboxes", "GET, POST"},
		{"PUT", "/v1/sandboxes/any", "DELETE, GET"},
		{"GET", "/v1/sandboxes/any/stop", "POST"},
		{"DELETE", "/v1/info", "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			a := do(t, ts, tt.method, tt.path, "")
			require.Equal(t, http.StatusMethodNotAllowed, a.status, a.body)
			assert.Equal(t, tt.allow, a.header.Get("Allow"))
			assert.Contains(t, a.body, "it takes "+tt.allow)
		})
	}
}

// A body the contract refuses is explained in a reader's words: the field
// and the rule, never a regular expression or the validator's own phrasing.
func TestValidationMessagesNameTheFieldAndTheRule(t *testing.T) {
	ts, _ := newTestServer(t, "")
	tests := []struct{ path, body, want string }{
		{"/v1/sandboxes", `{"name":"bad name!"}`, `request body: name "bad name!" must be 1 to 57 lowercase letters, digits or '-', beginning and ending with a letter or digit: it is part of the preview host <port>-<id>.localhost, a DNS label`},
		{"/v1/sandboxes", `{"id":"-x"}`, `request body: id "-x" must be 1 to 57 lowercase letters, digits or '-'`},
		{"/v1/sandboxes", `{"bogus":1}`, `request body: property "bogus" is unsupported`},
		{"/v1/sandboxes", `{"labels":"x"}`, `request body: labels: value must be an object`},
	}
	for _, tt := range tests {
		a := do(t, ts, "POST", tt.path, tt.body)
		require.Equal(t, 400, a.status, a.body)
		var e wire.ErrorResponse
		require.NoError(t, json.Unmarshal([]byte(a.body), &e))
		assert.Contains(t, e.Error.Message, tt.want)
		assert.NotContains(t, e.Error.Message, "regular expression")
	}
}

// Every field of a create is optional, and so is the body: none is {}.
func TestCreateWithoutABodyTakesEveryDefault(t *testing.T) {
	ts, _ := newTestServer(t, "")
	a := do(t, ts, "POST", "/v1/sandboxes", "")
	require.Equal(t, 201, a.status, a.body)
	var s provider.Sandbox
	require.NoError(t, json.Unmarshal([]byte(a.body), &s))
	assert.Equal(t, provider.StateStarted, s.State)
	assert.Equal(t, "default", s.Snapshot)
}

func manyLabels(n int) string {
	pairs := make([]string, n)
	for i := range pairs {
		pairs[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(pairs, ",")
}

// A body whose size header alone is over the limit is refused before it is
// read; blanks after the JSON value are fine.
func TestBodyLimits(t *testing.T) {
	ts, _ := newTestServer(t, "")
	req, err := http.NewRequest("POST", ts.URL+"/v1/sandboxes", strings.NewReader("{}"))
	require.NoError(t, err)
	req.ContentLength = maxBody + 1
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil { // the server may hang up before reading what was declared
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	a := do(t, ts, "POST", "/v1/sandboxes", "{\"name\":\"blanks\"}\n\t \n")
	assert.Equal(t, 201, a.status, a.body)
}

func TestLifecycleOverHTTP(t *testing.T) {
	ts, _ := newTestServer(t, "")
	a := do(t, ts, "POST", "/v1/sandboxes", `{"name":"web","labels":{"origin":"cli","team":"a"}}`)
	require.Equal(t, 201, a.status, a.body)
	var s provider.Sandbox
	require.NoError(t, json.Unmarshal([]byte(a.body), &s))
	assert.Equal(t, provider.StateStarted, s.State)

	do(t, ts, "POST", "/v1/sandboxes", `{"labels":{"origin":"web-ui"}}`)
	var list wire.SandboxList
	a = do(t, ts, "GET", "/v1/sandboxes?label.origin=cli&label.team=a", "")
	require.Equal(t, 200, a.status)
	require.NoError(t, json.Unmarshal([]byte(a.body), &list))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "web", list.Items[0].Name)

	assert.Equal(t, 204, do(t, ts, "POST", "/v1/sandboxes/web/refresh-activity", "").status)
	a = do(t, ts, "POST", "/v1/sandboxes/web/autostop", `{"interval":0}`)
	assert.Equal(t, 200, a.status)
	assert.Contains(t, a.body, `"autoStopInterval":0`)
	assert.Equal(t, 200, do(t, ts, "POST", "/v1/sandboxes/web/resize", `{"cpu":2}`).status)
	a = do(t, ts, "GET", "/v1/sandboxes/web/preview-url", "")
	assert.Equal(t, 200, a.status)
	var preview provider.Preview
	require.NoError(t, json.Unmarshal([]byte(a.body), &preview))
	assert.Regexp(t, `^http://127\.0\.0\.1:[0-9]+$`, preview.URL)
	assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, preview.Token, "the sandbox's secret, URL-safe")
	assert.Equal(t, "no-store", a.header.Get("Cache-Control"), "no cache keeps the token")
	assert.Equal(t, 200, do(t, ts, "GET", "/v1/sandboxes/web/entrypoint-logs", "").status)
	a = do(t, ts, "POST", "/v1/sandboxes/web/stop", "")
	assert.Equal(t, 200, a.status)
	assert.Contains(t, a.body, `"state":"stopped"`)
	a = do(t, ts, "POST", "/v1/sandboxes/web/start", "")
	assert.Contains(t, a.body, `"state":"started"`)
	assert.Equal(t, 204, do(t, ts, "DELETE", "/v1/sandboxes/web", "").status)
	assert.Equal(t, 204, do(t, ts, "DELETE", "/v1/sandboxes/web", "").status, "idempotent")

	// curl -d sends a form content type; the API takes JSON regardless.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/sandboxes", strings.NewReader(`{"name":"curl"}`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)
}

func TestLoopbackGuards(t *testing.T) {
	ts, _ := newTestServer(t, "")
	tests := []struct {
		name    string
		headers []string
		status  int
	}{
		{"loopback ip", []string{"Host", "127.0.0.1:4025"}, 200},
		{"localhost", []string{"Host", "localhost:4025"}, 200},
		{"ipv6 loopback", []string{"Host", "[::1]:4025"}, 200},
		{"rebinding", []string{"Host", "attacker.example:4025"}, 403},
		{"lan ip", []string{"Host", "192.168.1.5:4025"}, 403},
		{"local origin", []string{"Origin", "http://localhost:5173"}, 200},
		{"foreign origin", []string{"Origin", "https://evil.example"}, 403},
		// The edge cases internal/netguard decides, as the daemon sees them.
		{"localhost with a trailing dot", []string{"Host", "localhost.:4025"}, 200},
		{"localhost in capitals", []string{"Host", "LOCALHOST:4025"}, 200},
		{"ipv4-mapped loopback", []string{"Host", "[::ffff:127.0.0.1]:4025"}, 200},
		{"short form a browser normalises", []string{"Host", "127.1:4025"}, 403},
		{"hex form a browser normalises", []string{"Host", "0x7f.1:4025"}, 403},
		{"brackets around a name", []string{"Host", "[localhost]:4025"}, 403},
		{"a preview page's origin", []string{"Origin", "http://3000-abc.localhost:4025"}, 403},
		{"a file page's origin", []string{"Origin", "null"}, 403},
		{"an origin of another scheme", []string{"Origin", "ftp://localhost"}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, ts, "GET", "/v1/sandboxes", "", tt.headers...)
			assert.Equal(t, tt.status, a.status, a.body)
			if tt.status == 403 {
				assert.Equal(t, provider.PermissionDenied, errorCode(t, a))
			}
		})
	}
	a := do(t, ts, "OPTIONS", "/v1/sandboxes", "", "Origin", "http://127.0.0.1:3000")
	assert.Equal(t, 204, a.status)
	assert.Equal(t, "http://127.0.0.1:3000", a.header.Get("Access-Control-Allow-Origin"))
}

func TestBearerToken(t *testing.T) {
	ts, _ := newTestServer(t, "s3cret-token")
	assert.Equal(t, 401, do(t, ts, "GET", "/v1/sandboxes", "").status)
	assert.Equal(t, 401, do(t, ts, "GET", "/v1/sandboxes", "", "Authorization", "Bearer wrong").status)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		assert.Equal(t, 200, do(t, ts, "GET", "/v1/sandboxes", "", "Authorization", scheme+" s3cret-token").status, "the scheme is case-insensitive: %s", scheme)
	}
	assert.Equal(t, 401, do(t, ts, "GET", "/v1/sandboxes", "", "Authorization", "Basic s3cret-token").status)
	assert.Equal(t, 401, do(t, ts, "GET", "/v1/sandboxes", "", "Authorization", "s3cret-token").status)
	assert.Equal(t, 200, do(t, ts, "GET", "/v1/info", "").status, "probes identify the daemon without the token")
	assert.Equal(t, 401, do(t, ts, "GET", "/v1/events", "").status)

	// No cookie is a credential: a browser sends one of 127.0.0.1 to every
	// port of it, where a sandbox may listen.
	for _, path := range []string{"/v1/sandboxes", "/v1/events", "/open/x"} {
		assert.Equal(t, 401, do(t, ts, "GET", path, "", "Cookie", legacyTokenCookie+"=s3cret-token").status, path)
	}

	// The dashboard: /?token= once moves the token into the fragment, which
	// the page's script keeps in its tab; the server sets no cookie.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(ts.URL + "/?token=s3cret%2Btoken")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/#token=s3cret+token", resp.Header.Get("Location"))
	assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
	assert.Empty(t, resp.Cookies())
}

// With a token, the dashboard's pages answer without it, locked: an empty
// shell that shows nothing of the daemon (no root, no pid, no sandbox) and
// whose script asks for the token. A stale cookie of an older daemon, which
// held the token itself, is cleared.
func TestDashboardWithATokenIsALockedShell(t *testing.T) {
	ts, m := newTestServer(t, "s3cret-token")
	sb, err := m.Create(context.Background(), provider.CreateRequest{Name: "private-name"})
	require.NoError(t, err)

	for _, path := range []string{"/", "/logs/" + sb.ID, "/logs/private-name"} {
		t.Run(path, func(t *testing.T) {
			a := do(t, ts, "GET", path, "", "Cookie", legacyTokenCookie+"=s3cret-token")
			require.Equal(t, 200, a.status, a.body)
			assert.Contains(t, a.body, "data-locked")
			assert.Contains(t, a.body, `<script src="/ui/app.js"`)
			for _, secret := range []string{m.Root(), "private-name", "s3cret-token", strconv.Itoa(os.Getpid())} {
				if secret == "private-name" && strings.HasSuffix(path, "private-name") {
					continue // the page names what its address named
				}
				assert.NotContains(t, a.body, secret)
			}
			assert.NotContains(t, a.body, sb.ID[:8]+"</small>", "no sandbox row")
			if path == "/" {
				assert.Contains(t, a.header.Get("Set-Cookie"), legacyTokenCookie+"=;")
				assert.Contains(t, a.header.Get("Set-Cookie"), "Max-Age=0")
			}
		})
	}
	assert.Equal(t, 200, do(t, ts, "GET", "/ui/app.js", "").status, "the script is the same for everyone")

	// With the token the same page is whole.
	a := do(t, ts, "GET", "/", "", "Authorization", "Bearer s3cret-token")
	require.Equal(t, 200, a.status)
	assert.NotContains(t, a.body, "data-locked")
	assert.Contains(t, a.body, "private-name")
	assert.Contains(t, a.body, m.Root())

	// Everything else stays behind the token.
	for _, path := range []string{"/v1/sandboxes", "/open/" + sb.ID, "/logs/" + sb.ID + "/x", "/metrics"} {
		assert.Equal(t, 401, do(t, ts, "GET", path, "").status, path)
	}
	assert.Equal(t, 401, do(t, ts, "POST", "/", "").status)
}

// Without the token, /v1/info says only what tells a sandplane daemon from a
// squatter: no pid (which would point any local process at the daemon's
// /proc entries) and no root path. With it, or without a token configured,
// it is complete.
func TestInfoWithoutTheTokenTellsOnlyWhatAProbeNeeds(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "users-folder"), 0o700))
	ts, m := newTestServerIn(t, root, "s3cret-token")

	tests := []struct {
		name    string
		headers []string
		full    bool
		auth    wire.AuthState
		why     string
	}{
		{"no credentials", nil, false, wire.AuthRequired, "this request carried no token: send Authorization: Bearer <token>"},
		{"wrong token", []string{"Authorization", "Bearer wrong"}, false, wire.AuthRequired, "this request's bearer token is not the daemon's"},
		{"token", []string{"Authorization", "Bearer s3cret-token"}, true, wire.AuthAuthenticated, "this request carried the daemon's token"},
		{"an older daemon's cookie", []string{"Cookie", legacyTokenCookie + "=s3cret-token"}, false, wire.AuthRequired, "carried no token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, ts, "GET", "/v1/info", "", tt.headers...)
			require.Equal(t, 200, a.status, a.body)
			var raw map[string]any
			require.NoError(t, json.Unmarshal([]byte(a.body), &raw))
			assert.Equal(t, "sandplane", raw["name"])
			assert.Equal(t, "test", raw["version"])
			assert.Equal(t, apiVersion, raw["apiVersion"])
			var info wire.Info
			require.NoError(t, json.Unmarshal([]byte(a.body), &info))
			assert.Equal(t, tt.auth, info.Auth.State, "the caller learns what its token is worth")
			assert.Contains(t, info.Auth.Why, tt.why)
			assert.False(t, info.Auth.Since.IsZero(), "the evidence says when it was taken")
			assert.NotContains(t, a.body, "wrong", "the token sent is never echoed")
			if !tt.full {
				assert.ElementsMatch(t, []string{"name", "version", "apiVersion", "auth"}, keys(raw), a.body)
				assert.NotContains(t, a.body, m.Root())
				return
			}
			assert.EqualValues(t, os.Getpid(), raw["pid"])
			assert.Equal(t, m.Root(), raw["rootDir"])
			assert.Contains(t, a.body, filepath.Join(m.Root(), "users-folder"), "folders that are not sandboxes are reported")
		})
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestInfoAndDashboard(t *testing.T) {
	ts, m := newTestServer(t, "")
	_, err := m.Create(context.Background(), provider.CreateRequest{Name: "shown"})
	require.NoError(t, err)
	a := do(t, ts, "GET", "/v1/info", "")
	var info wire.Info
	require.NoError(t, json.Unmarshal([]byte(a.body), &info))
	assert.Equal(t, "sandplane", info.Name)
	assert.Equal(t, os.Getpid(), info.PID, "without a token configured, info is complete")
	assert.Equal(t, m.Root(), info.RootDir)
	assert.Equal(t, apiVersion, info.APIVersion)
	assert.Equal(t, []string{manager.DefaultSnapshot}, info.Snapshots)
	assert.Equal(t, wire.PIDNamespace, info.Containment)
	assert.Equal(t, wire.AuthAuthenticated, info.Auth.State, "a daemon without a token takes every local caller")
	a = do(t, ts, "GET", "/", "")
	assert.Equal(t, 200, a.status)
	assert.Contains(t, a.body, "shown")
}

// FuzzCreateRequest feeds arbitrary bodies through validation and the
// manager: whatever arrives, the answer is a 201 or a coded error, never a
// panic or a 500.
func FuzzCreateRequest(f *testing.F) {
	for _, seed := range []string{`{}`, `{"name":"a"}`, `{"id":"x","labels":{"a":"b"},"envVars":{"K":"v"}}`, `{"autoStopInterval":-1}`, `[]`, `null`, `{"runtime":"docker"}`} {
		f.Add(seed)
	}
	ts, m := newTestServerF(f)
	f.Fuzz(func(t *testing.T, body string) {
		a := do(t, ts, "POST", "/v1/sandboxes", body)
		if a.status == 201 {
			var s provider.Sandbox
			require.NoError(t, json.Unmarshal([]byte(a.body), &s))
			_ = m.Delete(context.Background(), s.ID)
			return
		}
		assert.Less(t, a.status, 500, a.body)
		errorCode(t, a)
	})
}

// FuzzLabelFilter does the same for list queries. A query that cannot be
// part of a request line (blanks, control characters) never reaches the
// daemon: net/http answers it with its own plain-text 400, so such inputs
// are skipped.
func FuzzLabelFilter(f *testing.F) {
	for _, seed := range []string{"label.a=b", "label.=x", "labels.a=b", "label.a=b&label.a=c", "%zz", "label.a%3Db=c", " ", "a\x00b"} {
		f.Add(seed)
	}
	ts, _ := newTestServerF(f)
	f.Fuzz(func(t *testing.T, query string) {
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			t.Skip("not a valid request line")
		}
		if _, err := http.NewRequest("GET", ts.URL+"/v1/sandboxes?"+query, nil); err != nil {
			t.Skipf("not a valid URL: %v", err)
		}
		a := do(t, ts, "GET", "/v1/sandboxes?"+query, "")
		if a.status != 200 {
			assert.Less(t, a.status, 500, a.body)
			errorCode(t, a)
		}
	})
}

func newTestServerF(f *testing.F) (*httptest.Server, *manager.Manager) {
	hub := NewHub(nil)
	m, err := manager.New(manager.Options{
		OnEvent:   hub.Publish,
		Root:      f.TempDir(),
		Runtimes:  map[provider.Runtime]driver.Driver{provider.RuntimeNative: drivertest.New(provider.RuntimeNative)},
		Snapshots: map[string]manager.Snapshot{manager.DefaultSnapshot: {Command: []string{"w"}, Ready: "none"}},
		Clock:     clocktest.NewFake(time.Time{}),
		PortMin:   15200,
		PortMax:   15999,
	})
	require.NoError(f, err)
	f.Cleanup(m.Close)
	s, err := New(Options{Manager: m, Hub: hub, Version: "test"})
	require.NoError(f, err)
	f.Cleanup(func() { _ = s.Close() })
	ts := httptest.NewServer(s.Handler())
	f.Cleanup(ts.Close)
	return ts, m
}
