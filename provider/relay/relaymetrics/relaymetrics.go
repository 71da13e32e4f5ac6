package relaymetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/relay"
)

// Metrics are one relay's collectors; it is the relay's relay.Observer.
// The collectors are made when the relay is, so Collectors is empty before
// relay.New.
type Metrics struct {
	reg prometheus.Registerer

	once       sync.Once
	collectors []prometheus.Collector
}

var _ relay.Observer = (*Metrics)(nil)

// New returns the metrics of one relay, to give it with relay.WithObserver.
// When reg is not nil they are registered with it as the relay is made,
// and relay.New fails with invalid_argument if reg has them already (wrap
// reg with a label per relay, as the simulator does for its two proxies).
func New(reg prometheus.Registerer) *Metrics { return &Metrics{reg: reg} }

// WithRegisterer is the relay option that counts the relay in New(reg).
func WithRegisterer(reg prometheus.Registerer) relay.Option {
	return relay.WithObserver(New(reg))
}

// Attach makes the collectors for rl and registers them. It is for
// relay.New; a Metrics serves one relay.
func (m *Metrics) Attach(rl *relay.Relay) error {
	attached := false
	m.once.Do(func() { m.collectors = build(rl); attached = true })
	if !attached {
		return provider.Errorf(provider.FailedPrecondition, "relay metrics already serve another relay")
	}
	if m.reg == nil {
		return nil
	}
	for _, c := range m.collectors {
		if err := m.reg.Register(c); err != nil {
			return provider.Errorf(provider.InvalidArgument, "register relay metrics: %v", err)
		}
	}
	return nil
}

// Collectors are the relay's collectors, for a registry of the host's
// choosing (New(reg) registers them at relay.New); none before relay.New.
func (m *Metrics) Collectors() []prometheus.Collector { return m.collectors }

// build makes the collectors of rl. They read rl.Stats, whose atomics the
// request path keeps anyway, so that metrics cost the requests nothing.
func build(rl *relay.Relay) []prometheus.Collector {
	counter := func(name, help string, labels prometheus.Labels, v func(relay.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "sandplane", Subsystem: "relay", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return float64(v(rl.Stats())) })
	}
	gauge := func(name, help string, v func(relay.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "sandplane", Subsystem: "relay", Name: name, Help: help,
		}, func() float64 { return float64(v(rl.Stats())) })
	}
	const skipped = "Activity refreshes not sent, by reason."
	reason := func(r string) prometheus.Labels { return prometheus.Labels{"reason": r} }
	return []prometheus.Collector{
		counter("requests_total", "Requests routed to a sandbox.", nil,
			func(s relay.Stats) uint64 { return s.Requests }),
		counter("refreshes_sent_total", "RefreshActivity calls made.", nil,
			func(s relay.Stats) uint64 { return s.RefreshesSent }),
		counter("heartbeats_total", "RefreshActivity calls made by the heartbeat of an open connection.", nil,
			func(s relay.Stats) uint64 { return s.Heartbeats }),
		counter("refreshes_failed_total", "RefreshActivity calls that failed or timed out.", nil,
			func(s relay.Stats) uint64 { return s.RefreshesFailed }),
		counter("refreshes_skipped_total", skipped, reason("debounced"),
			func(s relay.Stats) uint64 { return s.SkippedDebounce }),
		counter("refreshes_skipped_total", skipped, reason("skip_header"),
			func(s relay.Stats) uint64 { return s.SkippedHeader }),
		counter("refreshes_skipped_total", skipped, reason("busy"),
			func(s relay.Stats) uint64 { return s.SkippedBusy }),
		counter("refreshes_skipped_total", skipped, reason("idle_connection"),
			func(s relay.Stats) uint64 { return s.SkippedIdle }),
		gauge("open_connections", "Proxied requests and WebSockets open now.",
			func(s relay.Stats) int64 { return s.OpenConnections }),
		gauge("refreshes_in_flight", "RefreshActivity calls not returned yet.",
			func(s relay.Stats) int64 { return s.RefreshesInFlight }),
	}
}
