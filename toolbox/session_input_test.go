package toolbox

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func (ts *testServer) sendInput(t *testing.T, sessionID, cmdID string, data any) response {
	t.Helper()
	return ts.postJSON(t, "/process/session/"+sessionID+"/command/"+cmdID+"/input", data)
}

// waitCommand waits for the command to end and returns its logs.
func (ts *testServer) waitCommand(t *testing.T, sessionID, cmdID string) (int, wire.SessionCommandLogs) {
	t.Helper()
	var cmd wire.SessionCommand
	waitFor(t, "command "+cmdID+" to end", func() bool {
		r := ts.get(t, "/process/session/"+sessionID+"/command/"+cmdID)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		r.json(t, &cmd)
		return cmd.ExitCode != nil
	})
	var logs wire.SessionCommandLogs
	r := ts.get(t, "/process/session/"+sessionID+"/command/"+cmdID+"/logs")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r.json(t, &logs)
	return *cmd.ExitCode, logs
}

func (ts *testServer) execAsync(t *testing.T, sessionID string, req wire.SessionExecuteRequest) string {
	t.Helper()
	req.RunAsync = true
	resp, out := ts.sessionExec(t, sessionID, req)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	require.NotEmpty(t, out.CmdID)
	return out.CmdID
}

func TestSessionInput(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "in"}).status)
	const reader = `read -r line; echo "got: $line"`

	t.Run("a command reads a line and echoes it", func(t *testing.T) {
		id := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: reader})
		resp := ts.sendInput(t, "in", id, wire.SessionSendInputRequest{Data: ref("hello world\n")})
		require.Equal(t, http.StatusNoContent, resp.status, "body: %s", resp.body)
		assert.Empty(t, resp.body, "input is answered with no content: the output goes to the logs")
		code, logs := ts.waitCommand(t, "in", id)
		assert.Equal(t, 0, code)
		assert.Equal(t, "hello world\ngot: hello world\n", logs.Stdout, "the input is echoed, as a terminal shows typing")
		assert.Empty(t, logs.Stderr)
	})

	t.Run("suppressInputEcho keeps input out of the logs", func(t *testing.T) {
		id := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: reader, SuppressInputEcho: true})
		require.Equal(t, http.StatusNoContent, ts.sendInput(t, "in", id, wire.SessionSendInputRequest{Data: ref("quiet\n")}).status)
		_, logs := ts.waitCommand(t, "in", id)
		assert.Equal(t, "got: quiet\n", logs.Stdout)
	})

	t.Run("input in pieces, and to a command still queued", func(t *testing.T) {
		first := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: `read -r a; read -r b; echo "$a+$b"`, SuppressInputEcho: true})
		second := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: reader, SuppressInputEcho: true})
		// The second command waits behind the first; its input waits in
		// its own pipe and never reaches the first.
		require.Equal(t, http.StatusNoContent, ts.sendInput(t, "in", second, wire.SessionSendInputRequest{Data: ref("for-second\n")}).status)
		require.Equal(t, http.StatusNoContent, ts.sendInput(t, "in", first, wire.SessionSendInputRequest{Data: ref("one\ntw")}).status)
		require.Equal(t, http.StatusNoContent, ts.sendInput(t, "in", first, wire.SessionSendInputRequest{Data: ref("o\n")}).status)
		_, logs := ts.waitCommand(t, "in", first)
		assert.Equal(t, "one+two\n", logs.Stdout)
		_, logs = ts.waitCommand(t, "in", second)
		assert.Equal(t, "got: for-second\n", logs.Stdout)
	})

	t.Run("background jobs read end of file once the command ended", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "bg")
		id := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: `(read -r x; echo "[$x] $?" > ` + file + `) & echo started`})
		code, _ := ts.waitCommand(t, "in", id)
		require.Equal(t, 0, code)
		waitFor(t, "the background reader to see end of file", func() bool {
			b, err := os.ReadFile(file)
			return err == nil && string(b) == "[] 1\n"
		})
	})

	t.Run("a command that ends while input is pending", func(t *testing.T) {
		// head reads a little and exits; the rest fills the pipe and the
		// write waits until the command's end closes it.
		id := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: "head -c 10 >/dev/null", SuppressInputEcho: true})
		resp := ts.sendInput(t, "in", id, wire.SessionSendInputRequest{Data: ref(strings.Repeat("x", 4<<20))})
		require.Equal(t, http.StatusGone, resp.status, "body: %s", resp.body)
		e := resp.apiErr(t)
		assert.Equal(t, wire.CodeCommandAlreadyCompleted, e.Code)
		assert.Contains(t, e.Message, "before it read all input")
		code, _ := ts.waitCommand(t, "in", id)
		assert.Equal(t, 0, code)
	})

	t.Run("errors", func(t *testing.T) {
		ended := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: "true"})
		ts.waitCommand(t, "in", ended)
		running := ts.execAsync(t, "in", wire.SessionExecuteRequest{Command: reader})
		t.Cleanup(func() { ts.sendInput(t, "in", running, wire.SessionSendInputRequest{Data: ref("bye\n")}) })

		tests := []struct {
			name, session, cmd string
			body               any
			status             int
			code, msg          string
		}{
			{"ended command", "in", ended, wire.SessionSendInputRequest{Data: ref("x\n")}, http.StatusGone, wire.CodeCommandAlreadyCompleted, "already ended"},
			{"no data", "in", running, map[string]string{}, http.StatusBadRequest, "BAD_REQUEST", "data is required"},
			{"data not a string", "in", running, `{"data":1}`, http.StatusBadRequest, "INVALID_REQUEST_BODY", "invalid request body"},
			{"unknown command", "in", "nope", wire.SessionSendInputRequest{Data: ref("x")}, http.StatusNotFound, wire.CodeProcessNotFound, "command not found"},
			{"unknown session", "zzz", running, wire.SessionSendInputRequest{Data: ref("x")}, http.StatusNotFound, wire.CodeProcessNotFound, "session not found"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				resp := ts.sendInput(t, tt.session, tt.cmd, tt.body)
				require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
				e := resp.apiErr(t)
				assert.Contains(t, e.Message, tt.msg)
				assert.Equal(t, tt.code, e.Code)
				assert.Equal(t, wire.SourceDaemon, e.Source)
			})
		}
	})

	t.Run("a sync command reads no input", func(t *testing.T) {
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "sync"}).status)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/process/session/sync/exec", jsonReader(t, wire.SessionExecuteRequest{Command: "sleep 300"}))
		require.NoError(t, err)
		ts.authorize(req, "application/json")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		defer func() { cancel(); <-done }()
		var sess wire.Session
		waitFor(t, "the sync command to be listed", func() bool {
			ts.get(t, "/process/session/sync").json(t, &sess)
			return len(sess.Commands) == 1
		})
		resp := ts.sendInput(t, "sync", sess.Commands[0].ID, wire.SessionSendInputRequest{Data: ref("x\n")})
		require.Equal(t, http.StatusConflict, resp.status, "body: %s", resp.body)
		assert.Contains(t, resp.apiErr(t).Message, "runAsync")
		require.Equal(t, http.StatusNoContent, ts.do(t, http.MethodDelete, "/process/session/sync", nil, "").status)
	})
}

// TestSessionInputToACommandThatDoesNotRead checks that input nobody reads
// blocks only its own request, which gives up when its client leaves.
func TestSessionInputToACommandThatDoesNotRead(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "deaf"}).status)
	id := ts.execAsync(t, "deaf", wire.SessionExecuteRequest{Command: "sleep 300", SuppressInputEcho: true})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/process/session/deaf/command/"+id+"/input",
		jsonReader(t, wire.SessionSendInputRequest{Data: ref(strings.Repeat("x", 4<<20))}))
	require.NoError(t, err)
	ts.authorize(req, "application/json")
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err, "4 MiB cannot fit in a pipe that nobody reads")

	sess, err := ts.sessions.get("deaf")
	require.NoError(t, err)
	c, err := sess.command(id)
	require.NoError(t, err)
	waitFor(t, "the abandoned input to give up", func() bool {
		if c.inputMu.TryLock() {
			c.inputMu.Unlock()
			return true
		}
		return false
	})
	require.Equal(t, http.StatusNoContent, ts.do(t, http.MethodDelete, "/process/session/deaf", nil, "").status)
}
