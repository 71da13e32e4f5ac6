package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

const (
	testKey      = "test-key"
	testAdminKey = "test-admin-key"
)

// harness is one simulator on a loopback server, driven by the official Go
// api-client, on a fake clock. Every API response is validated against the
// upstream document; a violation fails the test at cleanup.
type harness struct {
	t   *testing.T
	sim *Simulator
	clk *clocktest.Fake
	srv *httptest.Server
	api *apiclient.APIClient
	ctx context.Context
	// root is the state directory of a runtime backend's harness.
	root string
}

func newHarness(t *testing.T, configure ...func(*Config)) *harness {
	t.Helper()
	clk := clocktest.NewFake(time.Time{})
	cfg := Config{Clock: clk, ValidateResponses: true, Seed: 42, AdminKey: testAdminKey}
	for _, f := range configure {
		f(&cfg)
	}
	sim, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	h := &harness{t: t, sim: sim, clk: clk, srv: srv}
	h.api = newClient(srv)
	h.ctx = h.as(testKey)
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, sim.Close())
		assert.Empty(t, sim.SpecViolations(), "responses that do not match the upstream OpenAPI document")
	})
	return h
}

func newClient(srv *httptest.Server) *apiclient.APIClient {
	cfg := apiclient.NewConfiguration()
	cfg.Servers = apiclient.ServerConfigurations{{URL: srv.URL + "/api"}}
	cfg.HTTPClient = srv.Client()
	return apiclient.NewAPIClient(cfg)
}

// as is a context that authenticates with key.
func (h *harness) as(key string) context.Context {
	return context.WithValue(context.Background(), apiclient.ContextAccessToken, key)
}

func (h *harness) create(body apiclient.CreateSandbox) *apiclient.Sandbox {
	h.t.Helper()
	sb, _, err := h.api.SandboxAPI.CreateSandbox(h.ctx).CreateSandbox(body).Execute()
	require.NoError(h.t, err)
	return sb
}

func (h *harness) get(idOrName string) *apiclient.Sandbox {
	h.t.Helper()
	sb, _, err := h.api.SandboxAPI.GetSandbox(h.ctx, idOrName).Execute()
	require.NoError(h.t, err)
	return sb
}

// raw sends a request with the test key and returns status and body.
func (h *harness) raw(method, path string, body any) (int, []byte, http.Header) {
	h.t.Helper()
	return h.rawAs(testKey, method, path, body)
}

func (h *harness) rawAs(key, method, path string, body any) (int, []byte, http.Header) {
	h.t.Helper()
	var header http.Header
	if key != "" {
		header = http.Header{"Authorization": {"Bearer " + key}}
	}
	return h.rawWith(header, method, path, body)
}

// admin calls the admin API with the admin key, for the test key's
// organization.
func (h *harness) admin(method, path string, body any) (int, []byte, http.Header) {
	h.t.Helper()
	return h.rawWith(http.Header{"Authorization": {"Bearer " + testAdminKey}, AdminAPIKeyHeader: {testKey}}, method, path, body)
}

// rawWith sends a request with header and returns status, body and header.
func (h *harness) rawWith(header http.Header, method, path string, body any) (int, []byte, http.Header) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(h.t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	require.NoError(h.t, err)
	for k, vs := range header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, b, resp.Header
}

// nestError decodes a NestJS error body and checks its shape.
func (h *harness) nestError(b []byte) nestBody {
	h.t.Helper()
	var e nestBody
	require.NoError(h.t, json.Unmarshal(b, &e), string(b))
	assert.NotEmpty(h.t, e.Path)
	assert.NotEmpty(h.t, e.Timestamp)
	assert.NotEmpty(h.t, e.Error)
	return e
}

// apiStatus is the HTTP status and message of an api-client error.
func apiStatus(t *testing.T, resp *http.Response, err error) (int, string) {
	t.Helper()
	require.Error(t, err)
	require.NotNil(t, resp, "no HTTP response: %v", err)
	var oe *apiclient.GenericOpenAPIError
	msg := ""
	if errors.As(err, &oe) {
		var body nestBody
		if json.Unmarshal(oe.Body(), &body) == nil {
			msg = body.Message
		}
	}
	return resp.StatusCode, msg
}

// eventually advances the fake clock in steps until cond holds.
func (h *harness) advanceUntil(step, limit time.Duration, cond func() bool) {
	h.t.Helper()
	for waited := time.Duration(0); !cond(); waited += step {
		require.Less(h.t, waited, limit, "condition not met after %v of fake time", limit)
		h.clk.Advance(step)
	}
}

// createAsync runs a create that blocks on the fake clock and returns its
// result channel once the request is parked on its 30 s timer.
func (h *harness) createAsync(body apiclient.CreateSandbox) <-chan createResult {
	h.t.Helper()
	out := make(chan createResult, 1)
	waiters := h.clk.Waiters()
	go func() {
		sb, resp, err := h.api.SandboxAPI.CreateSandbox(h.ctx).CreateSandbox(body).Execute()
		out <- createResult{sb, resp, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The create arms its transition timer and its 30 s wait.
	require.NoError(h.t, h.clk.BlockUntilWaiters(ctx, waiters+2))
	return out
}

type createResult struct {
	sb   *apiclient.Sandbox
	resp *http.Response
	err  error
}

func ptr[T any](v T) *T { return &v }
