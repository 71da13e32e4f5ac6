package toolbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// wsClient is a test-side WebSocket connection that collects what the
// server sends.
type wsClient struct {
	conn *websocket.Conn
	mu   sync.Mutex
	text []string // text messages, in order
	out  []byte   // binary payload, concatenated
	done chan struct{}
	err  error // the read error that ended the connection
}

func dialWS(t *testing.T, url string, protocols ...string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{
		Subprotocols: protocols,
		HTTPHeader:   http.Header{TokenHeader: {testToken}},
	})
	require.NoError(t, err)
	if resp.Body != nil {
		resp.Body.Close()
	}
	conn.SetReadLimit(64 << 20)
	c := &wsClient{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			typ, b, err := conn.Read(context.Background())
			c.mu.Lock()
			if err != nil {
				c.err = err
				c.mu.Unlock()
				return
			}
			if typ == websocket.MessageText {
				c.text = append(c.text, string(b))
			} else {
				c.out = append(c.out, b...)
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.CloseNow(); <-c.done })
	return c
}

func (c *wsClient) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.out)
}

func (c *wsClient) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.text...)
}

func (c *wsClient) send(t *testing.T, s string) {
	t.Helper()
	require.NoError(t, c.conn.Write(context.Background(), websocket.MessageBinary, []byte(s)))
}

func (c *wsClient) waitOutput(t *testing.T, substr string) {
	t.Helper()
	waitFor(t, "PTY output "+substr, func() bool { return strings.Contains(c.output(), substr) })
}

// closed waits for the server to close and returns the close status.
func (c *wsClient) closed(t *testing.T) websocket.CloseError {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not close the connection")
	}
	var ce websocket.CloseError
	require.True(t, errors.As(c.err, &ce), "closed with %v", c.err)
	return ce
}

func waitConnected(t *testing.T, c *wsClient) {
	t.Helper()
	waitFor(t, "the connected control message", func() bool {
		ts := c.texts()
		return len(ts) > 0
	})
	assert.JSONEq(t, `{"type":"control","status":"connected"}`, c.texts()[0])
}

func TestPtyLifecycle(t *testing.T) {
	requireTool(t, "stty")
	ts := newTestServer(t, Options{})

	resp := ts.postJSON(t, "/process/pty", wire.PtyCreateRequest{ID: "term", Cols: ref(80), Rows: ref(24), Envs: map[string]string{"SECRET_TOKEN": "hunter2"}})
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	assert.JSONEq(t, `{"sessionId":"term"}`, string(resp.body))

	t.Run("duplicate id", func(t *testing.T) {
		resp := ts.postJSON(t, "/process/pty", wire.PtyCreateRequest{ID: "term"})
		require.Equal(t, http.StatusConflict, resp.status)
		resp.apiErr(t)
	})

	var info wire.PtySessionInfo
	ts.get(t, "/process/pty/term").json(t, &info)
	assert.True(t, info.Active)
	assert.Equal(t, ts.workDir, info.Cwd)
	assert.Equal(t, map[string]string{"SECRET_TOKEN": ""}, info.Envs, "names only, never values")
	assert.NotContains(t, string(ts.get(t, "/process/pty").body), "hunter2")

	c := dialWS(t, ts.url+"/process/pty/term/connect")
	waitConnected(t, c)

	c.send(t, "echo \"tok=$SECRET_TOKEN\"; stty size\n")
	c.waitOutput(t, "tok=hunter2")
	c.waitOutput(t, "24 80")

	resp = ts.postJSON(t, "/process/pty/term/resize", wire.PtyResizeRequest{Cols: ref(100), Rows: ref(30)})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	resp.json(t, &info)
	assert.Equal(t, 100, info.Cols)
	assert.Equal(t, 30, info.Rows)
	c.send(t, "stty size\n")
	c.waitOutput(t, "30 100")

	t.Run("bad resize", func(t *testing.T) {
		for _, body := range []any{wire.PtyResizeRequest{Cols: ref(0), Rows: ref(10)}, wire.PtyResizeRequest{Cols: ref(10), Rows: ref(1001)}, map[string]int{"cols": 10}} {
			resp := ts.postJSON(t, "/process/pty/term/resize", body)
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		}
	})

	// A background job in its own process group still belongs to the
	// terminal's session, and dies with it.
	pidFile := filepath.Join(ts.workDir, "bg.pid")
	c.send(t, "sleep 1000 & echo $! > "+pidFile+"\n")
	bg := readPID(t, pidFile)
	require.True(t, processAlive(bg))

	var list wire.PtyListResponse
	ts.get(t, "/process/pty").json(t, &list)
	require.Len(t, list.Sessions, 1)

	// The shell is hung up before it is killed, as a closed terminal
	// would: its exit trap runs.
	trapped := filepath.Join(ts.workDir, "trapped")
	c.send(t, "trap 'echo released > "+trapped+"' EXIT; echo trap-$((1+1))\n")
	c.waitOutput(t, "trap-2")

	resp = ts.do(t, http.MethodDelete, "/process/pty/term", nil, "")
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	waitFor(t, "the background job to die", func() bool { return !processAlive(bg) })
	b, err := os.ReadFile(trapped)
	require.NoError(t, err, "the shell was killed before its exit trap ran")
	assert.Equal(t, "released\n", string(b))

	ce := c.closed(t)
	assert.Equal(t, websocket.StatusNormalClosure, ce.Code)
	var exit ptyExit
	require.NoError(t, json.Unmarshal([]byte(ce.Reason), &exit), "reason %q", ce.Reason)
	require.NotNil(t, exit.ExitCode)
	assert.Equal(t, 137, *exit.ExitCode, "killed by SIGKILL")

	assert.Equal(t, http.StatusNotFound, ts.get(t, "/process/pty/term").status)
	assert.Equal(t, http.StatusNotFound, ts.do(t, http.MethodDelete, "/process/pty/term", nil, "").status)
	ts.get(t, "/process/pty").json(t, &list)
	assert.Empty(t, list.Sessions)
}

func TestPtyExit(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/pty", wire.PtyCreateRequest{ID: "lazy", LazyStart: true}).status)

	var info wire.PtySessionInfo
	ts.get(t, "/process/pty/lazy").json(t, &info)
	assert.False(t, info.Active, "a lazy PTY starts on its first connection")

	c := dialWS(t, ts.url+"/process/pty/lazy/connect", ptyExitControlProtocol)
	waitConnected(t, c)
	assert.Equal(t, ptyExitControlProtocol, c.conn.Subprotocol())
	c.send(t, "echo bye; exit 3\n")
	ce := c.closed(t)
	assert.Equal(t, websocket.StatusNormalClosure, ce.Code)
	assert.JSONEq(t, `{"exitCode":3,"exitReason":"exited with code 3"}`, ce.Reason)
	assert.Contains(t, c.output(), "bye")
	texts := c.texts()
	require.Len(t, texts, 2, "connected, then exited: %q", texts)
	assert.JSONEq(t, `{"type":"control","status":"exited","exitCode":3,"exitReason":"exited with code 3"}`, texts[1])

	ts.get(t, "/process/pty/lazy").json(t, &info)
	assert.False(t, info.Active, "an exited PTY is listed as inactive until deleted")

	t.Run("connecting to an exited PTY reports its exit", func(t *testing.T) {
		c := dialWS(t, ts.url+"/process/pty/lazy/connect")
		ce := c.closed(t)
		assert.JSONEq(t, `{"exitCode":3,"exitReason":"exited with code 3"}`, ce.Reason)
	})
	t.Run("an unknown PTY", func(t *testing.T) {
		c := dialWS(t, ts.url+"/process/pty/nope/connect")
		ce := c.closed(t)
		assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
		assert.JSONEq(t, `{"error":"PTY session nope not found"}`, ce.Reason)
		require.NotEmpty(t, c.texts())
		assert.JSONEq(t, `{"type":"control","status":"error","error":"PTY session nope not found"}`, c.texts()[0])

		resp := ts.get(t, "/process/pty/nope/connect")
		require.Equal(t, http.StatusNotFound, resp.status, "a plain request gets the error body")
		resp.apiErr(t)
	})
}

func TestPtyTwoClients(t *testing.T) {
	ts := newTestServer(t, Options{})
	marker := filepath.Join(ts.workDir, "ready")
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/pty", wire.PtyCreateRequest{ID: "eager"}).status)
	// Every connected client sees the terminal's output, whoever typed.
	c := dialWS(t, ts.url+"/process/pty/eager/connect")
	waitConnected(t, c)
	c.send(t, "touch "+marker+"; echo early-$((1+1))\n")
	c.waitOutput(t, "early-2")
	_, err := os.Stat(marker)
	require.NoError(t, err)

	c2 := dialWS(t, ts.url+"/process/pty/eager/connect")
	waitConnected(t, c2)
	c2.send(t, "echo from-$((2+1))\n")
	c.waitOutput(t, "from-3")
	c2.waitOutput(t, "from-3")
}

func TestPtyCreateConnect(t *testing.T) {
	ts := newTestServer(t, Options{})
	envs := base64.RawURLEncoding.EncodeToString([]byte(`{"GREETING":"hello pty"}`))
	c := dialWS(t, ts.url+"/process/pty/create-connect?id=cc&cols=120&rows=40", ptyEnvsProtocolPrefix+envs, ptyExitControlProtocol)
	waitConnected(t, c)
	c.send(t, "echo \"$GREETING\"; stty size; exit\n")
	ce := c.closed(t)
	assert.JSONEq(t, `{"exitCode":0}`, ce.Reason)
	assert.Contains(t, c.output(), "hello pty")
	assert.Contains(t, c.output(), "40 120")

	t.Run("an existing id", func(t *testing.T) {
		c := dialWS(t, ts.url+"/process/pty/create-connect?id=cc")
		ce := c.closed(t)
		assert.Contains(t, ce.Reason, "already exists")
	})
}

func TestPtyCreateErrors(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, tt := range []struct {
		name string
		body any
	}{
		{"bad cols", wire.PtyCreateRequest{ID: "a", Cols: ref(5000)}},
		{"missing cwd", wire.PtyCreateRequest{ID: "a", Cwd: "/no/such/dir"}},
		{"bad id", wire.PtyCreateRequest{ID: "a/b"}},
		{"bad env", wire.PtyCreateRequest{ID: "a", Envs: map[string]string{"": "x"}}},
		{"not JSON", "{"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/process/pty", tt.body)
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
	t.Run("an id is generated when none is given", func(t *testing.T) {
		var created wire.PtyCreateResponse
		resp := ts.postJSON(t, "/process/pty", wire.PtyCreateRequest{LazyStart: true})
		require.Equal(t, http.StatusCreated, resp.status)
		resp.json(t, &created)
		assert.NotEmpty(t, created.SessionID)
	})
}

func ref[T any](v T) *T { return &v }

func TestWebSocketRoutesAreGuarded(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/pty", wire.PtyCreateRequest{ID: "g", LazyStart: true}).status)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"a foreign origin", http.Header{TokenHeader: {testToken}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
	} {
		for _, path := range []string{"/process/pty/g/connect", "/process/interpreter/execute"} {
			_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.url, "http")+path, &websocket.DialOptions{HTTPHeader: tt.header})
			require.Error(t, err, "%s %s", tt.name, path)
			require.NotNil(t, resp)
			assert.Equal(t, tt.status, resp.StatusCode, "%s %s", tt.name, path)
		}
	}
}
