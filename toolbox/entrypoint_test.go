package toolbox

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestEntrypointSession(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	const entry = `echo booting; echo "warming up" >&2; read -r cmd; echo "entrypoint got $cmd"; sleep 300 & echo $! > `
	ts := newTestServer(t, Options{Entrypoint: entry + pidFile})

	var sess wire.Session
	resp := ts.get(t, "/process/session/entrypoint")
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	resp.json(t, &sess)
	assert.Equal(t, "entrypoint", sess.SessionID)
	require.Len(t, sess.Commands, 1)
	assert.Equal(t, entry+pidFile, sess.Commands[0].Command)
	assert.Nil(t, sess.Commands[0].ExitCode, "the entrypoint still runs")
	cmdID := sess.Commands[0].ID

	f := ts.follow(t, "/process/session/entrypoint/logs")
	f.waitStdout("booting\n")
	var logs wire.SessionCommandLogs
	waitFor(t, "the entrypoint's stderr", func() bool {
		ts.get(t, "/process/session/entrypoint/logs").json(t, &logs)
		return logs.Stderr == "warming up\n"
	})
	assert.Equal(t, "booting\n", logs.Stdout)

	require.Equal(t, http.StatusNoContent, ts.sendInput(t, "entrypoint", cmdID, wire.SessionSendInputRequest{Data: ref("serve\n")}).status)
	assert.Equal(t, websocket.StatusNormalClosure, f.closed())
	assert.Equal(t, "booting\nserve\nentrypoint got serve\n", f.stream("stdout"))
	code, _ := ts.waitCommand(t, "entrypoint", cmdID)
	assert.Equal(t, 0, code)

	t.Run("it is listed like any session", func(t *testing.T) {
		var all []wire.Session
		ts.get(t, "/process/session").json(t, &all)
		require.Len(t, all, 1)
		assert.Equal(t, "entrypoint", all[0].SessionID)
	})
	t.Run("its name cannot be taken", func(t *testing.T) {
		resp := ts.postJSON(t, "/process/session", map[string]string{"sessionId": "entrypoint"})
		require.Equal(t, http.StatusConflict, resp.status, "body: %s", resp.body)
	})
	t.Run("what it left running ends with the toolbox", func(t *testing.T) {
		pid := readPID(t, pidFile)
		t.Cleanup(func() { killPID(t, pid) })
		require.True(t, processAlive(pid))
		require.NoError(t, ts.server.Close())
		waitFor(t, "the entrypoint's background job to die", func() bool { return !processAlive(pid) })
	})
}

func TestNoEntrypoint(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, path := range []string{"/process/session/entrypoint", "/process/session/entrypoint/logs"} {
		resp := ts.get(t, path)
		require.Equal(t, http.StatusNotFound, resp.status, "%s: %s", path, resp.body)
		assert.Contains(t, resp.apiErr(t).Message, "session not found")
	}
	resp := ts.postJSON(t, "/process/session", map[string]string{"sessionId": "entrypoint"})
	require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
	assert.Contains(t, resp.apiErr(t).Message, "reserved")
}

func TestEntrypointThatFails(t *testing.T) {
	ts := newTestServer(t, Options{Entrypoint: "no-such-entrypoint-xyz"})
	var sess wire.Session
	ts.get(t, "/process/session/entrypoint").json(t, &sess)
	require.Len(t, sess.Commands, 1)
	code, logs := ts.waitCommand(t, "entrypoint", sess.Commands[0].ID)
	assert.Equal(t, 127, code)
	assert.Contains(t, logs.Stderr, "no-such-entrypoint-xyz")

	_, err := newServer(Options{Entrypoint: "  ", WorkDir: t.TempDir()})
	assert.ErrorContains(t, err, "entrypoint")
}
