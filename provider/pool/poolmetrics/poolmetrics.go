package poolmetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/pool"
)

// Metrics are one pool's collectors; it is the pool's pool.Observer. The
// collectors are made when the pool is (they carry its name), so Collectors
// is empty before pool.New.
type Metrics struct {
	reg prometheus.Registerer

	once           sync.Once
	acquires       *prometheus.CounterVec   // path
	acquireErrors  *prometheus.CounterVec   // code
	acquireSeconds *prometheus.HistogramVec // path
	teardowns      *prometheus.CounterVec   // reason
	evictions      prometheus.Counter       // stops of a warm sandbox to free a slot, confirmed or not
	hungStops      prometheus.Counter       // stops not confirmed within StopTimeout
	running        prometheus.GaugeFunc
	warm           prometheus.GaugeFunc
	inUse          prometheus.GaugeFunc
}

var _ pool.Observer = (*Metrics)(nil)

// New returns the metrics of one pool, to give it with pool.WithObserver.
// When reg is not nil they are registered with it as the pool is made, and
// pool.New fails with already_exists if reg has a pool of that name.
func New(reg prometheus.Registerer) *Metrics { return &Metrics{reg: reg} }

// WithRegisterer is the pool option that counts the pool in New(reg).
func WithRegisterer(reg prometheus.Registerer) pool.Option {
	return pool.WithObserver(New(reg))
}

// Attach makes the collectors for p and registers them. It is for
// pool.New; a Metrics serves one pool.
func (m *Metrics) Attach(p *pool.Pool) error {
	attached := false
	m.once.Do(func() { m.build(p); attached = true })
	if !attached {
		return provider.Errorf(provider.FailedPrecondition, "pool %s: its metrics already serve another pool", p.Name())
	}
	if m.reg == nil {
		return nil
	}
	for _, c := range m.Collectors() {
		if err := m.reg.Register(c); err != nil {
			return provider.Errorf(provider.AlreadyExists, "pool %s: register its metrics: %v (name each pool of a registry differently)", p.Name(), err)
		}
	}
	return nil
}

// build makes the collectors, labelled with p's name, and the series every
// scrape should show from the start (a zero per reason and per path).
func (m *Metrics) build(p *pool.Pool) {
	cl := prometheus.Labels{"pool": p.Name()}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "sandplane", Subsystem: "pool", Name: name, Help: help, ConstLabels: cl}
	}
	gauge := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts(name, help)), f)
	}
	m.acquires = prometheus.NewCounterVec(prometheus.CounterOpts(opts("acquires_total",
		"Sandboxes handed out, by path: warm, resumed, created.")), []string{"path"})
	m.acquireErrors = prometheus.NewCounterVec(prometheus.CounterOpts(opts("acquire_errors_total",
		"Acquires that failed, by error code.")), []string{"code"})
	m.acquireSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sandplane", Subsystem: "pool", Name: "acquire_seconds", ConstLabels: cl,
		Help:    "How long an Acquire took, by path.",
		Buckets: []float64{.005, .025, .1, .25, .5, 1, 2, 4, 8, 16, 32, 64},
	}, []string{"path"})
	m.teardowns = prometheus.NewCounterVec(prometheus.CounterOpts(opts("teardowns_total",
		"Sandboxes the pool stopped or deleted, by reason.")), []string{"reason"})
	m.evictions = prometheus.NewCounter(prometheus.CounterOpts(opts("evictions_total",
		"Warm sandboxes stopped (never deleted) to make room under the warm cap.")))
	m.hungStops = prometheus.NewCounter(prometheus.CounterOpts(opts("unconfirmed_stops_total",
		"Stops and deletes the provider did not confirm within the stop timeout; they count as running until it does.")))
	m.running = gauge("running", "Sandboxes that may run: in use, warm, starting, or stopping unconfirmed.", func() float64 {
		return float64(p.Stats().Running)
	})
	m.warm = gauge("warm", "Sandboxes parked running.", func() float64 { return float64(p.Stats().Warm) })
	m.inUse = gauge("in_use", "Sandboxes held by a turn.", func() float64 { return float64(p.Stats().InUse) })
	for _, r := range pool.Reasons {
		m.teardowns.WithLabelValues(string(r))
	}
	for _, path := range []pool.Path{pool.PathWarm, pool.PathResumed, pool.PathCreated} {
		m.acquires.WithLabelValues(string(path))
	}
}

// Collectors are the pool's collectors, for a registry of the host's
// choosing (New(reg) registers them at pool.New); none before pool.New.
func (m *Metrics) Collectors() []prometheus.Collector {
	if m.acquires == nil {
		return nil
	}
	return []prometheus.Collector{m.acquires, m.acquireErrors, m.acquireSeconds, m.teardowns,
		m.evictions, m.hungStops, m.running, m.warm, m.inUse}
}

func (m *Metrics) Acquired(path pool.Path, took time.Duration) {
	m.acquires.WithLabelValues(string(path)).Inc()
	m.acquireSeconds.WithLabelValues(string(path)).Observe(took.Seconds())
}

func (m *Metrics) AcquireFailed(code provider.ErrorCode) {
	m.acquireErrors.WithLabelValues(string(code)).Inc()
}

func (m *Metrics) TornDown(reason pool.Reason) { m.teardowns.WithLabelValues(string(reason)).Inc() }
func (m *Metrics) Evicted()                    { m.evictions.Inc() }
func (m *Metrics) StopUnconfirmed()            { m.hungStops.Inc() }
