package toolbox

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/toolbox/wire"
)

// pgid reads the process group of pid from /proc.
func pgid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	require.NoError(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	return n
}

// TestSessionEndsEverythingItStarted starts background jobs that leave
// the shell's process group in the two ways a shell can, and checks that
// deleting the session, or closing the toolbox, kills them all.
func TestSessionEndsEverythingItStarted(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to find what left the session's process group")
	}
	// In this order: job control stays on in the session once set, and
	// would make setsid fork a child that leaves the shell's tree (the
	// one escape there is).
	jobs := []struct{ name, command string }{
		{"background job", "sleep 300 & echo $! > %s"},
		{"setsid child of the shell", "setsid sleep 300 & echo $! > %s"},
		{"job of a job", "( sleep 300 & echo $! > %s; wait ) &"},
		{"job control gives a new group", "set -m; sleep 300 & echo $! > %s"},
	}
	end := map[string]func(ts *testServer, session string){
		"delete": func(ts *testServer, session string) {
			require.Equal(t, http.StatusNoContent, ts.do(t, http.MethodDelete, "/process/session/"+session, nil, "").status)
		},
		"toolbox close": func(ts *testServer, _ string) { require.NoError(t, ts.server.Close()) },
	}
	for how, stop := range end {
		t.Run(how, func(t *testing.T) {
			ts := newTestServer(t, Options{})
			require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "s"}).status)
			var shellPID int
			{
				dir := t.TempDir()
				resp, _ := ts.sessionExec(t, "s", wire.SessionExecuteRequest{Command: "echo $$ > " + filepath.Join(dir, "sh")})
				require.Equal(t, http.StatusOK, resp.status)
				shellPID = readPID(t, filepath.Join(dir, "sh"))
			}
			pids := map[string]int{}
			for _, job := range jobs {
				name := job.name
				file := filepath.Join(t.TempDir(), "pid")
				resp, out := ts.sessionExec(t, "s", wire.SessionExecuteRequest{Command: strings.ReplaceAll(job.command, "%s", file)})
				require.Equal(t, http.StatusOK, resp.status, "%s: %s", name, resp.body)
				require.Equal(t, 0, *out.ExitCode, "%s: %s", name, *out.Output)
				pid := readPID(t, file)
				t.Cleanup(func() { killPID(t, pid) })
				pids[name] = pid
			}
			assert.NotEqual(t, shellPID, pgid(t, pids["job control gives a new group"]), "set -m puts the job in a group of its own")
			// $! is known once the shell forked, before setsid(1) has run
			// setsid(2) in the child: its group is the shell's until then.
			waitFor(t, "the setsid child to leave the shell's group", func() bool {
				return pgid(t, pids["setsid child of the shell"]) != shellPID
			})

			stop(ts, "s")
			for name, pid := range pids {
				waitFor(t, name+" to die", func() bool { return !processAlive(pid) })
			}
		})
	}
}

// TestSessionHangsUpBeforeItKills: deleting a session hangs its shell up
// first, as closing a terminal does, so that its exit trap runs (a version
// manager releasing its lock, say); what ignores the hang-up is killed once
// the grace has passed.
func TestSessionHangsUpBeforeItKills(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to find the session's processes")
	}
	t.Run("the exit trap runs", func(t *testing.T) {
		ts := newTestServer(t, Options{})
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "s"}).status)
		trapped := filepath.Join(t.TempDir(), "trapped")
		resp, _ := ts.sessionExec(t, "s", wire.SessionExecuteRequest{Command: "trap 'echo released > " + trapped + "' EXIT"})
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
		require.Equal(t, http.StatusNoContent, ts.do(t, http.MethodDelete, "/process/session/s", nil, "").status)
		b, err := os.ReadFile(trapped)
		require.NoError(t, err, "the shell was killed before its exit trap could run")
		assert.Equal(t, "released\n", string(b))
	})
	// A shell can take the SIGHUP in the instant before it blocks reading
	// its next command, and then sleep through it: the end of its input,
	// which a closed terminal also gives, wakes it. A shell that ignores the
	// hang-up plays that shell here, on a clock that never moves, so the
	// delete returns only if the shell ends by itself.
	t.Run("a shell that missed the hang-up still runs its exit trap", func(t *testing.T) {
		clk := clocktest.NewFake(time.Time{})
		ts := newTestServer(t, Options{Clock: clk})
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "s"}).status)
		trapped := filepath.Join(t.TempDir(), "trapped")
		resp, _ := ts.sessionExec(t, "s", wire.SessionExecuteRequest{Command: "trap '' HUP; trap 'echo released > " + trapped + "' EXIT"})
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
		deleted := make(chan int, 1)
		go func() { deleted <- ts.do(t, http.MethodDelete, "/process/session/s", nil, "").status }()
		select {
		case status := <-deleted:
			assert.Equal(t, http.StatusNoContent, status)
		case <-time.After(30 * time.Second):
			clk.Advance(hangUpGrace) // let the delete end, killing the shell
			<-deleted
			t.Fatal("the delete waited out the grace: the shell never saw the end of its input")
		}
		b, err := os.ReadFile(trapped)
		require.NoError(t, err, "the shell was killed before its exit trap could run")
		assert.Equal(t, "released\n", string(b))
	})
	t.Run("what ignores it is killed after the grace", func(t *testing.T) {
		clk := clocktest.NewFake(time.Time{})
		ts := newTestServer(t, Options{Clock: clk})
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "s"}).status)
		dir := t.TempDir()
		// The shell ignores the hang-up and waits for a job that ignores it
		// too, so that the end of its input does not end it either.
		ts.execAsync(t, "s", wire.SessionExecuteRequest{Command: "trap '' HUP; echo $$ > " + filepath.Join(dir, "sh") + "; nohup sh -c 'echo $$ > " + filepath.Join(dir, "job") + "; exec sleep 300' >/dev/null 2>&1"})
		shell, job := readPID(t, filepath.Join(dir, "sh")), readPID(t, filepath.Join(dir, "job"))
		t.Cleanup(func() { killPID(t, job) })

		waiters := clk.Waiters()
		deleted := make(chan int, 1)
		go func() { deleted <- ts.do(t, http.MethodDelete, "/process/session/s", nil, "").status }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, clk.BlockUntilWaiters(ctx, waiters+1), "the delete waits out the grace on the toolbox's clock")
		assert.True(t, processAlive(shell) && processAlive(job), "both ignore the hang-up")
		clk.Advance(hangUpGrace)
		assert.Equal(t, http.StatusNoContent, <-deleted)
		waitFor(t, "the shell to die", func() bool { return !processAlive(shell) })
		waitFor(t, "the job to die", func() bool { return !processAlive(job) })
	})
}
