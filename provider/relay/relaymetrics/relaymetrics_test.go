package relaymetrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/relay"
	"github.com/sandplane/sandplane/provider/relay/relaymetrics"
)

// backend resolves every sandbox to one upstream and refreshes at once.
type backend struct{ up *url.URL }

func (b backend) Resolve(_ context.Context, id string, _ int) (relay.Target, error) {
	return relay.Target{ID: id, URL: b.up, AutoStop: time.Minute}, nil
}

func (backend) RefreshActivity(context.Context, string) error { return nil }

func newRelay(t *testing.T, opts ...relay.Option) (*relay.Relay, error) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	require.NoError(t, err)
	clk := clocktest.NewFake(time.Time{})
	rl, err := relay.New(backend{up: u}, append([]relay.Option{relay.WithClock(clk)}, opts...)...)
	if err == nil {
		t.Cleanup(func() { _ = rl.Close() })
	}
	return rl, err
}

// get serves one request through rl in-process; host "" is the relay's own.
func get(rl *relay.Relay, host, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "http://relay.test"+path, nil)
	req.Host = host
	if host == "" {
		req.Host = "127.0.0.1:4030"
	}
	rec := httptest.NewRecorder()
	rl.ServeHTTP(rec, req)
	return rec
}

// The series keep the names, labels and help they had inside package
// relay, and count what the relay does; the host serves them at its path.
func TestRegisterAndCount(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rl, err := newRelay(t, relaymetrics.WithRegisterer(reg),
		relay.WithMetricsPath("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	require.NoError(t, err)
	for range 3 {
		require.Equal(t, http.StatusOK, get(rl, "3000-sb1.localhost", "/").Code)
	}
	require.Eventually(t, func() bool { return rl.Stats().RefreshesInFlight == 0 }, 10*time.Second, time.Millisecond)

	rec := get(rl, "", "/metrics")
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	for _, want := range []string{
		"# HELP sandplane_relay_requests_total Requests routed to a sandbox.",
		"sandplane_relay_requests_total 3",
		"sandplane_relay_refreshes_sent_total 1",
		"sandplane_relay_heartbeats_total 0",
		`sandplane_relay_refreshes_skipped_total{reason="debounced"} 2`,
		`sandplane_relay_refreshes_skipped_total{reason="skip_header"} 0`,
		`sandplane_relay_refreshes_skipped_total{reason="busy"} 0`,
		`sandplane_relay_refreshes_skipped_total{reason="idle_connection"} 0`,
		"sandplane_relay_refreshes_failed_total 0",
		"# TYPE sandplane_relay_open_connections gauge",
		"sandplane_relay_open_connections 0",
		"sandplane_relay_refreshes_in_flight 0",
	} {
		assert.Contains(t, body, want)
	}
}

func TestAttachRefused(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	_, err := newRelay(t, relaymetrics.WithRegisterer(reg))
	require.NoError(t, err)
	used := relaymetrics.New(nil)
	_, err = newRelay(t, relay.WithObserver(used))
	require.NoError(t, err)

	tests := []struct {
		name string
		opts []relay.Option
		want provider.ErrorCode
	}{
		{"two relays on one registry", []relay.Option{relaymetrics.WithRegisterer(reg)}, provider.InvalidArgument},
		{"one Metrics for two relays", []relay.Option{relay.WithObserver(used)}, provider.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newRelay(t, tt.opts...)
			assert.Equal(t, tt.want, provider.Code(err))
		})
	}
}

// Collectors are empty until the relay is made, then usable with a
// registry of the host's choosing, a label per relay included.
func TestCollectorsForAnyRegistry(t *testing.T) {
	m := relaymetrics.New(nil)
	assert.Empty(t, m.Collectors())
	_, err := newRelay(t, relay.WithObserver(m))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	prometheus.WrapRegistererWith(prometheus.Labels{"proxy": "preview"}, reg).MustRegister(m.Collectors()...)
	n, err := testutil.GatherAndCount(reg, "sandplane_relay_refreshes_skipped_total")
	require.NoError(t, err)
	assert.Equal(t, 4, n, "a series per reason")
}
