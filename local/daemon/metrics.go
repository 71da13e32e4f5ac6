package daemon

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are what GET /metrics exposes, on a registry of the server's own.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandplane_http_requests_total",
			Help: "Requests the daemon answered, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandplane_http_request_duration_seconds",
			Help:    "How long the daemon took to answer, by route (event streams count until they end).",
			Buckets: []float64{.001, .005, .025, .1, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
	}
	m.reg.MustRegister(m.requests, m.duration, &daemonCollector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(r *http.Request, status int, took time.Duration) {
	rt := route(r.URL.Path)
	if previewRequest(r) {
		rt = PreviewPath // the relay counts them by its own metrics too
	}
	m.requests.WithLabelValues(rt, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(rt).Observe(took.Seconds())
}

var (
	sandboxesDesc = prometheus.NewDesc("sandplane_sandboxes",
		"Sandboxes by state and runtime, as recorded.", []string{"state", "runtime"}, nil)
	eventsDesc = prometheus.NewDesc("sandplane_events_total",
		"Lifecycle events published, by type.", []string{"type"}, nil)
	infoDesc = prometheus.NewDesc("sandplane_daemon_info",
		"Always 1; the daemon's version and API version as labels.", []string{"version", "api_version"}, nil)
)

// daemonCollector reads the manager's registry and the hub's counts at
// scrape time, so that the figures are never stale and cost nothing between
// scrapes.
type daemonCollector struct{ s *Server }

func (c *daemonCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- eventsDesc
	ch <- infoDesc
}

func (c *daemonCollector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.s.opts.Manager.Counts() {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), string(k.State), string(k.Runtime))
	}
	for t, n := range c.s.hub.Published() {
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(n), string(t))
	}
	ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, c.s.opts.Version, apiVersion)
}

// sandboxOps are the operations under /v1/sandboxes/{idOrName}/.
var sandboxOps = map[string]bool{
	"stop": true, "start": true, "refresh-activity": true, "autostop": true,
	"resize": true, "preview-url": true, "entrypoint-logs": true,
}

// route is the metrics label of a request path: its route, never a sandbox
// id or name, so that the label set stays small.
func route(path string) string {
	switch path {
	case "/", "/healthz", "/metrics", "/v1/info", "/v1/sandboxes", "/v1/events":
		return path
	}
	if rest, ok := strings.CutPrefix(path, "/v1/sandboxes/"); ok {
		id, op, hasOp := strings.Cut(rest, "/")
		switch {
		case id == "":
			return "other"
		case !hasOp:
			return "/v1/sandboxes/{idOrName}"
		case sandboxOps[op]:
			return "/v1/sandboxes/{idOrName}/" + op
		}
		return "other"
	}
	if strings.HasPrefix(path, "/logs/") {
		return "/logs/{idOrName}"
	}
	if strings.HasPrefix(path, "/open/") {
		return "/open/{idOrName}"
	}
	if strings.HasPrefix(path, "/ui/") {
		return "/ui/"
	}
	return "other"
}

// routeOps adds the health check and the metrics.
func (s *Server) routeOps(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
}

// openPath reports whether r may go without the token: probes that say nothing about the
// daemon beyond that it is one (and, for /v1/info, its version).
func openPath(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/v1/info" || r.URL.Path == "/healthz")
}
