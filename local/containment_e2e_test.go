package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
)

// sandboxProcesses lists the live processes marked with sandbox id.
func sandboxProcesses(t *testing.T, id string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !running(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00SANDPLANE_SANDBOX_ID="+id+"\x00")) {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, e.Name()+": "+string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	}
	return out
}

// initProgramOf is the executable the init of sandbox id runs.
func initProgramOf(t *testing.T, id string) string {
	t.Helper()
	for _, p := range sandboxProcesses(t, id) {
		pid, cmdline, _ := strings.Cut(p, ": ")
		if strings.HasPrefix(cmdline, nsinit.Name+" ") {
			exe, err := os.Readlink("/proc/" + pid + "/exe")
			require.NoError(t, err)
			return exe
		}
	}
	t.Fatalf("sandbox %s has no init", id)
	return ""
}

func postJSON(t *testing.T, p *local.Provider, s *provider.Sandbox, path string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	return toolboxDo(t, p, s, http.MethodPost, path, string(b))
}

// escape starts, through the sandbox's toolbox, everything that used to
// outlive a sandbox: nohup'd and setsid'd jobs, a session's background job,
// and a server holding a port of its own. It returns that port.
func escape(t *testing.T, p *local.Provider, s *provider.Sandbox) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	server := fmt.Sprintf("%s toolbox", testdaemon.Binary(t)) // serves on $PORT
	if _, err := exec.LookPath("python3"); err == nil {
		server = fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port)
	}
	resp := postJSON(t, p, s, "/process/execute", map[string]any{"command": fmt.Sprintf(
		"sh -c 'nohup sleep 999 >/dev/null 2>&1 & setsid sleep 999 >/dev/null 2>&1 & PORT=%d %s >/dev/null 2>&1 &'", port, server)})
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp = postJSON(t, p, s, "/process/session", map[string]any{"sessionId": "jobs"})
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp = postJSON(t, p, s, "/process/session/jobs/exec", map[string]any{"command": "sleep 998 &", "runAsync": true})
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300)

	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "the escaping server never served")
	require.Eventually(t, func() bool {
		n := 0
		for _, p := range sandboxProcesses(t, s.ID) {
			if strings.Contains(p, "sleep 99") {
				n++
			}
		}
		return n >= 3
	}, 20*time.Second, 20*time.Millisecond, "the sleeps never ran: %v", sandboxProcesses(t, s.ID))
	return port
}

func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err == nil {
		ln.Close()
	}
	return err == nil
}

// TestNothingOfASandboxOutlivesIt is the regression test for workloads that
// outlived their sandbox's stop, delete, and a kill -9 of the daemon. Its
// daemons run unisolated: the escaping server must be reachable on the
// host's 127.0.0.1 to prove it served and then that it is gone, and
// containment must hold where bubblewrap does not run (an isolated
// sandbox's end is isolate_test's).
func TestNothingOfASandboxOutlivesIt(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox)
	}{
		{"stop", func(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox) {
			_, err := d.P.Stop(context.Background(), s.ID)
			require.NoError(t, err)
		}},
		{"delete", func(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox) {
			require.NoError(t, d.P.Delete(context.Background(), s.ID))
		}},
		{"kill -9 of the daemon, restart, delete", func(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox) {
			d.Kill9()
			assert.NotEmpty(t, sandboxProcesses(t, s.ID), "the sandbox runs on without its daemon")
			d2 := startUnisolatedDaemon(t, d.Root)
			// The restarted daemon checks its sandboxes in the background and
			// asks for a retry meanwhile.
			var err error
			require.Eventually(t, func() bool {
				err = d2.P.Delete(context.Background(), s.ID)
				return provider.Code(err) != provider.FailedPrecondition
			}, 20*time.Second, 10*time.Millisecond)
			require.NoError(t, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startUnisolatedDaemon(t, "")
			s, err := d.P.Create(context.Background(), provider.CreateRequest{AutoStopInterval: ptr(0)})
			require.NoError(t, err)
			port := escape(t, d.P, s)
			assert.Equal(t, filepath.Join(filepath.Dir(testdaemon.Binary(t)), native.InitProgramName), initProgramOf(t, s.ID),
				"the sandbox's init is the small program installed beside the daemon")
			assert.True(t, slices.ContainsFunc(sandboxProcesses(t, s.ID), func(p string) bool {
				_, cmdline, _ := strings.Cut(p, ": ")
				return strings.HasPrefix(cmdline, testdaemon.Toolbox(t)+" ")
			}), "the default workload is the small toolbox installed beside the daemon: %v", sandboxProcesses(t, s.ID))

			tt.end(t, d, s)
			assert.Empty(t, sandboxProcesses(t, s.ID), "processes of the sandbox outlived it")
			assert.True(t, portFree(port), "a process of the sandbox still holds port %d", port)
			assert.True(t, portFree(s.Port), "the sandbox's own port is still taken")
		})
	}
}

func TestInfoReportsContainment(t *testing.T) {
	d := startDaemon(t, "")
	resp, err := http.Get(d.URL + "/v1/info")
	require.NoError(t, err)
	defer resp.Body.Close()
	var info struct {
		Containment       string `json:"containment"`
		Isolation         string `json:"isolation"`
		IsolationFallback string `json:"isolationFallback"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
	assert.Equal(t, "pid-namespace", info.Containment, "this machine has PID namespaces")
	if _, err := exec.LookPath("bwrap"); err != nil {
		assert.Equal(t, "none", info.Isolation, "without bubblewrap a default daemon cannot isolate")
		assert.Contains(t, info.IsolationFallback, "apt-get install bubblewrap", "and says how to")
		return
	}
	assert.Equal(t, "bwrap", info.Isolation, "a default daemon isolates where bubblewrap works")
	assert.Empty(t, info.IsolationFallback)
}

// TestIsolatedDaemonEndToEnd: isolation set daemon-wide reaches the
// default snapshot's toolbox, which serves through the forwarded port.
func TestIsolatedDaemonEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed: apt-get install bubblewrap")
	}
	d := testdaemon.Start(t, testdaemon.Options{Config: "isolation: bwrap\n"})
	ctx := context.Background()
	s, err := d.P.Create(ctx, provider.CreateRequest{AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	require.Equal(t, provider.StateStarted, s.State, "ready through the forwarder")

	// The toolbox is reached as a host server asks for it: the preview of
	// port 4000 inside the sandbox, where it really listens.
	pv, err := d.P.PreviewURL(ctx, s.ID, 4000)
	require.NoError(t, err)
	assert.Contains(t, pv.URL, "/preview/4000-"+s.ID)
	code, result := execIn(t, d, s, `sh -c 'echo "$HOME"; ls -d /proc/[0-9]* | wc -l; ls "$SANDPLANE_ROOT" | wc -l; echo "$PORT"'`)
	require.Zero(t, code, result)
	lines := strings.Fields(result)
	require.Len(t, lines, 4, result)
	assert.True(t, strings.HasPrefix(lines[0], d.Root), "HOME is the sandbox's own: %s", lines[0])
	procs, err := strconv.Atoi(lines[1])
	require.NoError(t, err)
	assert.Less(t, procs, 10, "the sandbox sees only its own processes")
	assert.Equal(t, "1", lines[2], "the daemon's root shows only the sandbox's own directory")
	assert.Equal(t, "4000", lines[3], "the workload listens on its declared port inside its network namespace")

	require.NoError(t, d.P.Delete(ctx, s.ID))
	assert.Empty(t, sandboxProcesses(t, s.ID))
	assert.True(t, portFree(s.Port))
}

// TestCreatesFindAnInitParked: the daemon parks an init as it starts and
// again after each create; a create runs its sandbox under it; the parked
// init ends with the daemon. Unisolated: only inits without bwrap park
// (native.Driver's parkable).
func TestCreatesFindAnInitParked(t *testing.T) {
	d := startUnisolatedDaemon(t, "")
	resp, err := http.Get(d.URL + "/v1/info")
	require.NoError(t, err)
	var info struct{ PID int }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
	resp.Body.Close()
	require.NotZero(t, info.PID)

	var first, toolbox []int
	require.Eventually(t, func() bool { first = testdaemon.ParkedInits(t, info.PID); return len(first) == 1 },
		20*time.Second, 10*time.Millisecond, "no init parked at start")
	require.Eventually(t, func() bool { toolbox = testdaemon.ParkedWorkloads(t, first[0]); return len(toolbox) == 1 },
		20*time.Second, 10*time.Millisecond, "the parked init started no toolbox ahead")
	s, err := d.P.Create(context.Background(), provider.CreateRequest{EnvVars: map[string]string{"E2E_SECRET": "s3cret-e2e"}, AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	assert.Equal(t, first[0], workloadPID(t, d.P, s), "the first create ran under the init parked at start")
	checkParkedToolbox(t, d, s, toolbox[0])

	var next []int
	require.Eventually(t, func() bool { next = testdaemon.ParkedInits(t, info.PID); return len(next) == 1 && next[0] != first[0] },
		20*time.Second, 10*time.Millisecond, "no init parked after the create")
	require.Eventually(t, func() bool { toolbox = testdaemon.ParkedWorkloads(t, next[0]); return len(toolbox) == 1 },
		20*time.Second, 10*time.Millisecond, "the next parked init started no toolbox ahead")
	d.Stop()
	assert.Eventually(t, func() bool { return !running(next[0]) && !running(toolbox[0]) }, 20*time.Second, 10*time.Millisecond,
		"the parked init or its toolbox outlived the daemon")
}

// checkParkedToolbox checks that pid, a toolbox started ahead of any
// sandbox, serves s as one started for it would: the sandbox's environment
// reaches the commands it runs, its token does not, and its own /proc
// environ shows the sandbox's marks and no value.
func checkParkedToolbox(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox, pid int) {
	t.Helper()
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err, "the toolbox parked for the create is gone")
	var names []string
	for e := range strings.SplitSeq(strings.TrimRight(string(env), "\x00"), "\x00") {
		name, _, _ := strings.Cut(e, "=")
		names = append(names, name)
	}
	assert.Equal(t, []string{"SANDPLANE_ROOT", "SANDPLANE_SANDBOX_ID"}, names)
	assert.Contains(t, string(env), "SANDPLANE_SANDBOX_ID="+s.ID+"\x00")
	assert.NotContains(t, string(env), "s3cret-e2e")

	_, out := execIn(t, d, s, `sh -c 'echo "[$E2E_SECRET][$SANDPLANE_SANDBOX_TOKEN]"'`)
	assert.Equal(t, "[s3cret-e2e][]\n", out)
}
