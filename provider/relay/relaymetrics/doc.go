// Package relaymetrics exposes what a relay.Relay counts to Prometheus:
// requests routed, activity refreshes sent, sent by heartbeat, failed and
// skipped by reason, open connections and refreshes in flight, as the
// sandplane_relay_* series.
//
// It lives apart from package relay so that a host that never scrapes its
// relay links no Prometheus:
//
//	rl, err := relay.New(res, relaymetrics.WithRegisterer(reg),
//		relay.WithMetricsPath("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
package relaymetrics
