package relay

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// tracker decides when a sandbox's idle clock is reset and resets it, off
// the request path: requests only read atomics or take a sandbox's lock for
// a few instructions, and every RefreshActivity runs in its own goroutine.
type tracker struct {
	refresh   func(ctx context.Context, id string) error
	clk       clock.Clock
	log       *slog.Logger
	timeout   time.Duration
	idleLimit time.Duration
	inline    bool          // a request's refresh runs on its goroutine
	sem       chan struct{} // bounds concurrent refreshes
	stats     *stats
	ctx       context.Context
	cancel    context.CancelFunc

	closed atomic.Bool
	// runMu orders wg.Add against close's Wait; it is held for nothing
	// else, so it takes no other lock.
	runMu sync.Mutex
	wg    sync.WaitGroup // refreshes under way

	// mu guards sandboxes. Lock order: tracker.mu, then sandbox.mu.
	mu        sync.Mutex
	sandboxes map[string]*sandbox
}

// forgetAfter is how long a sandbox's state outlives its last use.
const forgetAfter = 10 * time.Minute

// failureLogEvery bounds failure logging per sandbox.
const failureLogEvery = time.Minute

type trigger int

const (
	byRequest trigger = iota
	byHeartbeat
)

// sandbox is the activity state of one sandbox.
type sandbox struct {
	t  *tracker
	id string
	// last is when the last refresh was sent, in Unix nanoseconds of the
	// clock; window and used are nanoseconds too. They are atomics so that
	// a debounced request takes no lock.
	last   atomic.Int64
	window atomic.Int64
	used   atomic.Int64

	// idle is set while the heartbeat skipped a refresh because every
	// connection was idle: the first byte that moves again refreshes at
	// once, since the next beat may come after the auto-stop.
	idle atomic.Bool

	mu          sync.Mutex
	beat        time.Duration
	inFlight    bool
	conns       map[*conn]struct{}
	timer       clock.Timer // the heartbeat; reused
	armed       bool
	due         time.Time // when the armed heartbeat fires
	failures    int       // since the last failure log
	lastFailLog time.Time
	// retrying is set while the last refresh failed: the heartbeat is then
	// due once the window that the failure moved last back passes, not a
	// beat after last (see refresh).
	retrying bool
	// token is the sandbox's preview token when last resolved, to check a
	// caller against once the provider gives none (a stopped sandbox).
	token string
}

// setToken remembers the sandbox's preview token.
func (s *sandbox) setToken(token string) {
	s.mu.Lock()
	s.token = token
	s.mu.Unlock()
}

// knownToken is the preview token the sandbox id had when last resolved,
// or "" for one the relay has not resolved lately.
func (t *tracker) knownToken(id string) string {
	t.mu.Lock()
	s := t.sandboxes[id]
	t.mu.Unlock()
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// conn is one proxied request, for as long as it is open. bytes counts what
// moved through it in either direction, so that the heartbeat can tell an
// idle connection from a busy one.
type conn struct {
	// port is the sandbox port the request addressed: what resolving the
	// sandbox again (see Relay.retime) asks for.
	port int
	// sb is set by open, before any byte moves, and set again when a
	// retried request moves to another sandbox.
	sb        atomic.Pointer[sandbox]
	bytes     atomic.Int64
	seenBytes int64     // bytes at the last heartbeat; under sandbox.mu
	seenAt    time.Time // when bytes last changed, as heartbeats saw it
}

func (c *conn) add(n int) {
	if n <= 0 {
		return
	}
	c.bytes.Add(int64(n))
	if s := c.sb.Load(); s != nil && s.idle.Load() && s.idle.CompareAndSwap(true, false) {
		s.send(s.t.clk.Now(), byHeartbeat)
	}
}

func newTracker(refresh func(context.Context, string) error, clk clock.Clock, log *slog.Logger, st *stats, o options) *tracker {
	ctx, cancel := context.WithCancel(context.Background())
	return &tracker{
		refresh: refresh, clk: clk, log: log, stats: st,
		timeout: o.RefreshTimeout, idleLimit: o.IdleKeepAlive, inline: o.InlineRefresh,
		sem: make(chan struct{}, o.MaxConcurrentRefreshes),
		ctx: ctx, cancel: cancel,
		sandboxes: map[string]*sandbox{},
	}
}

// sandbox returns the state of id, making it on first use.
func (t *tracker) sandbox(id string) *sandbox {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sandboxes[id]
	if s == nil {
		s = &sandbox{t: t, id: id, conns: map[*conn]struct{}{}}
		window, beat := timing(0, 0, false)
		s.window.Store(int64(window))
		s.beat = beat
		t.sandboxes[id] = s
	}
	s.used.Store(t.clk.Now().UnixNano())
	return s
}

// sweep forgets sandboxes that nobody used for a while.
func (t *tracker) sweep(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, s := range t.sandboxes {
		s.mu.Lock()
		idle := len(s.conns) == 0 && !s.inFlight && now.UnixNano()-s.used.Load() > int64(forgetAfter)
		if idle && s.timer != nil {
			s.timer.Stop()
			s.armed = false
		}
		s.mu.Unlock()
		if idle {
			delete(t.sandboxes, id)
		}
	}
}

// close stops every heartbeat, cancels the refreshes under way and waits
// for them.
func (t *tracker) close() {
	t.runMu.Lock()
	t.closed.Store(true)
	t.runMu.Unlock()
	t.mu.Lock()
	for _, s := range t.sandboxes {
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
			s.armed = false
		}
		s.mu.Unlock()
	}
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// setTiming sets the sandbox's debounce window and heartbeat period, as a
// resolution found them. An armed heartbeat that the new period makes due
// sooner (the auto-stop interval shrank under an open stream) is armed
// again for then.
func (s *sandbox) setTiming(window, beat time.Duration, now time.Time) {
	s.window.Store(int64(window))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beat = beat
	if d := s.nextBeatLocked(now); s.armed && now.Add(d).Before(s.due) {
		s.scheduleLocked(d)
	}
}

// withConns returns the sandboxes (id, or every one for "") that have a
// connection open, each with the port one of them addressed.
func (t *tracker) withConns(id string) map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for sid, s := range t.sandboxes {
		if id != "" && sid != id {
			continue
		}
		s.mu.Lock()
		for c := range s.conns {
			out[sid] = c.port
			break
		}
		s.mu.Unlock()
	}
	return out
}

// touch is a proxied request's bump: sent unless the sandbox was refreshed
// within its window.
func (s *sandbox) touch(now time.Time) {
	n := now.UnixNano()
	s.used.Store(n)
	if n-s.last.Load() < s.window.Load() {
		s.t.stats.skippedDebounce.Add(1)
		return
	}
	s.send(now, byRequest)
}

// send starts a refresh unless one is under way, the window has not passed,
// or too many refreshes run already. It never blocks on the backend, unless
// the relay refreshes inline and why is a request.
func (s *sandbox) send(now time.Time, why trigger) {
	if !s.begin(now, why) {
		return
	}
	if s.t.inline && why == byRequest {
		s.refresh(now)
		return
	}
	go s.refresh(now)
}

// begin claims the refresh that send makes, or reports that none is due.
func (s *sandbox) begin(now time.Time, why trigger) bool {
	t := s.t
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight || now.UnixNano()-s.last.Load() < s.window.Load() {
		t.stats.skippedDebounce.Add(1)
		s.ensureBeatLocked(now)
		return false
	}
	select {
	case t.sem <- struct{}{}:
	default:
		t.stats.skippedBusy.Add(1)
		s.ensureBeatLocked(now)
		return false
	}
	t.runMu.Lock()
	if t.closed.Load() {
		t.runMu.Unlock()
		<-t.sem
		return false
	}
	t.wg.Add(1)
	t.runMu.Unlock()
	s.idle.Store(false)
	s.inFlight = true
	s.retrying = false
	s.last.Store(now.UnixNano())
	t.stats.sent.Add(1)
	t.stats.inFlight.Add(1)
	if why == byHeartbeat {
		t.stats.heartbeats.Add(1)
	}
	if len(s.conns) > 0 {
		s.scheduleLocked(s.beat)
	}
	return true
}

func (s *sandbox) refresh(sentAt time.Time) {
	t := s.t
	defer t.wg.Done()
	defer t.stats.inFlight.Add(-1) // after the sandbox's state is settled
	ctx, cancel := withTimeout(t.ctx, t.clk, t.timeout)
	err := t.refresh(ctx, s.id)
	cancel()
	<-t.sem
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight = false
	if err == nil || t.ctx.Err() != nil {
		return
	}
	t.stats.failed.Add(1)
	// A failed refresh does not count: the next request or heartbeat after
	// a tenth of the window tries again.
	window := s.window.Load()
	s.last.Store(sentAt.UnixNano() - window + window/10)
	s.retrying = true
	if len(s.conns) > 0 {
		s.scheduleLocked(time.Duration(window / 10))
	}
	s.failures++
	now := t.clk.Now()
	if !s.lastFailLog.IsZero() && now.Sub(s.lastFailLog) < failureLogEvery {
		return
	}
	// Provider messages name the sandbox and the cause, never a secret.
	t.log.Warn("relay: activity refresh failed; the sandbox may auto-stop while in use",
		"sandbox", s.id, "code", provider.Code(err), "err", provider.Message(err), "failures", s.failures)
	s.lastFailLog = now
	s.failures = 0
}

// open registers a proxied request; the heartbeat runs while any is open.
func (s *sandbox) open(c *conn, now time.Time) {
	c.sb.Store(s)
	s.mu.Lock()
	c.seenAt = now
	s.conns[c] = struct{}{}
	s.ensureBeatLocked(now)
	s.mu.Unlock()
	s.t.stats.open.Add(1)
}

// close unregisters c; the last one to close stops the heartbeat at once.
func (s *sandbox) close(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if len(s.conns) == 0 && s.armed {
		s.timer.Stop()
		s.armed = false
	}
	s.mu.Unlock()
	s.t.stats.open.Add(-1)
}

// ensureBeatLocked arms the heartbeat for a beat after the last refresh
// when a connection is open and it is not armed yet.
func (s *sandbox) ensureBeatLocked(now time.Time) {
	if len(s.conns) == 0 || s.armed {
		return
	}
	s.scheduleLocked(s.nextBeatLocked(now))
}

// nextBeatLocked is how long after now the heartbeat is due: a beat after
// the last refresh, or when its retry is due if it failed (a connection
// opened after the failure, say, with an inline refresh), and no sooner
// than a tenth of the window.
func (s *sandbox) nextBeatLocked(now time.Time) time.Duration {
	after := int64(s.beat)
	if s.retrying {
		after = s.window.Load()
	}
	d := time.Duration(s.last.Load()+after) - time.Duration(now.UnixNano())
	return max(d, time.Duration(s.window.Load()/10))
}

func (s *sandbox) scheduleLocked(d time.Duration) {
	if s.t.closed.Load() {
		return
	}
	if s.timer == nil {
		s.timer = s.t.clk.AfterFunc(d, s.tick)
	} else {
		s.timer.Reset(d)
	}
	s.armed, s.due = true, s.t.clk.Now().Add(d)
}

// tick is the heartbeat: while a connection is open, and (with an idle
// limit) one of them moved bytes recently, refresh.
func (s *sandbox) tick() {
	now := s.t.clk.Now()
	s.mu.Lock()
	s.armed = false
	if len(s.conns) == 0 {
		s.mu.Unlock()
		return
	}
	if !s.anyLiveLocked(now) {
		s.t.stats.skippedIdle.Add(1)
		s.idle.Store(true)
		s.scheduleLocked(s.beat)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.send(now, byHeartbeat)
}

// anyLiveLocked reports whether a connection keeps the sandbox alive: any
// open one without an idle limit, else one that moved bytes within it.
func (s *sandbox) anyLiveLocked(now time.Time) bool {
	limit := s.t.idleLimit
	live := limit <= 0
	for c := range s.conns {
		if b := c.bytes.Load(); b != c.seenBytes {
			c.seenBytes, c.seenAt = b, now
		}
		if now.Sub(c.seenAt) < limit {
			live = true
		}
	}
	return live
}
