package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator"
)

// runtimeHarness is a simulator whose sandboxes run `sandplane toolbox` as
// native processes, on the real clock: its URL.
type runtimeHarness struct {
	t   *testing.T
	url string
}

func newRuntimeHarness(t *testing.T) *runtimeHarness {
	t.Helper()
	clk := clock.Real()
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	be, err := simulator.NewRuntimeBackend(simulator.RuntimeBackendConfig{
		Runtime:   native.New(native.WithClock(clk)),
		Clock:     clk,
		Root:      root,
		Command:   []string{testdaemon.Binary(t), "toolbox"},
		StopGrace: 2 * time.Second,
	})
	require.NoError(t, err)
	sim, err := simulator.New(simulator.Config{Clock: clk, APIKeys: []string{testKey}, Backend: be, Seed: 7, ValidateResponses: true})
	if err != nil {
		_ = be.Close()
		require.NoError(t, err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		assert.NoError(t, sim.Close())
		assert.Empty(t, sim.SpecViolations())
	})
	return &runtimeHarness{t: t, url: srv.URL}
}

// provider is a Provider of the harness's simulator over rt (nil for the
// default transport).
func (h *runtimeHarness) provider(rt http.RoundTripper) *Provider {
	h.t.Helper()
	p, err := New(WithAPIKey(testKey), WithAPIURL(h.url+"/api"), WithHTTPClient(&http.Client{Transport: rt}))
	require.NoError(h.t, err)
	return p
}

// snapshot makes an active snapshot named name whose entrypoint is
// entrypoint, through the API, as a host makes its snapshots.
func (h *runtimeHarness) snapshot(name string, entrypoint ...string) {
	h.t.Helper()
	body, err := json.Marshal(map[string]any{"name": name, "imageName": "example/app:1", "entrypoint": entrypoint})
	require.NoError(h.t, err)
	code, b := h.call(http.MethodPost, "/api/snapshots", body)
	require.Equal(h.t, http.StatusOK, code, string(b))
	var state string
	for range 200 {
		code, b = h.call(http.MethodGet, "/api/snapshots/"+name, nil)
		require.Equal(h.t, http.StatusOK, code, string(b))
		var sn struct {
			State string `json:"state"`
		}
		require.NoError(h.t, json.Unmarshal(b, &sn))
		if state = sn.State; state != "pending" && state != "building" && state != "pulling" {
			break
		}
		time.Sleep(10 * time.Millisecond) // the snapshot's build runs on the real clock
	}
	require.Equal(h.t, "active", state)
}

func (h *runtimeHarness) call(method, path string, body []byte) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, b
}

// logsUntil polls the sandbox's entrypoint logs until done says they are
// complete, and returns the last.
func logsUntil(t *testing.T, p *Provider, id string, done func(*provider.EntrypointLogs) bool) *provider.EntrypointLogs {
	t.Helper()
	var logs *provider.EntrypointLogs
	for range 500 {
		var err error
		logs, err = p.EntrypointLogs(context.Background(), id)
		require.NoError(t, err)
		if done(logs) {
			return logs
		}
		time.Sleep(10 * time.Millisecond) // the entrypoint prints on its own time
	}
	t.Fatalf("the entrypoint's logs never were complete: %+v", logs)
	return nil
}

func TestEntrypointLogsOnTheSimulator(t *testing.T) {
	h := newRuntimeHarness(t)
	p := h.provider(nil)
	ctx := context.Background()
	h.snapshot("printer", "sh", "-c", `echo "before $LOG_SECRET after $LOG_SHORT"; echo "warn $LOG_SECRET" >&2; sleep 600`)
	const secret = "log-secret-0123456789"

	t.Run("a snapshot's entrypoint, with the env redacted", func(t *testing.T) {
		sb, err := p.Create(ctx, provider.CreateRequest{Name: "printer", Snapshot: "printer",
			EnvVars: map[string]string{"LOG_SECRET": secret, "LOG_SHORT": "on"}, AutoStopInterval: ptr(0)})
		require.NoError(t, err)
		logs := logsUntil(t, p, sb.ID, func(l *provider.EntrypointLogs) bool { return strings.Contains(l.Stderr, "\n") })
		assert.Equal(t, "before [REDACTED] after on\n", logs.Stdout, "values shorter than four bytes are no secrets")
		assert.Equal(t, "warn [REDACTED]\n", logs.Stderr)
		assert.Equal(t, logs.Stdout+logs.Stderr, logs.Output, "stdout followed by stderr")
		byName, err := p.EntrypointLogs(ctx, "printer")
		require.NoError(t, err)
		assert.Equal(t, logs, byName, "by name")

		_, err = p.Stop(ctx, sb.ID)
		require.NoError(t, err)
		_, err = p.EntrypointLogs(ctx, sb.ID)
		assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "stopped: %v", err)
	})

	t.Run("the default entrypoint prints nothing", func(t *testing.T) {
		sb, err := p.Create(ctx, provider.CreateRequest{Name: "quiet", AutoStopInterval: ptr(0)})
		require.NoError(t, err)
		logs, err := p.EntrypointLogs(ctx, sb.ID)
		require.NoError(t, err)
		assert.Equal(t, &provider.EntrypointLogs{}, logs)
	})

	t.Run("an unknown sandbox", func(t *testing.T) {
		_, err := p.EntrypointLogs(ctx, "nobody")
		assert.Equal(t, provider.NotFound, provider.Code(err), "%v", err)
	})

	t.Run("a toolbox without an entrypoint session", func(t *testing.T) {
		_, err := p.Create(ctx, provider.CreateRequest{Name: "older", AutoStopInterval: ptr(0)})
		require.NoError(t, err)
		// What a toolbox older than the entrypoint session answers.
		older := h.provider(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/process/session/entrypoint/logs") {
				rec := httptest.NewRecorder()
				rec.Header().Set("Content-Type", "application/json")
				rec.WriteHeader(http.StatusNotFound)
				_, _ = rec.WriteString(`{"statusCode":404,"message":"404 page not found"}`)
				return rec.Result(), nil
			}
			return http.DefaultTransport.RoundTrip(r)
		}))
		_, err = older.EntrypointLogs(ctx, "older")
		assert.Equal(t, provider.Unsupported, provider.Code(err), "%v", err)
		assert.Contains(t, provider.Message(err), "no entrypoint session")
	})
}
