package conformance_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/daytona"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator"
)

// Preview traffic as activity, on the backends that serve previews through
// provider/relay in their own process: the local daemon (native and docker)
// and the simulator. These are not scenarios of every provider: they hold
// streams and WebSockets open for minutes and send ten thousand requests,
// which a cassette cannot replay and a shared Daytona organization should
// not be asked to take. The relay in front of any provider is tested in
// provider/relay.

// serverPort is the port inside a local sandbox that the tests' own server
// listens on: the harness declares it for the default snapshot.
const serverPort = 3000

// serverScript is a small server a sandbox starts: /stream streams an
// event every 50 ms until the client leaves, anything else answers "ok".
// It listens on its argument, 0 for any free port, and prints the port.
const serverScript = `import http.server, os, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        if self.path.startswith("/stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                while True:
                    self.wfile.write(b"data: tick\n\n")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                return
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
host = "0.0.0.0" if os.path.exists("/.dockerenv") else "127.0.0.1"
srv = http.server.ThreadingHTTPServer((host, int(sys.argv[1])), H)
srv.daemon_threads = True
print("port %d" % srv.server_address[1], flush=True)
srv.serve_forever()
`

// relaySlack bounds the part of a wait that does not scale with the
// minute: a stop's grace period, a container stopping, a slow machine.
const relaySlack = 20 * time.Second

// relayOpts are what a test asks of its backend.
type relayOpts struct {
	minute        time.Duration
	idleKeepAlive time.Duration // 0: an open connection counts while open
}

// relayBackend is one backend whose previews run through provider/relay.
type relayBackend struct {
	p       provider.Provider
	minute  time.Duration
	traits  provider.Traits
	client  *http.Client
	declare bool // previews reach declared ports only: the server uses serverPort
	// toolbox is where sb's toolbox answers through a relay: the local
	// daemon's preview of the workload port, the simulator's toolbox proxy.
	toolbox func(t *testing.T, sb *provider.Sandbox) (string, http.Header)
	// refreshes counts the refreshes of sb that its toolbox's relay sends
	// from now on: activity events with source proxy where the backend has
	// events, else the relay's metrics.
	refreshes func(t *testing.T, sb *provider.Sandbox) func() int
}

type relayMaker func(t *testing.T, o relayOpts) *relayBackend

// TestRelayActivity runs the preview activity cases on local native, local
// docker and the simulator, all in parallel.
func TestRelayActivity(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, mk relayMaker)
	}{
		{"stream_keeps_alive_until_the_client_leaves", streamKeepsSandboxAliveUntilTheClientLeaves},
		{"burst_sends_a_handful_of_refreshes", burstSendsAHandfulOfRefreshes},
		{"websocket_with_traffic_keeps_alive", webSocketWithTrafficKeepsSandboxAlive},
		{"idle_websocket_counts_while_open", idleWebSocketCountsWhileOpen},
		{"idle_websocket_stops_counting_after_the_keep_alive", idleWebSocketStopsCountingAfterTheKeepAlive},
	}
	backends := []struct {
		name string
		mk   func(t *testing.T) relayMaker
	}{
		{"local", func(*testing.T) relayMaker {
			return func(t *testing.T, o relayOpts) *relayBackend { return localRelayBackend(t, nil, o) }
		}},
		{"docker", func(t *testing.T) relayMaker {
			env := newDockerEnv(t)
			return func(t *testing.T, o relayOpts) *relayBackend { return localRelayBackend(t, env, o) }
		}},
		{"sim", func(*testing.T) relayMaker { return simRelayBackend }},
	}
	for _, b := range backends {
		if *providerFlag != "" && *providerFlag != b.name {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			mk := b.mk(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, mk)
				})
			}
		})
	}
}

// relayMinute is the interval minute of the cases that hold traffic open:
// Daytona's heartbeat comes 50 s into a 60 s interval, and at the suite's
// shrunk minute those 10 s would be a scheduling hiccup on a busy machine.
func relayMinute() time.Duration { return max(*minuteFlag, 2*time.Second) }

func (o relayOpts) withDefaults() relayOpts {
	if o.minute == 0 {
		o.minute = relayMinute()
	}
	return o
}

func localRelayBackend(t *testing.T, env *dockerEnv, o relayOpts) *relayBackend {
	o = o.withDefaults()
	cfg := fmt.Sprintf("snapshots:\n  default:\n    ports: [%d]\n", serverPort)
	if o.idleKeepAlive > 0 {
		cfg += "previewIdleKeepAlive: " + o.idleKeepAlive.String() + "\n"
	}
	d := startDaemonWith(t, env, cfg, o.minute)
	var p provider.Provider = d.P
	if env != nil {
		p = dockerProvider{d.P}
	}
	return &relayBackend{
		p: p, minute: o.minute, traits: localExpect.Traits, declare: true,
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}},
		toolbox: func(t *testing.T, sb *provider.Sandbox) (string, http.Header) {
			pv, err := d.P.PreviewURL(t.Context(), sb.ID, localExpect.WorkloadPort)
			require.NoError(t, err)
			return pv.URL, http.Header{provider.PreviewTokenHeader: {pv.Token}}
		},
		refreshes: func(t *testing.T, sb *provider.Sandbox) func() int { return countProxyEvents(t, d.P, sb.ID) },
	}
}

// countProxyEvents counts the activity events with source proxy of id from
// now on.
func countProxyEvents(t *testing.T, p *local.Provider, id string) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := p.Watch(ctx, provider.WatchOptions{})
	require.NoError(t, err)
	var n atomic.Int64
	var wg sync.WaitGroup
	snapshot := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		first := true
		for ev := range ch {
			if first {
				// The stream begins with a snapshot: what follows is new.
				close(snapshot)
				first = false
			}
			if ev.Type == provider.EventActivity && ev.Source == provider.SourceProxy && ev.Sandbox != nil && ev.Sandbox.ID == id {
				n.Add(1)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	select {
	case <-snapshot:
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream sent no snapshot")
	}
	base := n.Load()
	return func() int {
		// The first refresh is waited for, however late it comes (the
		// deadline only stops a hang). The pause after it lets any more
		// arrive: a correct relay sends none, so a slow machine can hide
		// a bug there but never fail the count.
		for deadline := time.Now().Add(10 * time.Second); n.Load() == base && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
		}
		time.Sleep(200 * time.Millisecond) // a chance for extra refreshes only; cannot fail a right relay
		return int(n.Load() - base)
	}
}

func simRelayBackend(t *testing.T, o relayOpts) *relayBackend {
	o = o.withDefaults()
	clk := clock.Real()
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	be, err := simulator.NewRuntimeBackend(simulator.RuntimeBackendConfig{
		Runtime: native.New(native.WithClock(clk)), Clock: clk, Root: root,
		Command: []string{testdaemon.Binary(t), "toolbox"}, StopGrace: 2 * time.Second,
	})
	require.NoError(t, err)
	sim, err := simulator.New(simulator.Config{
		Clock: clk, APIKeys: []string{simKey}, Profile: simProfile, Minute: o.minute,
		Backend: be, Seed: 1, ProxyIdleKeepAlive: o.idleKeepAlive,
	})
	if err != nil {
		_ = be.Close()
		require.NoError(t, err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		assert.NoError(t, sim.Close())
	})
	p, err := daytona.New(daytona.WithAPIKey(simKey), daytona.WithAPIURL(srv.URL+"/api"), daytona.WithClock(clk), daytona.WithMinute(o.minute))
	require.NoError(t, err)
	return &relayBackend{
		p: p, minute: o.minute, traits: daytonaExpect.Traits,
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}},
		toolbox: func(t *testing.T, sb *provider.Sandbox) (string, http.Header) {
			base, h, err := p.Toolbox(t.Context(), sb.ID)
			require.NoError(t, err)
			return base, h
		},
		refreshes: func(t *testing.T, _ *provider.Sandbox) func() int {
			// One sandbox per simulator: its toolbox relay's refreshes are
			// that sandbox's.
			base := simToolboxRefreshes(t, srv.URL)
			return func() int { return simToolboxRefreshes(t, srv.URL) - base }
		},
	}
}

var refreshesSent = regexp.MustCompile(`(?m)^sandplane_relay_refreshes_sent_total\{proxy="toolbox"\} (\S+)$`)

// simToolboxRefreshes reads the refreshes the simulator's toolbox relay
// sent from its metrics.
func simToolboxRefreshes(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := refreshesSent.FindSubmatch(body)
	require.NotNil(t, m, "the simulator's metrics have the toolbox relay's refreshes:\n%s", body)
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return int(v)
}

// relayCase is a sandbox of a backend, and the test's helpers.
type relayCase struct {
	t  *testing.T
	b  *relayBackend
	sb *provider.Sandbox
}

// newRelayCase creates a sandbox that does not stop by itself until
// setAutoStop says: setting up a server takes longer than a shrunk minute.
func newRelayCase(t *testing.T, b *relayBackend) *relayCase {
	t.Helper()
	sb, err := b.p.Create(t.Context(), provider.CreateRequest{Name: "relay-" + runID(), AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.p.Delete(context.Background(), sb.ID) })
	return &relayCase{t: t, b: b, sb: sb}
}

// setAutoStop sets the sandbox's interval, which is not activity: what
// keeps it alive from here is the traffic the case holds open.
func (c *relayCase) setAutoStop(minutes int) {
	c.t.Helper()
	sb, err := c.b.p.SetAutoStopInterval(c.t.Context(), c.sb.ID, minutes)
	require.NoError(c.t, err)
	c.sb = sb
}

func (c *relayCase) state() *provider.Sandbox {
	c.t.Helper()
	sb, err := c.b.p.Get(c.t.Context(), c.sb.ID)
	require.NoError(c.t, err)
	return sb
}

// exec runs command in the sandbox through its toolbox.
func (c *relayCase) exec(command string) string {
	c.t.Helper()
	base, h := c.b.toolbox(c.t, c.sb)
	body, err := json.Marshal(map[string]string{"command": command})
	require.NoError(c.t, err)
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, strings.TrimRight(base, "/")+"/process/execute", strings.NewReader(string(body)))
	require.NoError(c.t, err)
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.b.client.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, "execute: %s", data)
	var res struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	require.NoError(c.t, json.Unmarshal(data, &res))
	require.Zero(c.t, res.ExitCode, res.Result)
	return res.Result
}

// startServer starts serverScript in the sandbox and returns the preview
// of its port: the declared serverPort where ports are declared (natively
// bound at the host port $PORT_3000 names), else a free one.
func (c *relayCase) startServer() *provider.Preview {
	c.t.Helper()
	arg := "0"
	if c.b.declare {
		arg = "${PORT_" + strconv.Itoa(serverPort) + "}"
	}
	out := c.exec("cat > relay_server.py <<'EOF'\n" + serverScript + "EOF\n" +
		": >relay_server.log; nohup python3 -u relay_server.py " + arg + " </dev/null >>relay_server.log 2>&1 & " +
		"for i in $(seq 100); do grep -o 'port [0-9]*' relay_server.log && exit 0; sleep 0.1; done; cat relay_server.log; exit 1")
	var n int
	_, err := fmt.Sscanf(strings.TrimSpace(out), "port %d", &n)
	require.NoError(c.t, err, "the server's port: %s", out)
	if c.b.declare {
		n = serverPort
	}
	pv, err := c.b.p.PreviewURL(c.t.Context(), c.sb.ID, n)
	require.NoError(c.t, err, "preview of port %d", n)
	return pv
}

// get is a request through the preview pv.
func (c *relayCase) get(ctx context.Context, pv *provider.Preview, path string) *http.Request {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(pv.URL, "/")+path, nil)
	require.NoError(c.t, err)
	if pv.Token != "" {
		req.Header.Set(provider.PreviewTokenHeader, pv.Token)
	}
	return req
}

// holdFor checks, for minutes interval minutes, that the sandbox stays
// started while during keeps it in use.
func (c *relayCase) holdFor(minutes float64, during func()) {
	c.t.Helper()
	deadline := time.Now().Add(time.Duration(minutes * float64(c.b.minute)))
	for time.Now().Before(deadline) {
		during()
		got := c.state()
		require.Equal(c.t, provider.StateStarted, got.State, "the sandbox stopped while in use: %s", describeSandbox(got))
	}
}

// waitAutoStopped waits, at most the interval, a reap, a minute and
// relaySlack, for the sandbox to stop for idleness.
func (c *relayCase) waitAutoStopped() time.Time {
	c.t.Helper()
	within := time.Duration((float64(c.sb.AutoStopInterval)+c.b.traits.ReapIntervalMinutes+1)*float64(c.b.minute)) + relaySlack
	require.Eventually(c.t, func() bool { return c.state().State == provider.StateStopped }, within, c.b.minute/10,
		"the sandbox should auto-stop within %s", within)
	if !c.b.traits.NoStopReason {
		assert.Equal(c.t, provider.ErrorReasonAutoStopped, c.state().ErrorReason)
	}
	return time.Now()
}

// ptyConn opens a shell's WebSocket in the sandbox's toolbox through a
// relay, and drains what it says, counting the bytes.
func (c *relayCase) ptyConn(ctx context.Context) (*websocket.Conn, *atomic.Int64) {
	c.t.Helper()
	base, h := c.b.toolbox(c.t, c.sb)
	u := strings.Replace(strings.TrimRight(base, "/"), "http", "ws", 1) + "/process/pty/create-connect?id=relay-" + runID() + "&cols=80&rows=24"
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.b.client, HTTPHeader: h})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	require.NoError(c.t, err, "open the PTY WebSocket")
	c.t.Cleanup(func() { conn.CloseNow() })
	var got atomic.Int64
	go func() {
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			got.Add(int64(len(b)))
		}
	}()
	return conn, &got
}

func describeSandbox(sb *provider.Sandbox) string {
	return fmt.Sprintf("%s %s (%s)", sb.ID, sb.State, sb.ErrorReason)
}

func streamKeepsSandboxAliveUntilTheClientLeaves(t *testing.T, mk relayMaker) {
	c := newRelayCase(t, mk(t, relayOpts{}))
	pv := c.startServer()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp, err := c.b.client.Do(c.get(ctx, pv, "/stream"))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := bufio.NewScanner(resp.Body)
	c.setAutoStop(1)

	// One response, streaming for three interval minutes.
	c.holdFor(3, func() {
		require.True(t, lines.Scan(), "the stream ended: %v", lines.Err())
	})

	cancel()
	left := time.Now()
	stopped := c.waitAutoStopped()
	t.Logf("stopped %.1f interval minutes after the client left", float64(stopped.Sub(left))/float64(c.b.minute))
}

func burstSendsAHandfulOfRefreshes(t *testing.T, mk relayMaker) {
	// A real minute: the burst fits in a few of Daytona's 45 s dedupe
	// windows.
	b := mk(t, relayOpts{minute: time.Minute})
	c := newRelayCase(t, b)
	c.setAutoStop(60)
	base, h := b.toolbox(t, c.sb)
	count := b.refreshes(t, c.sb)

	const n, workers = 10000, 16
	start := time.Now()
	var failed atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= n {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimRight(base, "/")+"/version", nil)
				if err != nil {
					failed.Add(1)
					continue
				}
				req.Header = h.Clone()
				resp, err := b.client.Do(req)
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
	wg.Wait()
	elapsed := time.Since(start)
	require.Zero(t, failed.Load(), "requests of the burst failed")

	// One refresh per 45 s window (scaled), and one more for the
	// window the burst began in.
	window := time.Duration(0.75 * float64(b.minute))
	most := int(math.Ceil(float64(elapsed)/float64(window))) + 1
	got := count()
	t.Logf("%d requests in %s: %d refreshes", n, elapsed.Round(time.Millisecond), got)
	assert.GreaterOrEqual(t, got, 1, "the burst is activity")
	assert.LessOrEqual(t, got, most, "a burst sends one refresh per 45 s window, not one per request")
}

func webSocketWithTrafficKeepsSandboxAlive(t *testing.T, mk relayMaker) {
	c := newRelayCase(t, mk(t, relayOpts{}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn, got := c.ptyConn(ctx)
	c.setAutoStop(1)

	c.holdFor(3, func() {
		require.NoError(t, conn.Write(ctx, websocket.MessageBinary, []byte("echo tick\n")))
		time.Sleep(c.b.minute / 10) // the traffic's pace, not a wait for anything
	})
	assert.Positive(t, got.Load(), "the shell answered through the relay")

	conn.Close(websocket.StatusNormalClosure, "")
	c.waitAutoStopped()
}

func idleWebSocketStopsCountingAfterTheKeepAlive(t *testing.T, mk relayMaker) {
	c := newRelayCase(t, mk(t, relayOpts{idleKeepAlive: relayMinute() / 2}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c.ptyConn(ctx)
	c.setAutoStop(1)
	// Open, and silent after the shell's prompt: past the keep-alive it
	// no longer counts, and the sandbox stops on schedule.
	c.waitAutoStopped()
}

// idleWebSocketCountsWhileOpen is the other side of the keep-alive limit:
// without one, an open WebSocket counts for as long as it is open, as on
// Daytona, however quiet.
func idleWebSocketCountsWhileOpen(t *testing.T, mk relayMaker) {
	c := newRelayCase(t, mk(t, relayOpts{}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn, _ := c.ptyConn(ctx)
	c.setAutoStop(1)
	c.holdFor(3, func() { time.Sleep(c.b.minute / 10) }) // silence, checked at this pace
	conn.Close(websocket.StatusNormalClosure, "")
	c.waitAutoStopped()
}
