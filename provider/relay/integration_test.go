package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/relay"
)

// envWorkload makes this test binary the sandbox's workload instead of
// running tests: a small server on $PORT that streams SSE and echoes
// WebSocket messages, spawned by a real daemon as any workload is.
const envWorkload = "SANDPLANE_RELAY_TEST_WORKLOAD"

func TestMain(m *testing.M) {
	if os.Getenv(envWorkload) == "1" {
		os.Exit(serveWorkload())
	}
	os.Exit(testdaemon.Main(m))
}

func serveWorkload() int {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	// /sse sends "data: tick N" every ?every until the client leaves.
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		every, err := time.ParseDuration(r.URL.Query().Get("every"))
		if err != nil {
			http.Error(w, "every: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			if _, err := fmt.Fprintf(w, "data: tick %d\n\n", n); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				return
			}
		}
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), mux); err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		return 1
	}
	return 0
}

// workloadPort is the workload's port inside the sandbox, the daemon's
// default: what a preview names, whatever host port it runs on.
const workloadPort = 4000

// minute is the daemon's interval minute: a one-minute auto-stop interval
// lasts two seconds, and Daytona's 45 s and 50 s scale to 1.5 s and 1.67 s.
const minute = 2 * time.Second

type env struct {
	d     *testdaemon.Daemon
	sb    *provider.Sandbox
	relay *relay.Relay
	url   string // the relay
	host  string // <port>-<id>.localhost
	token string // the sandbox's preview token
}

// setup runs a daemon whose snapshot is this binary's workload, creates a
// sandbox with autoStop interval minutes, and puts a relay in front.
func setup(t *testing.T, autoStop int, opts ...relay.Option) *env {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cfg := "snapshots:\n  relay-workload:\n    command: [" + strconv.Quote(self) + "]\n    env: {" + envWorkload + ": \"1\"}\n"
	d := testdaemon.Start(t, testdaemon.Options{Minute: minute, Config: cfg, Ports: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sb, err := d.P.Create(ctx, provider.CreateRequest{Snapshot: "relay-workload", AutoStopInterval: &autoStop})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.P.Delete(context.Background(), sb.ID) })
	pv, err := d.P.PreviewURL(ctx, sb.ID, workloadPort)
	require.NoError(t, err)
	require.NotEmpty(t, pv.Token, "local sandboxes are private")
	rl, err := relay.New(relay.FromProvider(d.P), opts...)
	require.NoError(t, err)
	srv := httptest.NewServer(rl)
	t.Cleanup(func() {
		srv.Close()
		_ = rl.Close()
	})
	return &env{d: d, sb: sb, relay: rl, url: srv.URL, host: strconv.Itoa(workloadPort) + "-" + sb.ID + ".localhost", token: pv.Token}
}

// request is a request to the sandbox through the relay, with its token.
func (e *env) request(t *testing.T, ctx context.Context, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	require.NoError(t, err)
	req.Host = e.host
	req.Header.Set(provider.PreviewTokenHeader, e.token)
	return req
}

func (e *env) state(t *testing.T) *provider.Sandbox {
	t.Helper()
	sb, err := e.d.P.Get(context.Background(), e.sb.ID)
	require.NoError(t, err)
	return sb
}

// waitAutoStopped waits for the sandbox to stop for idleness and returns
// when it saw the stop.
func (e *env) waitAutoStopped(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	require.Eventually(t, func() bool { return e.state(t).State == provider.StateStopped }, within, 50*time.Millisecond,
		"the sandbox should auto-stop within %s", within)
	stopped := time.Now()
	assert.Equal(t, provider.ErrorReasonAutoStopped, e.state(t).ErrorReason)
	return stopped
}

// holdFor keeps the sandbox under watch for d and fails if it stops.
func (e *env) holdFor(t *testing.T, d time.Duration, during func()) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		during()
		require.Equal(t, provider.StateStarted, e.state(t).State, "the sandbox stopped while in use")
	}
}

func TestIntegrationStreamKeepsSandboxAliveUntilClientLeaves(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(e.request(t, ctx, "/sse?every=200ms"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)

	// Three interval minutes of one response: the sandbox stays started.
	e.holdFor(t, 3*minute, func() {
		require.True(t, lines.Scan(), "the stream ended: %v", lines.Err())
	})
	assert.GreaterOrEqual(t, e.relay.Stats().Heartbeats, uint64(2), "the heartbeat kept it alive")

	// The client leaves: the heartbeat ends, and the sandbox stops on schedule.
	cancel()
	left := time.Now()
	require.Eventually(t, func() bool { return e.relay.Stats().OpenConnections == 0 }, 5*time.Second, 10*time.Millisecond)
	sent := e.relay.Stats().RefreshesSent
	stopped := e.waitAutoStopped(t, 4*minute)
	// Due one interval after the last refresh, which was at most a beat
	// before the client left; the reaper looks once an interval minute.
	assert.Less(t, stopped.Sub(left), 2*minute+time.Second, "stopped on schedule, not later")
	assert.Equal(t, sent, e.relay.Stats().RefreshesSent, "nothing refreshed it after the client left")
}

func TestIntegrationBurstSendsAHandfulOfRefreshes(t *testing.T) {
	t.Parallel()
	// A 60-minute interval: the window is 20 interval minutes (40 s here).
	e := setup(t, 60)
	events := watchActivity(t, e)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()

	const n, workers = 10000, 16
	var failed atomic.Int64
	start := time.Now()
	base := e.request(t, context.Background(), "/")
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				resp, err := client.Do(base.Clone(context.Background()))
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	require.Zero(t, failed.Load(), "every request was served")

	st := e.relay.Stats()
	handful := uint64(1 + elapsed/(20*minute))
	t.Logf("%d requests in %s: %d refreshes sent, %d debounced", n, elapsed, st.RefreshesSent, st.SkippedDebounce)
	assert.EqualValues(t, n, st.Requests)
	assert.LessOrEqual(t, st.RefreshesSent, handful)
	assert.GreaterOrEqual(t, st.RefreshesSent, uint64(1))
	// The daemon saw exactly what the relay sent.
	require.Eventually(t, func() bool { return events.Load() == int64(st.RefreshesSent) }, 5*time.Second, 10*time.Millisecond,
		"activity events %d, refreshes sent %d", events.Load(), st.RefreshesSent)
}

// watchActivity counts the daemon's refresh events for the sandbox.
func watchActivity(t *testing.T, e *env) *atomic.Int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := e.d.P.Watch(ctx, provider.WatchOptions{})
	require.NoError(t, err)
	first := <-ch
	require.Equal(t, provider.EventSandboxesReplaced, first.Type)
	var n atomic.Int64
	go func() {
		for ev := range ch {
			if ev.Type == provider.EventActivity && ev.Source == provider.SourceRefresh && ev.Sandbox != nil && ev.Sandbox.ID == e.sb.ID {
				n.Add(1)
			}
		}
	}()
	return &n
}

func (e *env) dialWS(t *testing.T) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+e.url[len("http"):]+"/ws", &websocket.DialOptions{
		Host: e.host, HTTPHeader: http.Header{provider.PreviewTokenHeader: {e.token}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

func TestIntegrationWebSocketWithTrafficKeepsSandboxAlive(t *testing.T) {
	t.Parallel()
	e := setup(t, 1, relay.WithIdleKeepAlive(minute/2))
	c := e.dialWS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.holdFor(t, 3*minute, func() {
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("ping")))
		_, msg, err := c.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, "ping", string(msg))
		// The traffic's pace, not a wait for anything: the relay must keep
		// the sandbox alive across the gaps, however long they take.
		time.Sleep(200 * time.Millisecond) // the pace of the traffic, not a wait
	})
	require.NoError(t, c.Close(websocket.StatusNormalClosure, "done"))
	e.waitAutoStopped(t, 4*minute)
}

func TestIntegrationIdleWebSocketNoLongerKeepsSandboxAlive(t *testing.T) {
	t.Parallel()
	e := setup(t, 1, relay.WithIdleKeepAlive(minute/2))
	c := e.dialWS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("hello")))
	_, _, err := c.Read(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, e.relay.Stats().OpenConnections)

	// The client never closes it, and sends nothing more.
	e.waitAutoStopped(t, 5*minute)
	assert.GreaterOrEqual(t, e.relay.Stats().SkippedIdle, uint64(1), "the idle connection's heartbeat was skipped")
}

func TestIntegrationStoppedSandboxAnswers503AtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	ctx := context.Background()
	status := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := status(e.request(t, ctx, "/"))
	require.Equal(t, http.StatusOK, code, body)

	_, err := e.d.P.Stop(ctx, e.sb.ID)
	require.NoError(t, err)
	// The relay learns of the stop from the daemon's events, or from the
	// refused connection: either way the answer is a clear 503 at once.
	code, body = status(e.request(t, ctx, "/"))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "is stopped: start it, then retry")

	_, err = e.d.P.Start(ctx, e.sb.ID)
	require.NoError(t, err)
	sb := e.state(t)
	pv, err := e.d.P.PreviewURL(ctx, sb.ID, workloadPort)
	require.NoError(t, err)
	path := "/" + strconv.Itoa(workloadPort) + "-" + sb.ID + "/"

	// By path: no token, then the preview link (refused: a path route's
	// origin is every sandbox's), then the header.
	req, _ := http.NewRequest("GET", e.url+path, nil)
	code, body = status(req)
	assert.Equal(t, http.StatusUnauthorized, code, body)
	req, _ = http.NewRequest("GET", e.url+path+"?"+relay.TokenParam+"="+pv.Token, nil)
	code, body = status(req)
	assert.Equal(t, http.StatusUnauthorized, code, body)
	req, _ = http.NewRequest("GET", e.url+path, nil)
	req.Header.Set(relay.TokenHeader, pv.Token)
	code, body = status(req)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "ok", body)
}
