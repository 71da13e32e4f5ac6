package daemon

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func TestHealthAndMetrics(t *testing.T) {
	const token = "metrics-token"
	ts, _ := newTestServer(t, token)
	auth := []string{"Authorization", "Bearer " + token}

	health := do(t, ts, "GET", "/healthz", "")
	assert.Equal(t, http.StatusOK, health.status, "a health probe needs no token")
	assert.JSONEq(t, `{"status":"ok"}`, health.body)

	refused := do(t, ts, "GET", "/metrics", "")
	assert.Equal(t, http.StatusUnauthorized, refused.status, "the metrics are behind the token")
	assert.Equal(t, provider.Unauthenticated, errorCode(t, refused))

	created := do(t, ts, "POST", "/v1/sandboxes", `{"name":"metered-box"}`, auth...)
	require.Equal(t, http.StatusCreated, created.status, created.body)
	require.Equal(t, http.StatusNotFound, do(t, ts, "GET", "/v1/sandboxes/no-such-box", "", auth...).status)

	m := do(t, ts, "GET", "/metrics", "", auth...)
	require.Equal(t, http.StatusOK, m.status)
	for _, want := range []string{
		`sandplane_sandboxes{runtime="native",state="started"} 1`,
		`sandplane_http_requests_total{code="201",route="/v1/sandboxes"} 1`,
		`sandplane_http_requests_total{code="404",route="/v1/sandboxes/{idOrName}"} 1`,
		`sandplane_http_requests_total{code="401",route="/metrics"} 1`,
		`sandplane_events_total{type="sandbox.created"} 1`,
		`sandplane_daemon_info{api_version="v1",version="test"} 1`,
		`sandplane_http_request_duration_seconds_bucket{route="/v1/sandboxes",le="+Inf"} 1`,
		`go_goroutines`,
	} {
		assert.Contains(t, m.body, want)
	}
	assert.NotContains(t, m.body, "metered-box", "no sandbox name or id in a label")
	assert.NotContains(t, m.body, "no-such-box")
}

func TestRouteKeepsIDsOutOfLabels(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/v1/info", "/v1/info"},
		{"/v1/sandboxes", "/v1/sandboxes"},
		{"/v1/sandboxes/abc", "/v1/sandboxes/{idOrName}"},
		{"/v1/sandboxes/abc/stop", "/v1/sandboxes/{idOrName}/stop"},
		{"/v1/sandboxes/abc/preview-url", "/v1/sandboxes/{idOrName}/preview-url"},
		{"/v1/sandboxes/abc/secret-thing", "other"},
		{"/v1/sandboxes/", "other"},
		{"/logs/abc", "/logs/{idOrName}"},
		{"/ui/app.js", "/ui/"},
		{"/healthz", "/healthz"},
		{"/wp-admin/login.php", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			assert.Equal(t, tt.want, route(tt.path))
		})
	}
}
