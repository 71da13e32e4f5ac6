package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
		post(t, srv.URL, sid, "1") // close, whatever state the session is in
		handshake(t, srv.URL)      // still up and accepting
	})
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
