package relay

// Observer is told of a relay, for metrics; relaymetrics has one for
// Prometheus. Keeping the collectors out of this package keeps Prometheus
// and protobuf out of every host that never scrapes its relay.
//
// The relay reports nothing per request: it counts in atomics on the
// request path anyway, so an observer reads them through Stats, and
// observing costs the requests nothing. Stats is safe for concurrent use
// with requests, at any time after Attach, Close included.
type Observer interface {
	// Attach is called once, by New, on New's goroutine, before the relay
	// serves a request; an error fails New. It is where an observer keeps
	// rl to read Stats from later. It must not call Close or ServeHTTP.
	Attach(rl *Relay) error
}

// nopObserver is the relay's observer when the host gives none, so that
// New never checks for nil.
type nopObserver struct{}

func (nopObserver) Attach(*Relay) error { return nil }
