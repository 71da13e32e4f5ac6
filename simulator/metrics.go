package simulator

import (
	"crypto/subtle"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// simMetrics are the simulator's Prometheus metrics, on a registry of its
// own (several simulators may share a process). They hold counts and
// states only: never a key, a token or a sandbox's env.
type simMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	faults   *prometheus.CounterVec
	events   *prometheus.CounterVec
}

func newSimMetrics(s *Simulator) *simMetrics {
	m := &simMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandplane_sim_requests_total",
			Help: "Requests answered, by operation (an operationId, toolbox or preview) and status code.",
		}, []string{"operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandplane_sim_request_duration_seconds",
			Help:    "Time to answer a request, on the simulator's clock, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"operation"}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandplane_sim_faults_applied_total",
			Help: "Requests an injected fault shaped, by operation.",
		}, []string{"operation"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandplane_sim_events_total",
			Help: "Events sent to the socket.io gateway, by name.",
		}, []string{"event"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.faults, m.events, stateCollector{s}, prometheus.NewGoCollector())
	return m
}

// observe counts one call of the call log.
func (m *simMetrics) observe(s *Simulator, c Call) {
	m.requests.WithLabelValues(c.Operation, strconv.Itoa(c.Status)).Inc()
	m.duration.WithLabelValues(c.Operation).Observe(s.clk.Now().Sub(c.Time).Seconds())
	if c.Fault != "" {
		m.faults.WithLabelValues(c.Operation).Inc()
	}
}

// stateCollector reports, at each scrape, how many sandboxes, snapshots
// and volumes are in each state, and the gateway's connected clients.
type stateCollector struct{ s *Simulator }

var (
	sandboxesDesc = prometheus.NewDesc("sandplane_sim_sandboxes", "Sandboxes by raw state (the warm pools' aside).", []string{"state"}, nil)
	poolDesc      = prometheus.NewDesc("sandplane_sim_warm_pool_sandboxes", "Unclaimed sandboxes of the warm pools.", nil, nil)
	snapshotsDesc = prometheus.NewDesc("sandplane_sim_snapshots", "Snapshots by state.", []string{"state"}, nil)
	volumesDesc   = prometheus.NewDesc("sandplane_sim_volumes", "Volumes by state.", []string{"state"}, nil)
	clientsDesc   = prometheus.NewDesc("sandplane_sim_event_clients", "Clients connected to the socket.io gateway.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sandboxesDesc, poolDesc, snapshotsDesc, volumesDesc, clientsDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	sandboxes, snapshots, volumes := map[string]int{}, map[string]int{}, map[string]int{}
	pool := 0
	s.mu.RLock()
	for sb := range s.rows.All() {
		if sb.pool != nil || isPoolOrg(sb.OrgID) {
			pool++
			continue
		}
		sandboxes[sb.State]++
	}
	for _, sn := range s.snaps {
		if !sn.gone {
			snapshots[sn.State]++
		}
	}
	for _, v := range s.vols {
		volumes[v.State]++
	}
	s.mu.RUnlock()
	for desc, counts := range map[*prometheus.Desc]map[string]int{sandboxesDesc: sandboxes, snapshotsDesc: snapshots, volumesDesc: volumes} {
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n), state)
		}
	}
	ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(pool))
	ch <- prometheus.MustNewConstMetric(clientsDesc, prometheus.GaugeValue, float64(s.events.clients()))
}

// metricsHandler serves /metrics: open on loopback, behind the admin key
// when the simulator answers any Host (a network listener).
func (s *Simulator) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AnyHost && subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.cfg.AdminKey)) != 1 {
			s.writeAPIError(w, r, errorf(http.StatusUnauthorized, "/metrics on a network listener wants the admin key as its bearer token"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
