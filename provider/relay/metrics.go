package relay

import "sync/atomic"

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
