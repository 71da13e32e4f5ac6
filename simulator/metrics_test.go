package simulator

import (
	"io"
	"net/http"
	"testing"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	h.get(sb.Id)
	code, _, _ := h.raw("GET", "/api/sandbox/nope", nil)
	require.Equal(t, http.StatusNotFound, code)

	resp, err := http.Get(h.srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	text := string(b)
	for _, want := range []string{
		`sandplane_sim_requests_total{code="200",operation="createSandbox"} 1`,
		`sandplane_sim_requests_total{code="200",operation="getSandbox"} 1`,
		`sandplane_sim_requests_total{code="404",operation="getSandbox"} 1`,
		`sandplane_sim_sandboxes{state="started"} 1`,
		`sandplane_sim_snapshots{state="active"} 1`,
		`sandplane_sim_events_total{event="sandbox.created"} 1`,
		`sandplane_sim_request_duration_seconds_count{operation="createSandbox"} 1`,
		`sandplane_sim_event_clients 0`,
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, testKey, "no credentials in the metrics")

	t.Run("behind the admin key on a network listener", func(t *testing.T) {
		n := newHarness(t, func(c *Config) { c.AnyHost, c.APIKeys = true, []string{testKey} })
		resp, err := http.Get(n.srv.URL + "/metrics")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		code, _, _ := n.rawWith(http.Header{"Authorization": {"Bearer " + testAdminKey}}, "GET", "/metrics", nil)
		assert.Equal(t, http.StatusOK, code)
	})
}
