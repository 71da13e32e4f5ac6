package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

const (
	// ringSize is how many events a reconnecting client can catch up on.
	ringSize = 1024
	// subBuffer is how far a consumer may lag before it is cut off; it then
	// reconnects and gets a replay or a fresh snapshot, never a gap.
	subBuffer = 256
	// keepAlive keeps idle streams open through proxies and lets the server
	// notice a client that went away.
	keepAlive = 15 * time.Second
)

// Hub numbers lifecycle events, keeps the latest in a ring for replay, and
// fans them out to subscribers without ever blocking the publisher.
type Hub struct {
	clk clock.Clock

	mu   sync.Mutex
	seq  int64
	ring ring // the last ringSize events
	subs map[*subscriber]struct{}
	// published counts the events by type, for the metrics.
	published map[provider.EventType]uint64
}

type subscriber struct {
	filter manager.Filter
	ch     chan provider.Event
	// lagged is closed when the subscriber fell too far behind.
	lagged chan struct{}
}

// NewHub returns an empty hub.
func NewHub(clk clock.Clock) *Hub {
	if clk == nil {
		clk = clock.Real()
	}
	// Sequence numbers start from the boot time in microseconds, so those of
	// a restarted daemon are all above the old ones: a client resuming with
	// an id from before the restart is behind the ring and gets a snapshot,
	// never a replay of unrelated events that happen to share numbers.
	return &Hub{clk: clk, seq: clk.Now().UnixMicro(), subs: map[*subscriber]struct{}{}, published: map[provider.EventType]uint64{}}
}

// Published counts the events published so far, by type.
func (h *Hub) Published() map[provider.EventType]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[provider.EventType]uint64, len(h.published))
	for t, n := range h.published {
		out[t] = n
	}
	return out
}

// Publish records e and hands it to every matching subscriber. It is the
// manager's OnEvent.
func (h *Hub) Publish(e manager.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.published[e.Type]++
	s := e.Sandbox
	ev := provider.Event{Seq: h.seq, Type: e.Type, Time: e.Time, Sandbox: &s, Source: e.Source}
	h.ring.push(ev)
	for sub := range h.subs {
		if !sub.filter.Match(s) {
			continue
		}
		select {
		case sub.ch <- ev:
		default:
			delete(h.subs, sub)
			close(sub.lagged)
		}
	}
}

// subscribe registers a subscriber. When after is a sequence number the
// ring still covers, replay holds the matching events since then; otherwise
// fresh is true and the caller must send a snapshot first. now is the last
// sequence number published.
func (h *Hub) subscribe(after int64, resume bool, f manager.Filter) (sub *subscriber, replay []provider.Event, fresh bool, now int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub = &subscriber{filter: f, ch: make(chan provider.Event, subBuffer), lagged: make(chan struct{})}
	h.subs[sub] = struct{}{}
	oldest := h.seq - int64(h.ring.len()) // every event after oldest is in the ring
	if !resume || after < oldest || after > h.seq {
		return sub, nil, true, h.seq
	}
	// Sequence numbers are consecutive, so the first event to replay is at
	// a known offset: no scan of what the client already has.
	for i := int(after - oldest); i < h.ring.len(); i++ {
		if ev := h.ring.at(i); ev.Sandbox != nil && f.Match(*ev.Sandbox) {
			replay = append(replay, ev)
		}
	}
	return sub, replay, false, h.seq
}

// ring keeps the last ringSize events: a push overwrites the oldest in
// place, so publishing costs the same however full it is.
type ring struct {
	buf   [ringSize]provider.Event
	start int // index in buf of the oldest event
	n     int
}

func (r *ring) push(ev provider.Event) {
	if r.n < ringSize {
		r.buf[(r.start+r.n)%ringSize] = ev
		r.n++
		return
	}
	r.buf[r.start] = ev
	r.start = (r.start + 1) % ringSize
}

func (r *ring) len() int { return r.n }

// at returns the i-th event, oldest first.
func (r *ring) at(i int) provider.Event { return r.buf[(r.start+i)%ringSize] }

func (h *Hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

// events serves GET /v1/events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	filter, err := queryFilter(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var after int64
	lastID := r.Header.Get("Last-Event-ID")
	if lastID != "" {
		if after, err = strconv.ParseInt(lastID, 10, 64); err != nil {
			writeError(w, provider.Errorf(provider.InvalidArgument, "Last-Event-ID %q is not an event sequence number", lastID))
			return
		}
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, provider.Errorf(provider.Internal, "streaming is not supported by this connection"))
		return
	}
	sub, replay, fresh, now := s.hub.subscribe(after, lastID != "", filter)
	defer s.hub.unsubscribe(sub)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if fresh {
		// Taken after subscribing, so nothing published meanwhile is lost;
		// an event may then repeat what the snapshot shows, which is harmless.
		items := s.opts.Manager.List(r.Context(), filter)
		if items == nil {
			items = []provider.Sandbox{}
		}
		replay = []provider.Event{{Seq: now, Type: provider.EventSandboxesReplaced, Time: s.opts.Clock.Now(), Sandboxes: items}}
	}
	for _, ev := range replay {
		if err := writeEvent(w, ev); err != nil {
			return
		}
	}
	flusher.Flush()
	tick := s.opts.Clock.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.lagged:
			return // the client reconnects with Last-Event-ID
		case <-tick.C():
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case ev := <-sub.ch:
			if err := writeEvent(w, ev); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

func writeEvent(w http.ResponseWriter, ev provider.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, data)
	return err
}
