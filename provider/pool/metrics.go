package pool

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the pool's counters and gauges, labelled with its name.
type metrics struct {
	acquires       *prometheus.CounterVec   // path
	acquireErrors  *prometheus.CounterVec   // code
	acquireSeconds *prometheus.HistogramVec // path
	teardowns      *prometheus.CounterVec   // reason
	rejections     prometheus.Counter
	evictions      prometheus.Counter // stops of a warm sandbox to free a slot, confirmed or not
	hungStops      prometheus.Counter // stops not confirmed within StopTimeout
	running        prometheus.GaugeFunc
	warm           prometheus.GaugeFunc
	inUse          prometheus.GaugeFunc
}

func newMetrics(p *Pool) *metrics {
	cl := prometheus.Labels{"pool": p.cfg.name}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "sandplane", Subsystem: "pool", Name: name, Help: help, ConstLabels: cl}
	}
	gauge := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts(name, help)), f)
	}
	m := &metrics{
		acquires: prometheus.NewCounterVec(prometheus.CounterOpts(opts("acquires_total",
			"Sandboxes handed out, by path: warm, resumed, created.")), []string{"path"}),
		acquireErrors: prometheus.NewCounterVec(prometheus.CounterOpts(opts("acquire_errors_total",
			"Acquires that failed, by error code.")), []string{"code"}),
		acquireSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sandplane", Subsystem: "pool", Name: "acquire_seconds", ConstLabels: cl,
			Help:    "How long an Acquire took, by path.",
			Buckets: []float64{.005, .025, .1, .25, .5, 1, 2, 4, 8, 16, 32, 64},
		}, []string{"path"}),
		teardowns: prometheus.NewCounterVec(prometheus.CounterOpts(opts("teardowns_total",
			"Sandboxes the pool stopped or deleted, by reason.")), []string{"reason"}),
		rejections: prometheus.NewCounter(prometheus.CounterOpts(opts("admission_rejections_total",
			"Acquires refused or timed out because every running slot was taken."))),
		evictions: prometheus.NewCounter(prometheus.CounterOpts(opts("evictions_total",
			"Warm sandboxes stopped to free a running slot."))),
		hungStops: prometheus.NewCounter(prometheus.CounterOpts(opts("unconfirmed_stops_total",
			"Stops and deletes the provider did not confirm within the stop timeout; their slots stay taken until it does."))),
	}
	m.running = gauge("running", "Running slots taken: sandboxes in use, warm, starting, or stopping unconfirmed.", func() float64 {
		return float64(p.Stats().Running)
	})
	m.warm = gauge("warm", "Sandboxes parked running.", func() float64 { return float64(p.Stats().Warm) })
	m.inUse = gauge("in_use", "Sandboxes held by a turn.", func() float64 { return float64(p.Stats().InUse) })
	for _, r := range Reasons {
		m.teardowns.WithLabelValues(string(r))
	}
	for _, path := range []Path{PathWarm, PathResumed, PathCreated} {
		m.acquires.WithLabelValues(string(path))
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.acquires, m.acquireErrors, m.acquireSeconds, m.teardowns,
		m.rejections, m.evictions, m.hungStops, m.running, m.warm, m.inUse}
}
