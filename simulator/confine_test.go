package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/backend"
	"github.com/sandplane/sandplane/toolbox/wire"
)

// bystander is a server on another loopback port of the host, such as the
// local daemon: nothing of a sandbox, so no proxy request may reach it.
type bystander struct {
	port int
	hits atomic.Int32
}

func newBystander(t *testing.T) *bystander {
	t.Helper()
	b := &bystander{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		_, _ = io.WriteString(w, `{"items":["a secret of the bystander"]}`)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	b.port, err = strconv.Atoi(u.Port())
	require.NoError(t, err)
	return b
}

// request is one request to the simulator; host, when set, replaces the
// Host header (the host-routed preview form).
type request struct {
	method, path, host, token, key string
	body                           string
}

func (h *harness) send(rq request) (int, string) {
	h.t.Helper()
	if rq.method == "" {
		rq.method = http.MethodGet
	}
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, h.srv.URL+rq.path, body)
	require.NoError(h.t, err)
	if rq.host != "" {
		req.Host = rq.host
	}
	if rq.token != "" {
		req.Header.Set(previewTokenHeader, rq.token)
	}
	if rq.key != "" {
		req.Header.Set("Authorization", "Bearer "+rq.key)
	}
	if rq.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, string(b)
}

// shell runs command in sandbox id through the toolbox proxy and returns
// its output.
func (h *harness) shell(id, command string) string {
	h.t.Helper()
	code, res, body := h.execute(id, map[string]any{"command": command})
	require.Equal(h.t, http.StatusOK, code, string(body))
	require.Equal(h.t, 0, res.ExitCode, res.Result)
	return res.Result
}

// toolboxPort is the port sandbox id's toolbox listens on ($PORT).
func (h *harness) toolboxPort(id string) int {
	h.t.Helper()
	port, err := strconv.Atoi(strings.TrimSpace(h.shell(id, "echo $PORT")))
	require.NoError(h.t, err)
	return port
}

// serveInside starts a second toolbox inside sandbox id, in the
// background, and returns its port once it accepts connections.
func (h *harness) serveInside(id string) int {
	h.t.Helper()
	port, err := freePort()
	require.NoError(h.t, err)
	out := h.shell(id, fmt.Sprintf("PORT=%d nohup %s >/dev/null 2>&1 & echo $!", port, toolboxBinary(h.t)))
	// The pid is the server's in the sandbox's PID namespace, meaningless
	// here: deleting the sandbox ends the namespace, this server included.
	_, err = strconv.Atoi(strings.TrimSpace(out))
	require.NoError(h.t, err, out)
	require.Eventually(h.t, func() bool {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the server inside the sandbox never listened")
	return port
}

func previewPath(port int, label, rest string) string {
	return "/_preview/" + strconv.Itoa(port) + "-" + label + rest
}

// assertRefused checks the answer for a port that is not the sandbox's:
// the answer of a port nothing listens on.
func assertRefused(t *testing.T, code int, body string, sandbox string, port int) {
	t.Helper()
	assert.Equal(t, http.StatusBadGateway, code, body)
	var gin wire.ErrorResponse
	require.NoError(t, json.Unmarshal([]byte(body), &gin), body)
	assert.Equal(t, fmt.Sprintf("sandbox workload unreachable: no process of sandbox %s listens on port %d", sandbox, port), gin.Message)
}

func TestPreviewReachesOnlyTheSandboxsOwnPorts(t *testing.T) {
	h := nativeHarness(t)
	daemon := newBystander(t)
	a := h.create(apiclient.CreateSandbox{Name: ptr("a")})
	b := h.create(apiclient.CreateSandbox{Name: ptr("b")})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, a.GetState(), a.GetErrorReason())
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, b.GetState(), b.GetErrorReason())
	link, _, err := h.api.SandboxAPI.GetPortPreviewUrl(h.ctx, a.Id, 3000).Execute()
	require.NoError(t, err)
	token := link.Token
	aPort, bPort := h.toolboxPort(a.Id), h.toolboxPort(b.Id)
	su, err := url.Parse(h.srv.URL)
	require.NoError(t, err)
	simPort, err := strconv.Atoi(su.Port())
	require.NoError(t, err)

	refused := []struct {
		name string
		port int
		rq   request
	}{
		{"another loopback port, path form", daemon.port,
			request{path: previewPath(daemon.port, a.Id, "/v1/sandboxes"), token: token}},
		{"another loopback port, host form", daemon.port,
			request{path: "/v1/sandboxes", host: fmt.Sprintf("%d-%s.preview.localhost", daemon.port, a.Id), token: token}},
		{"the simulator's own port", simPort,
			request{path: previewPath(simPort, a.Id, "/api/sandbox"), token: token, key: testKey}},
		{"another sandbox's toolbox", bPort,
			request{method: http.MethodPost, path: previewPath(bPort, a.Id, "/process/execute"), token: token, body: `{"command":"echo pwned"}`}},
	}
	for _, tt := range refused {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			code, body := h.send(tt.rq)
			assertRefused(t, code, body, a.Id, tt.port)
		})
	}
	assert.Zero(t, daemon.hits.Load(), "a preview request reached a port that is not the sandbox's")

	t.Run("a signed URL for a foreign port", func(t *testing.T) {
		signed, _, err := h.api.SandboxAPI.GetSignedPortPreviewUrl(h.ctx, a.Id, int32(daemon.port)).Execute()
		require.NoError(t, err)
		u, err := url.Parse(signed.Url)
		require.NoError(t, err)
		code, body := h.send(request{path: u.Path + "/v1/sandboxes"})
		assertRefused(t, code, body, a.Id, daemon.port)
		assert.Zero(t, daemon.hits.Load())
	})

	t.Run("the sandbox's own toolbox port", func(t *testing.T) {
		code, body := h.send(request{path: previewPath(aPort, a.Id, "/version"), token: token})
		assert.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, "sim-test")
	})

	t.Run("a port the sandbox opened a moment ago", func(t *testing.T) {
		port := h.serveInside(a.Id)
		code, body := h.send(request{path: previewPath(port, a.Id, "/version"), token: token})
		assert.Equal(t, http.StatusOK, code, body)
		code, _ = h.send(request{path: "/version", host: fmt.Sprintf("%d-%s.preview.localhost", port, a.Id), token: token})
		assert.Equal(t, http.StatusOK, code, "the host form")
		// The same port is not b's.
		btoken, _, err := h.api.SandboxAPI.GetPortPreviewUrl(h.ctx, b.Id, float32(port)).Execute()
		require.NoError(t, err)
		code, body = h.send(request{path: previewPath(port, b.Id, "/version"), token: btoken.Token})
		assertRefused(t, code, body, b.Id, port)
	})
}

func TestPublicPreviewNeedsNoTokenForOwnPortsOnly(t *testing.T) {
	h := nativeHarness(t)
	daemon := newBystander(t)
	private := h.create(apiclient.CreateSandbox{Name: ptr("private")})
	public := h.create(apiclient.CreateSandbox{Name: ptr("public"), Public: ptr(true)})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, public.GetState(), public.GetErrorReason())
	own, other := h.toolboxPort(public.Id), h.toolboxPort(private.Id)

	code, body := h.send(request{path: previewPath(own, public.Id, "/version")})
	assert.Equal(t, http.StatusOK, code, "a public sandbox's own port needs no token: %s", body)
	code, body = h.send(request{path: previewPath(daemon.port, public.Id, "/v1/sandboxes")})
	assertRefused(t, code, body, public.Id, daemon.port)
	code, body = h.send(request{method: http.MethodPost, path: previewPath(other, public.Id, "/process/execute"), body: `{"command":"id"}`})
	assertRefused(t, code, body, public.Id, other)
	assert.Zero(t, daemon.hits.Load())

	code, _ = h.send(request{path: previewPath(other, private.Id, "/version")})
	assert.Equal(t, http.StatusUnauthorized, code, "a private sandbox wants its token")
}

// seenHeaders is what the test toolbox's GET /_test/headers answers.
type seenHeaders struct {
	Host   string      `json:"host"`
	Header http.Header `json:"header"`
}

func TestToolboxGetsTheSandboxSecretNeverTheCallersCredentials(t *testing.T) {
	h := nativeHarness(t)
	a := h.create(apiclient.CreateSandbox{})
	b := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, a.GetState(), a.GetErrorReason())
	secret := h.shell(a.Id, "printf %s \"$"+TokenEnv+"\"")
	assert.Regexp(t, `^[A-Za-z0-9_-]{43,}$`, secret, "32 random bytes or more, URL-safe")
	assert.NotEqual(t, secret, h.shell(b.Id, "printf %s \"$"+TokenEnv+"\""), "each sandbox has its own")

	t.Run("kept 0600 in the sandbox's state directory", func(t *testing.T) {
		// The sandbox sees its home at /home/daytona; the state directory
		// is where the backend keeps it.
		p := filepath.Join(h.root, "sandboxes", a.Id, backend.TokenFile)
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		stored, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, secret, string(stored))
	})

	link, _, err := h.api.SandboxAPI.GetPortPreviewUrl(h.ctx, a.Id, 3000).Execute()
	require.NoError(t, err)
	code, body := h.send(request{path: "/toolbox/" + a.Id + "/_test/headers", key: testKey, token: link.Token})
	require.Equal(t, http.StatusOK, code, body)
	var seen seenHeaders
	require.NoError(t, json.Unmarshal([]byte(body), &seen), body)
	assert.Equal(t, []string{secret}, seen.Header.Values(previewTokenHeader), "the toolbox gets the sandbox's secret, not the caller's token")
	assert.Empty(t, seen.Header.Values("Authorization"), "the toolbox never sees the API key")
	assert.NotContains(t, body, testKey)

	t.Run("preview traffic carries no secret", func(t *testing.T) {
		code, body := h.send(request{path: previewPath(h.toolboxPort(a.Id), a.Id, "/_test/headers"), key: testKey, token: link.Token})
		require.Equal(t, http.StatusOK, code, body)
		var seen seenHeaders
		require.NoError(t, json.Unmarshal([]byte(body), &seen), body)
		assert.Empty(t, seen.Header.Values(previewTokenHeader))
		assert.Empty(t, seen.Header.Values("Authorization"))
		assert.NotContains(t, body, secret)
		assert.NotContains(t, body, link.Token)
	})

	t.Run("the same secret after a restart", func(t *testing.T) {
		_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, a.Id).Execute()
		require.NoError(t, err)
		h.waitState(a.Id, apiclient.SANDBOXSTATE_STOPPED)
		_, _, err = h.api.SandboxAPI.StartSandbox(h.ctx, a.Id).Execute()
		require.NoError(t, err)
		h.waitState(a.Id, apiclient.SANDBOXSTATE_STARTED)
		assert.Equal(t, secret, h.shell(a.Id, "printf %s \"$"+TokenEnv+"\""))
	})
}

func TestHostGuard(t *testing.T) {
	tests := []struct {
		name, base, host string
		anyHost          bool
		refused          bool
	}{
		{name: "loopback address", host: "127.0.0.1:4026"},
		{name: "another loopback address", host: "127.0.0.2"},
		{name: "IPv6 loopback", host: "[::1]:4026"},
		{name: "localhost", host: "localhost:4026"},
		{name: "a name under localhost", host: "app.localhost"},
		{name: "a preview name under localhost", host: "3000-abc.localhost:4026"},
		{name: "a rebinding name", host: "evil.example:4026", refused: true},
		{name: "a rebinding name that looks loopback", host: "127.0.0.1.evil.example", refused: true},
		{name: "a preview name elsewhere", host: "3000-abc.evil.example", refused: true},
		{name: "a network address", host: "192.0.2.1:4026", refused: true},
		{name: "the base URL's host", base: "https://sim.example.com", host: "sim.example.com"},
		{name: "a preview name under the base", base: "https://sim.example.com", host: "3000-abc.sim.example.com"},
		{name: "another name under the base", base: "https://sim.example.com", host: "x.y.sim.example.com", refused: true},
		{name: "any host on a network listener", anyHost: true, host: "evil.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.BaseURL, c.AnyHost = tt.base, tt.anyHost
				if tt.anyHost {
					c.APIKeys = []string{testKey}
				}
			})
			code, body := h.send(request{path: "/api/sandbox", host: tt.host, key: testKey})
			if tt.refused {
				assert.Equal(t, http.StatusForbidden, code, body)
				assert.Contains(t, h.nestError([]byte(body)).Message, "is not allowed")
				return
			}
			assert.NotEqual(t, http.StatusForbidden, code, body)
		})
	}

	t.Run("any host needs API keys", func(t *testing.T) {
		_, err := New(Config{AnyHost: true})
		assert.ErrorContains(t, err, "needs APIKeys")
	})
}

func TestAdminAPINeedsItsOwnKey(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.APIKeys = []string{testKey} })
	for _, key := range []string{"", testKey, "wrong"} {
		code, body, _ := h.rawAs(key, "GET", "/_sim/info", nil)
		assert.Equal(t, http.StatusUnauthorized, code, "key %q: %s", key, body)
		code, _, _ = h.rawAs(key, "GET", "/_sim/calls?org=all", nil)
		assert.Equal(t, http.StatusUnauthorized, code, "key %q", key)
	}
	code, body, _ := h.rawAs(testAdminKey, "GET", "/_sim/info", nil)
	assert.Equal(t, http.StatusOK, code, body)

	code, body, _ = h.rawWith(http.Header{"Authorization": {"Bearer " + testAdminKey}, AdminAPIKeyHeader: {"not-a-key"}}, "GET", "/_sim/calls", nil)
	assert.Equal(t, http.StatusUnauthorized, code, "the organization's key must be an accepted one: %s", body)

	generated, err := New(Config{})
	require.NoError(t, err)
	defer generated.Close()
	assert.GreaterOrEqual(t, len(generated.AdminKey()), 43, "a generated admin key is 32 random bytes")

	_, err = New(Config{APIKeys: []string{"same"}, AdminKey: "same"})
	assert.Error(t, err, "the admin key must not be an API key")
}

func TestAdminAPIActsOnOneOrganization(t *testing.T) {
	h := newHarness(t)
	const otherKey = "other-key"
	other := h.as(otherKey)
	mine := h.create(apiclient.CreateSandbox{Name: ptr("mine")})
	theirs, _, err := h.api.SandboxAPI.CreateSandbox(other).CreateSandbox(apiclient.CreateSandbox{Name: ptr("theirs")}).Execute()
	require.NoError(t, err)
	theirGet := func() int {
		_, resp, _ := h.api.SandboxAPI.GetSandbox(other, theirs.Id).Execute()
		require.NotNil(t, resp)
		return resp.StatusCode
	}
	asOther := http.Header{"Authorization": {"Bearer " + testAdminKey}, AdminAPIKeyHeader: {otherKey}}

	code, body, _ := h.rawAs(testAdminKey, "GET", "/_sim/calls", nil)
	assert.Equal(t, http.StatusBadRequest, code, "a call must name its organization")
	assert.Contains(t, h.nestError(body).Message, "?org=all")

	t.Run("faults", func(t *testing.T) {
		code, body, _ := h.admin("POST", "/_sim/faults", Fault{Op: "getSandbox", Status: 503})
		require.Equal(t, http.StatusCreated, code, string(body))
		assert.Equal(t, http.StatusOK, theirGet(), "a fault of mine does not touch their requests")
		code, _, _ = h.raw("GET", "/api/sandbox/"+mine.Id, nil)
		assert.Equal(t, http.StatusServiceUnavailable, code)

		code, body, _ = h.rawWith(asOther, "GET", "/_sim/faults", nil)
		require.Equal(t, http.StatusOK, code)
		assert.JSONEq(t, "[]", string(body), "they do not see my faults")
		code, _, _ = h.rawWith(asOther, "DELETE", "/_sim/faults", nil)
		require.Equal(t, http.StatusNoContent, code)
		code, _, _ = h.raw("GET", "/api/sandbox/"+mine.Id, nil)
		assert.Equal(t, http.StatusServiceUnavailable, code, "their clear left my fault")

		code, body, _ = h.admin("POST", "/_sim/faults", Fault{Op: "getSandbox", Status: 500, Org: orgOf(otherKey)})
		assert.Equal(t, http.StatusBadRequest, code, "no fault for another organization: %s", body)

		code, _, _ = h.admin("PUT", "/_sim/faults/random", RandomFaults{Seed: 1, Rate: 1, Ops: []string{"getSandbox"}, Outcomes: []Fault{{Status: 418}}})
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, http.StatusOK, theirGet(), "my random faults do not touch their requests")
		code, _, _ = h.admin("DELETE", "/_sim/faults", nil)
		require.Equal(t, http.StatusNoContent, code)
		code, _, _ = h.raw("GET", "/api/sandbox/"+mine.Id, nil)
		assert.Equal(t, http.StatusOK, code)
	})

	t.Run("calls", func(t *testing.T) {
		var log struct {
			Calls  []Call            `json:"calls"`
			Counts map[string]uint64 `json:"counts"`
		}
		code, body, _ := h.admin("GET", "/_sim/calls", nil)
		require.Equal(t, http.StatusOK, code)
		require.NoError(t, json.Unmarshal(body, &log))
		require.NotEmpty(t, log.Calls)
		for _, c := range log.Calls {
			assert.Equal(t, orgOf(testKey), c.Org, "%+v", c)
			assert.NotEqual(t, theirs.Id, c.SandboxID)
		}
		assert.EqualValues(t, 1, log.Counts["createSandbox"], "their create is not counted")
		code, body, _ = h.rawAs(testAdminKey, "GET", "/_sim/calls?org=all", nil)
		require.Equal(t, http.StatusOK, code)
		require.NoError(t, json.Unmarshal(body, &log))
		assert.EqualValues(t, 2, log.Counts["createSandbox"], "every organization, on request")

		code, _, _ = h.admin("DELETE", "/_sim/calls", nil)
		require.Equal(t, http.StatusNoContent, code)
		code, body, _ = h.rawWith(asOther, "GET", "/_sim/calls", nil)
		require.Equal(t, http.StatusOK, code)
		require.NoError(t, json.Unmarshal(body, &log))
		assert.EqualValues(t, 1, log.Counts["createSandbox"], "my clear left their log")
		assert.NotEmpty(t, log.Calls)
	})

	t.Run("cost and info", func(t *testing.T) {
		code, body, _ := h.admin("GET", "/_sim/cost", nil)
		require.Equal(t, http.StatusOK, code)
		var rep CostReport
		require.NoError(t, json.Unmarshal(body, &rep))
		require.Len(t, rep.Sandboxes, 1)
		assert.Equal(t, mine.Id, rep.Sandboxes[0].ID)

		code, body, _ = h.rawAs(testAdminKey, "GET", "/_sim/info?org="+orgOf(otherKey), nil)
		require.Equal(t, http.StatusOK, code)
		var info Info
		require.NoError(t, json.Unmarshal(body, &info))
		require.NotNil(t, info.Sandboxes)
		assert.Equal(t, 1, *info.Sandboxes)
		code, body, _ = h.rawAs(testAdminKey, "GET", "/_sim/info", nil)
		require.Equal(t, http.StatusOK, code)
		info = Info{}
		require.NoError(t, json.Unmarshal(body, &info))
		assert.Nil(t, info.Sandboxes, "no count without an organization")
	})

	t.Run("vanish", func(t *testing.T) {
		code, _, _ := h.admin("POST", "/_sim/sandboxes/"+theirs.Id+"/vanish", nil)
		assert.Equal(t, http.StatusNotFound, code, "not my sandbox")
		assert.Equal(t, http.StatusOK, theirGet())
		code, _, _ = h.rawWith(asOther, "POST", "/_sim/sandboxes/"+theirs.Id+"/vanish", nil)
		assert.Equal(t, http.StatusNoContent, code)
		assert.Equal(t, http.StatusNotFound, theirGet())
	})
}
