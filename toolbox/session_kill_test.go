package toolbox

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
				resp, _ := ts.sessionExec(t, "s", SessionExecuteRequest{Command: "echo $$ > " + filepath.Join(dir, "sh")})
				require.Equal(t, http.StatusOK, resp.status)
				shellPID = readPID(t, filepath.Join(dir, "sh"))
			}
			pids := map[string]int{}
			for _, job := range jobs {
				name := job.name
				file := filepath.Join(t.TempDir(), "pid")
				resp, out := ts.sessionExec(t, "s", SessionExecuteRequest{Command: strings.ReplaceAll(job.command, "%s", file)})
				require.Equal(t, http.StatusOK, resp.status, "%s: %s", name, resp.body)
				require.Equal(t, 0, *out.ExitCode, "%s: %s", name, *out.Output)
				pid := readPID(t, file)
				t.Cleanup(func() { killPID(t, pid) })
				pids[name] = pid
			}
			assert.NotEqual(t, shellPID, pgid(t, pids["job control gives a new group"]), "set -m puts the job in a group of its own")
			assert.NotEqual(t, shellPID, pgid(t, pids["setsid child of the shell"]))

			stop(ts, "s")
			for name, pid := range pids {
				waitFor(t, name+" to die", func() bool { return !processAlive(pid) })
			}
		})
	}
}
