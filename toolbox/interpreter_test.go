package toolbox

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// codeResult is what one execute WebSocket delivered.
type codeResult struct {
	msgs  []interpMessage
	close websocket.CloseError
}

func (r codeResult) stream(kind string) string {
	var b strings.Builder
	for _, m := range r.msgs {
		if m.Type == kind {
			b.WriteString(m.Text)
		}
	}
	return b.String()
}

func (r codeResult) errors() []interpMessage {
	var out []interpMessage
	for _, m := range r.msgs {
		if m.Type == "error" {
			out = append(out, m)
		}
	}
	return out
}

func (r codeResult) completed() bool {
	n := len(r.msgs)
	return n > 0 && r.msgs[n-1] == interpMessage{Type: "control", Text: "completed"} && r.close.Code == websocket.StatusNormalClosure
}

func runCode(t *testing.T, ts *testServer, req interpRequest) codeResult {
	t.Helper()
	c := dialWS(t, ts.url+"/process/interpreter/execute")
	b, err := json.Marshal(req)
	require.NoError(t, err)
	require.NoError(t, c.conn.Write(context.Background(), websocket.MessageText, b))
	res := codeResult{close: c.closed(t)}
	for _, text := range c.texts() {
		var m interpMessage
		require.NoError(t, json.Unmarshal([]byte(text), &m), text)
		res.msgs = append(res.msgs, m)
	}
	return res
}

func TestInterpreter(t *testing.T) {
	requireTool(t, "python3")
	ts := newTestServer(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "sub"), 0o755))

	var ictx wire.InterpreterContext
	resp := ts.postJSON(t, "/process/interpreter/context", wire.CreateContextRequest{Cwd: "sub"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	resp.json(t, &ictx)
	assert.NotEmpty(t, ictx.ID)
	assert.Equal(t, "python", ictx.Language)
	assert.Equal(t, filepath.Join(ts.workDir, "sub"), ictx.Cwd)
	assert.True(t, ictx.Active)

	t.Run("globals persist across runs", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "x = 40\ndef f(): return x + 2", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		res = runCode(t, ts, interpRequest{Code: "print(f())\nimport os; print(os.getcwd())", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		assert.Equal(t, "42\n"+filepath.Join(ts.workDir, "sub")+"\n", res.stream("stdout"))
	})
	t.Run("the default context is separate", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "print('x' in globals())"})
		require.True(t, res.completed(), "%+v", res)
		assert.Equal(t, "False\n", res.stream("stdout"))
	})
	t.Run("stderr and output of child processes", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "import sys, os\nprint('oops', file=sys.stderr)\nos.system('echo from-child; echo child-err >&2')\nprint('après')", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		assert.Equal(t, "oops\nchild-err\n", res.stream("stderr"))
		assert.Equal(t, "from-child\naprès\n", res.stream("stdout"))
	})
	t.Run("an exception", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "print('before')\ndef g():\n    return 1/0\ng()", ContextID: ictx.ID})
		require.True(t, res.completed(), "an error still completes the run: %+v", res)
		assert.Equal(t, "before\n", res.stream("stdout"))
		errs := res.errors()
		require.Len(t, errs, 1)
		assert.Equal(t, "ZeroDivisionError", errs[0].Name)
		assert.Equal(t, "division by zero", errs[0].Value)
		assert.Contains(t, errs[0].Traceback, "return 1/0", "the traceback quotes the cell")
		assert.Contains(t, errs[0].Traceback, "Traceback (most recent call last)")
		assert.NotContains(t, errs[0].Traceback, "_run", "the worker's own frames are hidden")
	})
	t.Run("a syntax error", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "def (", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		errs := res.errors()
		require.Len(t, errs, 1)
		assert.Equal(t, "SyntaxError", errs[0].Name)
	})
	t.Run("envs last for one run", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "import os; print(os.environ['GREETING'])", ContextID: ictx.ID, Envs: map[string]string{"GREETING": "hi"}})
		assert.Equal(t, "hi\n", res.stream("stdout"))
		res = runCode(t, ts, interpRequest{Code: "import os; print(os.environ.get('GREETING'))", ContextID: ictx.ID})
		assert.Equal(t, "None\n", res.stream("stdout"))
	})
	t.Run("a timeout interrupts the run and keeps the context", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "import time\nprint('start', flush=True)\ntime.sleep(60)", ContextID: ictx.ID, Timeout: ref(int64(1))})
		assert.Equal(t, interpTimeoutCode, res.close.Code, "%+v", res)
		res = runCode(t, ts, interpRequest{Code: "print(x)", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		assert.Equal(t, "40\n", res.stream("stdout"))
	})
	t.Run("exit() does not end the context", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "import sys; sys.exit(3)", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		require.Len(t, res.errors(), 1)
		assert.Equal(t, "SystemExit", res.errors()[0].Name)
		res = runCode(t, ts, interpRequest{Code: "print(x)", ContextID: ictx.ID})
		assert.Equal(t, "40\n", res.stream("stdout"))
	})
	t.Run("a worker that dies is replaced", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "import os; os._exit(1)", ContextID: ictx.ID})
		require.Len(t, res.errors(), 1, "%+v", res)
		assert.Equal(t, "InterpreterError", res.errors()[0].Name)
		res = runCode(t, ts, interpRequest{Code: "print('x' in globals())", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		assert.Equal(t, "False\n", res.stream("stdout"), "the new worker starts with fresh globals")
	})
	t.Run("a worker deaf to interrupts is killed after the grace", func(t *testing.T) {
		code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ny = 1\ntime.sleep(60)"
		res := runCode(t, ts, interpRequest{Code: code, ContextID: ictx.ID, Timeout: ref(int64(1))})
		assert.Equal(t, interpTimeoutCode, res.close.Code)
		res = runCode(t, ts, interpRequest{Code: "print('y' in globals())", ContextID: ictx.ID})
		require.True(t, res.completed(), "%+v", res)
		assert.Equal(t, "False\n", res.stream("stdout"))
	})
	t.Run("an unknown context", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{Code: "1", ContextID: "nope"})
		assert.Equal(t, websocket.StatusPolicyViolation, res.close.Code)
		assert.Contains(t, res.close.Reason, "not found")
	})
	t.Run("no code", func(t *testing.T) {
		res := runCode(t, ts, interpRequest{ContextID: ictx.ID})
		assert.Equal(t, websocket.StatusPolicyViolation, res.close.Code)
	})

	var list wire.ListContextsResponse
	ts.get(t, "/process/interpreter/context").json(t, &list)
	require.Len(t, list.Contexts, 1, "the default context is not listed")
	assert.Equal(t, ictx.ID, list.Contexts[0].ID)

	resp = ts.do(t, http.MethodDelete, "/process/interpreter/context/"+ictx.ID, nil, "")
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	assert.Equal(t, http.StatusNotFound, ts.do(t, http.MethodDelete, "/process/interpreter/context/"+ictx.ID, nil, "").status)
	assert.Equal(t, http.StatusBadRequest, ts.do(t, http.MethodDelete, "/process/interpreter/context/default", nil, "").status)
	ts.get(t, "/process/interpreter/context").json(t, &list)
	assert.Empty(t, list.Contexts)

	for _, tt := range []struct {
		name string
		body any
	}{
		{"unsupported language", wire.CreateContextRequest{Language: "javascript"}},
		{"missing cwd", wire.CreateContextRequest{Cwd: "/no/such/dir"}},
		{"not JSON", "{"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/process/interpreter/context", tt.body)
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
}

func TestInterpreterWorkersEndWithTheServer(t *testing.T) {
	requireTool(t, "python3")
	ts := newTestServer(t, Options{})
	var ictx wire.InterpreterContext
	ts.postJSON(t, "/process/interpreter/context", wire.CreateContextRequest{}).json(t, &ictx)
	res := runCode(t, ts, interpRequest{Code: "import os; print(os.getpid())", ContextID: ictx.ID})
	pid, err := strconv.Atoi(strings.TrimSpace(res.stream("stdout")))
	require.NoError(t, err)
	require.True(t, processAlive(pid))
	require.NoError(t, ts.server.Close())
	waitFor(t, "the worker to end", func() bool { return !processAlive(pid) })
}
