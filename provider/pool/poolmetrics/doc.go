// Package poolmetrics counts what a pool.Pool does for Prometheus: acquires
// by path and their latency, failed acquires by code, teardowns by reason,
// evictions and unconfirmed stops, and gauges of the
// running slots, warm sandboxes and turns in flight. Every series is
// labelled with the pool's name.
//
// It lives apart from package pool so that a host that never scrapes its
// pool links no Prometheus:
//
//	p, err := pool.New(ctx, prov, pool.WithName("chat"), poolmetrics.WithRegisterer(reg))
package poolmetrics
