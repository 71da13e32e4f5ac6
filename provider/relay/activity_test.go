package relay

import (
	"bufio"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

func TestTiming(t *testing.T) {
	tests := []struct {
		name             string
		autoStop, minute time.Duration
		daytona          bool
		window, beat     time.Duration
	}{
		{"one minute: Daytona's 45 s dedupe and 50 s heartbeat", time.Minute, time.Minute, false, 45 * time.Second, 50 * time.Second},
		{"fifteen minutes: a third of the interval", 15 * time.Minute, time.Minute, false, 5 * time.Minute, 5 * time.Minute * 10 / 9},
		{"auto-stop off: the dedupe alone", 0, time.Minute, false, 45 * time.Second, 50 * time.Second},
		{"a one-second minute scales the dedupe", time.Second, time.Second, false, 750 * time.Millisecond, 750 * time.Millisecond * 10 / 9},
		{"no minute given: a real minute", 3 * time.Minute, 0, false, 60 * time.Second, 60 * time.Second * 10 / 9},
		{"Daytona's timing: fifteen minutes keep 45 s and 50 s", 15 * time.Minute, time.Minute, true, 45 * time.Second, 50 * time.Second},
		{"Daytona's timing scales with the minute", 60 * time.Second, time.Second, true, 750 * time.Millisecond, 750 * time.Millisecond * 10 / 9},
		{"an interval of centuries does not wrap", math.MaxInt64, time.Minute, false, math.MaxInt64 / 3, math.MaxInt64/3 + math.MaxInt64/3/9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			window, beat := timing(tt.autoStop, tt.minute, tt.daytona)
			assert.Equal(t, tt.window, window)
			assert.Equal(t, tt.beat, beat)
			assert.Less(t, beat, max(tt.autoStop, window*4/3), "the heartbeat comes before the sandbox would stop")
			assert.Greater(t, beat, window, "a heartbeat always passes the debounce")
		})
	}
}

func TestDebouncePerRequest(t *testing.T) {
	up := upstream(t, ok)
	tests := []struct {
		name             string
		autoStop, minute time.Duration
		at               []time.Duration // request times
		want             []time.Duration // times a refresh was sent
	}{
		{"one-minute interval: 45 s", time.Minute, time.Minute,
			[]time.Duration{0, 10 * time.Second, 44 * time.Second, 45 * time.Second, 89 * time.Second, 90 * time.Second},
			[]time.Duration{0, 45 * time.Second, 90 * time.Second}},
		{"fifteen-minute interval: five minutes", 15 * time.Minute, time.Minute,
			[]time.Duration{0, time.Minute, 5*time.Minute - time.Second, 5 * time.Minute, 6 * time.Minute},
			[]time.Duration{0, 5 * time.Minute}},
		{"auto-stop off still refreshes, deduplicated", 0, time.Minute,
			[]time.Duration{0, 30 * time.Second, 46 * time.Second},
			[]time.Duration{0, 46 * time.Second}},
		{"one-second minute", time.Second, time.Second,
			[]time.Duration{0, 500 * time.Millisecond, 750 * time.Millisecond, time.Second},
			[]time.Duration{0, 750 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tg := target("sb1", up.URL)
			tg.AutoStop, tg.Minute = tt.autoStop, tt.minute
			f.backend.set("sb1", tg)
			start := f.clk.Now()
			var sent []time.Duration
			for _, at := range tt.at {
				f.clk.Set(start.Add(at))
				before := f.relay.Stats().RefreshesSent
				rec := f.do(t, "GET", "3000-sb1.localhost:4030", "/", nil)
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				if f.relay.Stats().RefreshesSent > before {
					sent = append(sent, at)
				}
				f.settle(t)
			}
			assert.Equal(t, tt.want, sent)
			assert.Len(t, f.backend.drain(), len(tt.want), "the backend got every refresh the relay counted")
		})
	}
}

func TestSkipHeaderMeansNoRefresh(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Header.Get(SkipActivityHeader)))
	})
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	for i := 0; i < 3; i++ {
		f.clk.Advance(time.Hour)
		rec := f.do(t, "GET", "3000-sb1.localhost", "/", http.Header{SkipActivityHeader: {"true"}})
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Empty(t, rec.Body.String(), "the header is the relay's, not the sandbox's")
	}
	st := f.relay.Stats()
	assert.Zero(t, st.RefreshesSent)
	assert.EqualValues(t, 3, st.SkippedHeader)
	assert.Zero(t, f.clk.Waiters(), "no heartbeat for a request that asked for none")
}

// stream is a response held open through the relay: the upstream sends an
// event whenever the test asks, and the client reads them.
type stream struct {
	send   chan string
	lines  chan string
	cancel context.CancelFunc
}

func openStream(t *testing.T, relayURL, host string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", relayURL+"/events", nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := &stream{lines: make(chan string, 100), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); line != "" {
				s.lines <- line
			}
		}
		close(s.lines)
	}()
	return s
}

func (s *stream) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		require.True(t, ok, "the stream ended")
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no event through the relay")
		return ""
	}
}

// sseUpstream streams "data: <x>" for every x on send until the client
// leaves.
func sseUpstream(t *testing.T, send chan string) *httptest.Server {
	t.Helper()
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: hello\n\n"))
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case x := <-send:
				_, _ = w.Write([]byte("data: " + x + "\n\n"))
				w.(http.Flusher).Flush()
			}
		}
	})
}

func TestHeartbeatWhileStreamOpenEndsWithTheClient(t *testing.T) {
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL)) // window 45 s, beat 50 s
	srv := upstream(t, f.relay.ServeHTTP)

	s := openStream(t, srv.URL, "3000-sb1.localhost")
	assert.Equal(t, "data: hello", s.next(t))
	f.settle(t)
	assert.Equal(t, []string{"sb1"}, f.backend.drain(), "the request's own refresh")

	// Three minutes of one open response: a refresh every 50 s.
	for i := 0; i < 3*60/50; i++ {
		f.clk.Advance(50 * time.Second)
		f.settle(t)
		assert.Equal(t, []string{"sb1"}, f.backend.drain(), "heartbeat %d", i+1)
	}
	assert.EqualValues(t, 3, f.relay.Stats().Heartbeats)

	// The client goes away: the heartbeat ends at once.
	s.cancel()
	require.Eventually(t, func() bool { return f.relay.Stats().OpenConnections == 0 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, f.clk.Waiters(), "no timer left once the last connection closed")
	f.clk.Advance(time.Hour)
	f.settle(t)
	assert.Empty(t, f.backend.drain(), "nothing refreshes a sandbox nobody uses")
}

func TestOneHeartbeatPerSandboxWhateverTheStreams(t *testing.T) {
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	srv := upstream(t, f.relay.ServeHTTP)
	for i := 0; i < 3; i++ {
		s := openStream(t, srv.URL, "3000-sb1.localhost")
		s.next(t)
		f.clk.Advance(10 * time.Second) // staggered opens
	}
	f.settle(t)
	assert.Len(t, f.backend.drain(), 1, "later requests fall in the window")
	// The heartbeat follows the last refresh (t=0), not each stream.
	f.clk.Advance(20 * time.Second) // t=50 s
	f.settle(t)
	assert.Len(t, f.backend.drain(), 1)
	f.clk.Advance(50 * time.Second)
	f.settle(t)
	assert.Len(t, f.backend.drain(), 1)
}

func TestIdleKeepAliveStopsCountingAnIdleConnection(t *testing.T) {
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t, WithIdleKeepAlive(time.Minute))
	f.backend.set("sb1", target("sb1", up.URL)) // beat 50 s
	srv := upstream(t, f.relay.ServeHTTP)
	s := openStream(t, srv.URL, "3000-sb1.localhost")
	s.next(t)
	f.settle(t)
	require.Len(t, f.backend.drain(), 1)

	beat := func() []string {
		f.clk.Advance(50 * time.Second)
		f.settle(t)
		return f.backend.drain()
	}
	assert.Len(t, beat(), 1, "t=50 s: the first event moved bytes")
	assert.Len(t, beat(), 1, "t=100 s: idle for 50 s, under the limit")
	assert.Empty(t, beat(), "t=150 s: idle for 100 s, past the limit")
	assert.Empty(t, beat(), "t=200 s: still idle")
	assert.EqualValues(t, 2, f.relay.Stats().SkippedIdle)

	send <- "traffic"
	assert.Equal(t, "data: traffic", s.next(t))
	f.settle(t)
	assert.Len(t, f.backend.drain(), 1, "traffic after an idle beat refreshes at once")
	assert.Len(t, beat(), 1, "and makes the connection count again")
}

// hangingRefresh blocks every RefreshActivity until release is closed or
// its context ends, and tells when one has started.
func hangingRefresh(entered chan<- string, release <-chan struct{}) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		entered <- id
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func TestHangingRefreshNeverHoldsARequest(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t, WithRefreshTimeout(10*time.Second))
	f.backend.set("sb1", target("sb1", up.URL))
	entered := make(chan string, 10)
	release := make(chan struct{})
	f.backend.setRefresh(hangingRefresh(entered, release))

	rec := f.do(t, "GET", "3000-sb1.localhost", "/", nil)
	// The answer is complete while the refresh it started is still blocked.
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "ok", rec.Body.String())
	assert.Equal(t, "sb1", <-entered, "the refresh did start")
	assert.EqualValues(t, 1, f.relay.Stats().RefreshesInFlight, "and has not returned")

	// More requests pass while it hangs; none of them sends another.
	for i := 0; i < 9; i++ {
		f.clk.Advance(time.Second)
		require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-sb1.localhost", "/", nil).Code)
	}
	assert.EqualValues(t, 1, f.relay.Stats().RefreshesSent)
	assert.EqualValues(t, 1, f.relay.Stats().RefreshesInFlight)

	// Its deadline is on the clock: at 10 s the call is cancelled and
	// counted as failed, and the next request tries again (and hangs too,
	// without holding that request either).
	f.clk.Advance(time.Second)
	f.settle(t)
	assert.EqualValues(t, 1, f.relay.Stats().RefreshesFailed)
	rec = f.do(t, "GET", "3000-sb1.localhost", "/", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "sb1", <-entered)
	assert.EqualValues(t, 2, f.relay.Stats().RefreshesSent)
	close(release)
	f.settle(t)
	assert.EqualValues(t, 1, f.relay.Stats().RefreshesFailed, "released, the second call succeeded")
}

func TestConcurrentRefreshesAreBounded(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t, WithMaxConcurrentRefreshes(2))
	entered := make(chan string, 10)
	release := make(chan struct{})
	f.backend.setRefresh(hangingRefresh(entered, release))
	for _, id := range []string{"a", "b", "c"} {
		f.backend.set(id, target(id, up.URL))
		require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-"+id+".localhost", "/", nil).Code)
	}
	st := f.relay.Stats()
	assert.EqualValues(t, 2, st.RefreshesSent)
	assert.EqualValues(t, 1, st.SkippedBusy, "the third sandbox found no free slot and was served anyway")
	close(release)
	f.settle(t)
	// A skip for the bound is not a refresh: the next request tries again.
	require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-c.localhost", "/", nil).Code)
	assert.EqualValues(t, 3, f.relay.Stats().RefreshesSent)
}

func TestFailingRefreshIsCountedLoggedOnceAMinuteAndRetried(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL)) // window 45 s: retry after 4.5 s
	f.backend.setRefresh(func(context.Context, string) error {
		return provider.Errorf(provider.Unavailable, "the control plane does not answer")
	})
	for i := 0; i < 5; i++ {
		require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-sb1.localhost", "/", nil).Code)
		f.settle(t)
		f.clk.Advance(5 * time.Second)
	}
	st := f.relay.Stats()
	assert.EqualValues(t, 5, st.RefreshesSent, "each failure is retried after a tenth of the window")
	assert.EqualValues(t, 5, st.RefreshesFailed)
	assert.Equal(t, 1, strings.Count(f.logs.String(), "activity refresh failed"), "one line a minute per sandbox")

	f.clk.Advance(time.Minute)
	require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-sb1.localhost", "/", nil).Code)
	f.settle(t)
	logs := f.logs.String()
	assert.Equal(t, 2, strings.Count(logs, "activity refresh failed"))
	assert.Contains(t, logs, "failures=5", "the second line counts what the first minute held back")
	assert.Contains(t, logs, "code=unavailable")
}

func TestFailedRefreshDuringAStreamIsRetriedByTheHeartbeat(t *testing.T) {
	// Inline, the request's refresh fails before its connection opens,
	// which a refresh in the background may too: the heartbeat the
	// connection arms is the retry all the same.
	for name, o := range map[string][]Option{"background": nil, "inline": {WithInlineRefresh(true)}} {
		t.Run(name, func(t *testing.T) { testFailedRefreshDuringAStream(t, o) })
	}
}

func testFailedRefreshDuringAStream(t *testing.T, o []Option) {
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t, o...)
	f.backend.set("sb1", target("sb1", up.URL))
	var calls atomic.Int32
	f.backend.setRefresh(func(context.Context, string) error {
		if calls.Add(1) == 1 {
			return errors.New("boom")
		}
		return nil
	})
	srv := upstream(t, f.relay.ServeHTTP)
	s := openStream(t, srv.URL, "3000-sb1.localhost")
	s.next(t)
	f.settle(t)
	require.Len(t, f.backend.drain(), 1)
	f.clk.Advance(4500 * time.Millisecond)
	f.settle(t)
	assert.Len(t, f.backend.drain(), 1, "the heartbeat retries after a tenth of the window, not a whole beat")
	assert.EqualValues(t, 1, f.relay.Stats().RefreshesFailed)
}

func TestCloseStopsHeartbeatsAndCancelsRefreshes(t *testing.T) {
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	srv := upstream(t, f.relay.ServeHTTP)
	entered := make(chan string, 10)
	f.backend.setRefresh(hangingRefresh(entered, make(chan struct{})))
	s := openStream(t, srv.URL, "3000-sb1.localhost")
	s.next(t)
	<-entered
	require.Len(t, f.backend.drain(), 1)
	require.NoError(t, f.relay.Close()) // returns: the hanging refresh was cancelled
	assert.Zero(t, f.relay.Stats().RefreshesInFlight)
	assert.Zero(t, f.relay.Stats().RefreshesFailed, "a refresh cancelled by Close is no failure")
	f.clk.Advance(time.Hour)
	assert.Empty(t, f.backend.drain())
}

// With an idle limit, a connection whose idleness skipped a heartbeat
// refreshes as soon as it moves bytes again: the next beat may come after
// the sandbox's auto-stop.
func TestTrafficAfterAnIdleBeatRefreshesAtOnce(t *testing.T) {
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t, WithIdleKeepAlive(time.Minute))
	f.backend.set("sb1", target("sb1", up.URL)) // auto-stop 60 s, window 45 s, beat 50 s
	srv := upstream(t, f.relay.ServeHTTP)
	s := openStream(t, srv.URL, "3000-sb1.localhost")
	s.next(t)
	f.settle(t)
	require.Len(t, f.backend.drain(), 1) // t=0
	for i := 0; i < 3; i++ {             // t=50 refresh, t=100 refresh, t=150 skipped (idle)
		f.clk.Advance(50 * time.Second)
		f.settle(t)
	}
	require.Len(t, f.backend.drain(), 2)
	// t=151: the client is active again. Last refresh t=100, so the sandbox
	// auto-stops at t=160 unless refreshed.
	f.clk.Advance(time.Second)
	send <- "traffic"
	require.Equal(t, "data: traffic", s.next(t))
	f.clk.Advance(8 * time.Second) // t=159
	f.settle(t)
	assert.NotEmpty(t, f.backend.drain(), "active since t=151, no refresh by t=159: the sandbox auto-stops at t=160 while in use")
}

// A request refused by the sandbox a name used to resolve to, and sent
// again to the one it resolves to now, keeps the new one alive, not the
// old one, for as long as it stays open.
func TestARetriedStreamKeepsTheSandboxItReachedAlive(t *testing.T) {
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t)
	f.backend.set("app", target("old", deadURL(t)))
	f.relay.res.res = moveAfterResolve{f.backend, "app", target("new", up.URL)}
	srv := upstream(t, f.relay.ServeHTTP)

	s := openStream(t, srv.URL, "3000-app.localhost")
	assert.Equal(t, "data: hello", s.next(t))
	f.settle(t)
	assert.ElementsMatch(t, []string{"old", "new"}, f.backend.drain(), "each sandbox the request was sent to got its bump")

	for i := range 3 {
		f.clk.Advance(50 * time.Second)
		f.settle(t)
		assert.Equal(t, []string{"new"}, f.backend.drain(), "heartbeat %d", i+1)
	}
	s.cancel()
	require.Eventually(t, func() bool { return f.relay.Stats().OpenConnections == 0 }, 10*time.Second, time.Millisecond,
		"the connection closed where it was moved to")
	assert.Zero(t, f.clk.Waiters(), "no heartbeat left for either sandbox")
}

// An auto-stop interval shortened while a stream is open reaches its
// heartbeat through the backend's stale events: the beat set for the old
// interval would come after the new one had stopped the sandbox.
func TestAShorterIntervalReachesAnOpenStream(t *testing.T) {
	send := make(chan string)
	up := sseUpstream(t, send)
	clk := clocktest.NewFake(time.Time{})
	b := newBackend()
	long := target("sb1", up.URL)
	long.AutoStop = time.Hour // window 20 min, beat 22 min 13 s
	b.set("sb1", long)
	inv := invalidating{b, make(chan chan string), make(chan error)}
	rl, err := New(inv, WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	f := &fixture{clk: clk, backend: b, relay: rl}
	stale := make(chan string)
	inv.streams <- stale
	t.Cleanup(func() { close(stale) }) // before Close, which waits for the loop
	srv := upstream(t, rl.ServeHTTP)

	s := openStream(t, srv.URL, "3000-sb1.localhost")
	assert.Equal(t, "data: hello", s.next(t))
	f.settle(t)
	require.Equal(t, []string{"sb1"}, b.drain())
	resolves := b.resolveCount()

	b.set("sb1", target("sb1", up.URL)) // one minute: window 45 s, beat 50 s
	stale <- "sb1"
	require.Eventually(t, func() bool { return b.resolveCount() > resolves }, 10*time.Second, time.Millisecond,
		"the open stream's sandbox is resolved again")
	beat := func() time.Duration {
		sb := rl.track.sandbox("sb1")
		sb.mu.Lock()
		defer sb.mu.Unlock()
		return sb.beat
	}
	require.Eventually(t, func() bool { return beat() == 50*time.Second }, 10*time.Second, time.Millisecond,
		"the new timing took effect")
	f.clk.Advance(50 * time.Second)
	f.settle(t)
	assert.Equal(t, []string{"sb1"}, b.drain(), "the heartbeat came on the new interval's beat")
	s.cancel()
}
