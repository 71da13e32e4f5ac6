package relay

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats are the relay's counters since it started.
type Stats struct {
	// Requests routed to a sandbox.
	Requests uint64
	// RefreshesSent counts RefreshActivity calls made, Heartbeats the part
	// of them that the heartbeat of an open connection made.
	RefreshesSent uint64
	Heartbeats    uint64
	// RefreshesFailed counts calls that failed or timed out.
	RefreshesFailed uint64
	// Skipped refreshes: within the sandbox's window (or one under way),
	// asked not to by X-Daytona-Skip-Last-Activity-Update, too many
	// refreshes running already, and heartbeats of connections idle past
	// WithIdleKeepAlive.
	SkippedDebounce uint64
	SkippedHeader   uint64
	SkippedBusy     uint64
	SkippedIdle     uint64
	// OpenConnections are proxied requests and WebSockets open now.
	OpenConnections int64
	// RefreshesInFlight are RefreshActivity calls not returned yet.
	RefreshesInFlight int64
}

type stats struct {
	requests, sent, heartbeats, failed                       atomic.Uint64
	skippedDebounce, skippedHeader, skippedBusy, skippedIdle atomic.Uint64
	open, inFlight                                           atomic.Int64
}

func (s *stats) snapshot() Stats {
	return Stats{
		Requests:          s.requests.Load(),
		RefreshesSent:     s.sent.Load(),
		Heartbeats:        s.heartbeats.Load(),
		RefreshesFailed:   s.failed.Load(),
		SkippedDebounce:   s.skippedDebounce.Load(),
		SkippedHeader:     s.skippedHeader.Load(),
		SkippedBusy:       s.skippedBusy.Load(),
		SkippedIdle:       s.skippedIdle.Load(),
		OpenConnections:   s.open.Load(),
		RefreshesInFlight: s.inFlight.Load(),
	}
}

// collectors expose the counters to Prometheus; they read the atomics the
// request path already keeps, so metrics cost the requests nothing.
func (s *stats) collectors() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Uint64, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "sandplane", Subsystem: "relay", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return float64(v.Load()) })
	}
	const skipped = "Activity refreshes not sent, by reason."
	return []prometheus.Collector{
		counter("requests_total", "Requests routed to a sandbox.", &s.requests, nil),
		counter("refreshes_sent_total", "RefreshActivity calls made.", &s.sent, nil),
		counter("heartbeats_total", "RefreshActivity calls made by the heartbeat of an open connection.", &s.heartbeats, nil),
		counter("refreshes_failed_total", "RefreshActivity calls that failed or timed out.", &s.failed, nil),
		counter("refreshes_skipped_total", skipped, &s.skippedDebounce, prometheus.Labels{"reason": "debounced"}),
		counter("refreshes_skipped_total", skipped, &s.skippedHeader, prometheus.Labels{"reason": "skip_header"}),
		counter("refreshes_skipped_total", skipped, &s.skippedBusy, prometheus.Labels{"reason": "busy"}),
		counter("refreshes_skipped_total", skipped, &s.skippedIdle, prometheus.Labels{"reason": "idle_connection"}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "sandplane", Subsystem: "relay", Name: "open_connections",
			Help: "Proxied requests and WebSockets open now.",
		}, func() float64 { return float64(s.open.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "sandplane", Subsystem: "relay", Name: "refreshes_in_flight",
			Help: "RefreshActivity calls not returned yet.",
		}, func() float64 { return float64(s.inFlight.Load()) }),
	}
}
