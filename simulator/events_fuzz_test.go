package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator"
)

// FuzzEventGatewayMessages posts arbitrary engine.io payloads, as a
// client connected to Daytona's notification gateway may send, to the
// simulator's socket.io endpoint, after the handshake and an authenticated
// connect. The gateway decodes them with the socket.io and engine.io
// parsers in the simulator's own process: whatever comes in, the simulator
// must stay up and keep accepting new clients.
func FuzzEventGatewayMessages(f *testing.F) {
	sim, err := simulator.New(simulator.Config{Seed: 1})
	require.NoError(f, err)
	srv := httptest.NewServer(sim.Handler())
	f.Cleanup(func() {
		srv.Close()
		require.NoError(f, sim.Close())
		awaitGatewayTimers(f)
	})
	for _, seed := range []string{
		`42["subscribe",{"room":"x"}]`,
		`42/admin,["x"]`,
		"451-[\"ev\",{\"_placeholder\":true,\"num\":0}]",
		`43[]`,
		"4" + strings.Repeat("[", 64),
		`41`,
		"2\x1e3\x1e42[\"a\"]",
		"b" + "AAAA",
		`6`,
		``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		sid := handshake(t, srv.URL)
		connect(t, srv.URL, sid)
		post(t, srv.URL, sid, payload)
		post(t, srv.URL, sid, "1")                   // close, whatever state the session is in
		post(t, srv.URL, handshake(t, srv.URL), "1") // still up and accepting
	})
}

// gatewayTimerWait bounds awaitGatewayTimers: the socket.io server's
// longest timer, its connect timeout (45 s), and a margin.
const gatewayTimerWait = time.Minute

// awaitGatewayTimers waits for the socket.io library's timers to end. A
// client the gateway drops for a malformed packet leaves its connect or
// ping timer running until it fires; the timer then finds the client
// closed and returns. Waiting here, rather than ignoring those goroutines,
// keeps the test binary's leak check whole: a timer that never ends still
// fails it.
func awaitGatewayTimers(tb testing.TB) {
	deadline := time.Now().Add(gatewayTimerWait)
	for gatewayTimers() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // a poll; the deadline only stops a hang
	}
	if n := gatewayTimers(); n > 0 {
		tb.Errorf("%d socket.io timers still run %v after the simulator closed", n, gatewayTimerWait)
	}
}

// gatewayTimers counts the goroutines of the socket.io library's timers.
func gatewayTimers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "socket.io/v3/pkg/utils.SetTimeout.func1")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// handshake opens an engine.io polling session and returns its id.
func handshake(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/api/socket.io/?EIO=4&transport=polling")
	require.NoError(t, err, "the gateway answers a new client")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.True(t, strings.HasPrefix(string(body), "0"), "an open packet: %q", body)
	var open struct {
		SID string `json:"sid"`
	}
	require.NoError(t, json.Unmarshal(body[1:], &open), "%q", body)
	return open.SID
}

// connect joins the session to the default namespace with an API key, and
// requires the gateway to let it in, so that the payloads reach an
// authenticated socket, where events are handled.
func connect(t *testing.T, base, sid string) {
	t.Helper()
	post(t, base, sid, `40{"token":"fuzz-key"}`)
	resp, err := http.Get(base + "/api/socket.io/?EIO=4&transport=polling&sid=" + sid)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `40{"sid"`, "the gateway lets the client in")
}

// post sends payload on the session's polling transport; whether the
// gateway takes it is not the question, only that it answers.
func post(t *testing.T, base, sid, payload string) {
	t.Helper()
	resp, err := http.Post(base+"/api/socket.io/?EIO=4&transport=polling&sid="+sid, "text/plain;charset=UTF-8", strings.NewReader(payload))
	require.NoError(t, err, "post %q", payload)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
