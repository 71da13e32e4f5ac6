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

func (ts *testServer) sessionExec(t *testing.T, id string, req wire.SessionExecuteRequest) (response, wire.SessionExecuteResponse) {
	t.Helper()
	resp := ts.postJSON(t, "/process/session/"+id+"/exec", req)
	var out wire.SessionExecuteResponse
	if resp.status < 300 {
		resp.json(t, &out)
	}
	return resp, out
}

func TestSessions(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "sub"), 0o755))

	resp := ts.postJSON(t, "/process/session", map[string]string{"sessionId": "s1"})
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)

	steps := []struct {
		name       string
		command    string
		wantExit   int
		wantStdout string
		wantStderr string
		wantOutput string
	}{
		{name: "echo", command: "echo hi", wantStdout: "hi\n", wantOutput: "hi\n"},
		{name: "cd carries over", command: "cd sub", wantStdout: ""},
		{name: "pwd after cd", command: "pwd", wantStdout: ts.workDir + "/sub\n"},
		{name: "export carries over", command: "export COLOR=blue; X=1", wantStdout: ""},
		{name: "read exported", command: `printf '%s %s' "$COLOR" "$X"`, wantStdout: "blue 1"},
		{name: "stderr apart", command: "echo out; echo err >&2; exit_code() { return 4; }; exit_code", wantExit: 4, wantStdout: "out\n", wantStderr: "err\n"},
		{name: "stdin is closed", command: "cat; echo after", wantStdout: "after\n"},
		{name: "syntax error fails only the command", command: "if then fi", wantExit: 2},
		{name: "session survives", command: "echo alive", wantStdout: "alive\n"},
		{name: "quotes and markers in output", command: `printf '%s\n' "it's" '__sandplane_cmd_end_x 1'`, wantStdout: "it's\n__sandplane_cmd_end_x 1\n"},
		{name: "no trailing newline", command: "printf abc", wantStdout: "abc"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			resp, out := ts.sessionExec(t, "s1", wire.SessionExecuteRequest{Command: st.command})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			assert.NotEmpty(t, out.CmdID)
			require.NotNil(t, out.ExitCode)
			assert.Equal(t, st.wantExit, *out.ExitCode)
			require.NotNil(t, out.Stdout)
			assert.Equal(t, st.wantStdout, *out.Stdout)
			if st.wantStderr != "" {
				assert.Equal(t, st.wantStderr, *out.Stderr)
				assert.ElementsMatch(t, []byte(st.wantStdout+st.wantStderr), []byte(*out.Output))
			}
			if st.wantOutput != "" {
				assert.Equal(t, st.wantOutput, *out.Output)
			}
		})
	}

	t.Run("async command, then poll and read logs", func(t *testing.T) {
		resp, out := ts.sessionExec(t, "s1", wire.SessionExecuteRequest{Command: "echo start; sleep 0.2; echo end >&2; exit_code() { return 7; }; exit_code", RunAsync: true})
		require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
		require.NotEmpty(t, out.CmdID)
		assert.Nil(t, out.ExitCode)

		var cmd wire.SessionCommand
		waitFor(t, "the async command to finish", func() bool {
			r := ts.get(t, "/process/session/s1/command/"+out.CmdID)
			require.Equal(t, http.StatusOK, r.status)
			r.json(t, &cmd)
			return cmd.ExitCode != nil
		})
		assert.Equal(t, 7, *cmd.ExitCode)

		var logs wire.SessionCommandLogs
		r := ts.get(t, "/process/session/s1/command/"+out.CmdID+"/logs")
		require.Equal(t, http.StatusOK, r.status)
		r.json(t, &logs)
		assert.Equal(t, "start\n", logs.Stdout)
		assert.Equal(t, "end\n", logs.Stderr)
		assert.Equal(t, "start\nend\n", logs.Output)
	})

	t.Run("session view lists commands", func(t *testing.T) {
		var sess wire.Session
		r := ts.get(t, "/process/session/s1")
		require.Equal(t, http.StatusOK, r.status)
		r.json(t, &sess)
		assert.Equal(t, "s1", sess.SessionID)
		require.Len(t, sess.Commands, len(steps)+1)
		assert.Equal(t, "echo hi", sess.Commands[0].Command)

		var all []wire.Session
		ts.get(t, "/process/session").json(t, &all)
		require.Len(t, all, 1)
	})

	errorCases := []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"duplicate session", http.MethodPost, "/process/session", map[string]string{"sessionId": "s1"}, 409},
		{"empty session id", http.MethodPost, "/process/session", map[string]string{"sessionId": " "}, 400},
		{"bad body", http.MethodPost, "/process/session", "nope", 400},
		{"unknown session", http.MethodGet, "/process/session/zzz", nil, 404},
		{"exec unknown session", http.MethodPost, "/process/session/zzz/exec", wire.SessionExecuteRequest{Command: "ls"}, 404},
		{"exec empty command", http.MethodPost, "/process/session/s1/exec", wire.SessionExecuteRequest{Command: "  "}, 400},
		{"unknown command", http.MethodGet, "/process/session/s1/command/nope", nil, 404},
		{"unknown command logs", http.MethodGet, "/process/session/s1/command/nope/logs", nil, 404},
		{"delete unknown", http.MethodDelete, "/process/session/zzz", nil, 404},
	}
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			var resp response
			if tt.body != nil {
				resp = ts.postJSON(t, tt.path, tt.body)
			} else {
				resp = ts.do(t, tt.method, tt.path, nil, "")
			}
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
}

func TestSessionExitAndDelete(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "gone"}).status)
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "busy"}).status)

	t.Run("exit ends the shell", func(t *testing.T) {
		resp, out := ts.sessionExec(t, "gone", wire.SessionExecuteRequest{Command: "echo bye; exit 3"})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		assert.Equal(t, 3, *out.ExitCode)
		assert.Equal(t, "bye\n", *out.Stdout)

		resp, _ = ts.sessionExec(t, "gone", wire.SessionExecuteRequest{Command: "echo again"})
		require.Equal(t, http.StatusGone, resp.status, "body: %s", resp.body)
		assert.Equal(t, wire.CodeSessionEnded, resp.apiErr(t).Code)
	})

	t.Run("delete kills what runs in the session", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		resp, _ := ts.sessionExec(t, "busy", wire.SessionExecuteRequest{Command: "sleep 300 & echo $! > " + pidFile + "; wait", Async: true})
		require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
		pid := readPID(t, pidFile)
		t.Cleanup(func() { killPID(t, pid) })

		resp = ts.do(t, http.MethodDelete, "/process/session/busy", nil, "")
		require.Equal(t, http.StatusNoContent, resp.status, "body: %s", resp.body)
		waitFor(t, "the session's job to die", func() bool { return !processAlive(pid) })
		assert.Equal(t, http.StatusNotFound, ts.get(t, "/process/session/busy").status)
	})

	t.Run("a sync exec whose client leaves keeps running", func(t *testing.T) {
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "bg"}).status)
		marker := filepath.Join(t.TempDir(), "marker")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/process/session/bg/exec",
			jsonReader(t, wire.SessionExecuteRequest{Command: "sleep 1; touch " + marker}))
		require.NoError(t, err)
		ts.authorize(req, "application/json")
		_, err = http.DefaultClient.Do(req)
		require.Error(t, err)
		waitFor(t, "the command to finish anyway", func() bool {
			_, err := os.Stat(marker)
			return err == nil
		})
	})
}

func TestSessionsCloseOnHandlerClose(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "a"}).status)
	pidFile := filepath.Join(t.TempDir(), "pid")
	resp, _ := ts.sessionExec(t, "a", wire.SessionExecuteRequest{Command: "echo $$ > " + pidFile, RunAsync: true})
	require.Equal(t, http.StatusAccepted, resp.status)
	shellPID := readPID(t, pidFile)

	require.NoError(t, ts.server.Close())
	waitFor(t, "the session shell to die", func() bool { return !processAlive(shellPID) })
	resp = ts.postJSON(t, "/process/session", map[string]string{"sessionId": "b"})
	assert.Equal(t, http.StatusGone, resp.status)
}

func FuzzSessionExecuteRequest(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{"command":"ls","runAsync":true}`, `{"command":""}`, `{"async":1}`, `x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseSessionExecuteRequest(body)
		if err != nil {
			if asAPIError(err).status != http.StatusBadRequest {
				t.Fatalf("non-400 for a bad body: %v", err)
			}
			return
		}
		if shellQuote(req.Command)[0] != '\'' {
			t.Fatal("unquoted")
		}
	})
}

func TestSessionLargeInputAndOutput(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "big"}).status)

	// A command that writes far more than a pipe holds, while a command
	// larger than a pipe holds is queued behind it.
	resp, first := ts.sessionExec(t, "big", wire.SessionExecuteRequest{Command: "head -c 2000000 /dev/zero | tr '\\000' a", RunAsync: true})
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	long := ": '" + strings.Repeat("x", 300<<10) + "'; echo queued"
	resp, out := ts.sessionExec(t, "big", wire.SessionExecuteRequest{Command: long})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	assert.Equal(t, "queued\n", *out.Stdout)

	var logs wire.SessionCommandLogs
	ts.get(t, "/process/session/big/command/"+first.CmdID+"/logs").json(t, &logs)
	assert.Len(t, logs.Stdout, 2000000)
}
