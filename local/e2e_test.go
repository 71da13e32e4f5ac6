package local_test

import (
	"bufio"
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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
)

// These tests run the real binary: a daemon process, real detached
// children, real HTTP on loopback. They prove what unit tests with fakes
// cannot: what survives a kill -9.

func TestMain(m *testing.M) {
	if os.Getenv(cookieJarEnv) != "" {
		os.Exit(serveCookieJar()) // a sandbox's workload, not a test run
	}
	os.Exit(testdaemon.Main(m))
}

const slowConfig = `
snapshots:
  never-ready:
    command: [sh, -c, "echo started; exec sleep 120"]
`

// startDaemon runs `sandplane serve` with the never-ready snapshot, on root
// ("" for a fresh one).
func startDaemon(t testing.TB, root string, env ...string) *testdaemon.Daemon {
	t.Helper()
	return testdaemon.Start(t, testdaemon.Options{Root: root, Config: slowConfig, Env: env})
}

// startUnisolatedDaemon is startDaemon with isolation: none, for a test
// that must see a sandbox as the host does: a port its workload binds on
// the host's 127.0.0.1, or an init parked ahead (only unisolated inits
// park).
func startUnisolatedDaemon(t testing.TB, root string, env ...string) *testdaemon.Daemon {
	t.Helper()
	return testdaemon.Start(t, testdaemon.Options{Root: root, Config: slowConfig + "isolation: none\n", Env: env})
}

// toolboxDo calls the sandbox's toolbox the way clients do: at the base URL
// and with the header local.Provider's Toolbox returns.
func toolboxDo(t *testing.T, p *local.Provider, s *provider.Sandbox, method, path, body string) *http.Response {
	t.Helper()
	base, header, err := p.Toolbox(context.Background(), s.ID)
	require.NoError(t, err)
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header = header
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// checkToolbox asks the sandbox's toolbox which sandbox it serves.
func checkToolbox(t *testing.T, p *local.Provider, s *provider.Sandbox) {
	t.Helper()
	resp := toolboxDo(t, p, s, http.MethodGet, "/api/info", "")
	// A daemon that just restarted checks the sandboxes it adopts before
	// it proxies to them: until then their previews answer 503.
	for deadline := time.Now().Add(20 * time.Second); resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline); {
		resp.Body.Close()
		time.Sleep(50 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
		resp = toolboxDo(t, p, s, http.MethodGet, "/api/info", "")
	}
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the toolbox's /api/info")
	var info struct {
		PID       int    `json:"pid"`
		SandboxID string `json:"sandboxId"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
	require.Equal(t, s.ID, info.SandboxID)
	require.NotZero(t, info.PID, "the token reveals the pid")
}

// workloadPID is the pid the daemon tracks for sandbox s, once its toolbox
// answers for s: the init of the sandbox's PID namespace (the toolbox's own
// pid is one inside that namespace), or the leader of its process group
// where the daemon has no namespaces.
func workloadPID(t *testing.T, p *local.Provider, s *provider.Sandbox) int {
	t.Helper()
	checkToolbox(t, p, s)
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	marker := "SANDPLANE_SANDBOX_ID=" + s.ID
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), marker) || !running(pid) {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if nspid, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(nspid)
				if len(f) == 2 && f[1] == "1" || len(f) == 1 && sessionLeader(pid) {
					return pid
				}
			}
		}
	}
	t.Fatalf("no process of sandbox %s runs", s.ID)
	return 0
}

func sessionLeader(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 3 && fields[3] == strconv.Itoa(pid)
}

func eventuallyState(t *testing.T, p provider.Provider, id string, want provider.State) *provider.Sandbox {
	t.Helper()
	var last *provider.Sandbox
	require.Eventually(t, func() bool {
		s, err := p.Get(context.Background(), id)
		if err != nil {
			return false
		}
		last = s
		return s.State == want
	}, 20*time.Second, 20*time.Millisecond, "sandbox %s never became %s", id, want)
	return last
}

func TestKillNineOfAChildShowsStoppedWithItsReason(t *testing.T) {
	d := startDaemon(t, "")
	ctx := context.Background()
	s, err := d.P.Create(ctx, provider.CreateRequest{Name: "victim", AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(workloadPID(t, d.P, s), syscall.SIGKILL))
	got := eventuallyState(t, d.P, s.ID, provider.StateStopped)
	assert.Equal(t, "killed: signal SIGKILL", got.ErrorReason)
	assert.Zero(t, got.Port)
}

func TestDaemonRestartKeepsLiveChildren(t *testing.T) {
	d := startDaemon(t, "")
	ctx := context.Background()
	keep, err := d.P.Create(ctx, provider.CreateRequest{Name: "keep", AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	lost, err := d.P.Create(ctx, provider.CreateRequest{Name: "lost", AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	keepPID, lostPID := workloadPID(t, d.P, keep), workloadPID(t, d.P, lost)

	d.Stop() // SIGTERM: children keep running
	require.NoError(t, syscall.Kill(keepPID, 0), "a child survives its daemon")
	require.NoError(t, syscall.Kill(lostPID, syscall.SIGKILL))
	// kill returns before the process is dead: wait, so that the new daemon
	// finds it gone rather than adopting it in its last moments.
	require.Eventually(t, func() bool { return !running(lostPID) }, 10*time.Second, 5*time.Millisecond)

	d2 := startDaemon(t, d.Root)
	got, err := d2.P.Get(ctx, "keep")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, got.State)
	assert.Equal(t, keep.Port, got.Port)
	assert.Equal(t, keepPID, workloadPID(t, d2.P, got), "the same process, adopted")
	gone := eventuallyState(t, d2.P, "lost", provider.StateStopped)
	assert.Equal(t, "daemon restart: process gone", gone.ErrorReason)

	// The adopted child is watched like any other.
	require.NoError(t, syscall.Kill(keepPID, syscall.SIGKILL))
	eventuallyState(t, d2.P, "keep", provider.StateStopped)

	// And a stopped sandbox restarts in its preserved directory.
	restarted, err := d2.P.Start(ctx, "lost")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, restarted.State)
	assert.NotEqual(t, lostPID, workloadPID(t, d2.P, restarted))
}

func TestKillNineOfTheDaemonMidCreateLeavesNoOrphan(t *testing.T) {
	d := startDaemon(t, "")
	created := make(chan error, 1)
	go func() {
		_, err := d.P.Create(context.Background(), provider.CreateRequest{ID: "half", Snapshot: "never-ready"})
		created <- err
	}()
	// Wait until the workload runs, then kill the daemon under the create.
	require.Eventually(t, func() bool {
		out, err := os.ReadFile(filepath.Join(d.Root, "half", "stdout.log"))
		return err == nil && strings.Contains(string(out), "started")
	}, 20*time.Second, 10*time.Millisecond)
	orphans, err := native.New().Orphans(context.Background(), d.Root, nil)
	require.NoError(t, err)
	require.Len(t, orphans, 1, "the half-created workload runs")
	d.Kill9()
	assert.Equal(t, provider.Unavailable, provider.Code(<-created))

	d2 := startDaemon(t, d.Root)
	// The restarted daemon answers at once and rolls the create back in the
	// background: wait for that, then look for what it left.
	require.Eventually(t, func() bool {
		_, err := d2.P.Get(context.Background(), "half")
		return provider.IsNotFound(err)
	}, 20*time.Second, 10*time.Millisecond, "the interrupted create is rolled back")
	orphans, err = native.New().Orphans(context.Background(), d.Root, nil)
	require.NoError(t, err)
	assert.Empty(t, orphans, "the restarted daemon killed the half-created workload")
	assert.NoDirExists(t, filepath.Join(d.Root, "half"))
	s, err := d2.P.Create(context.Background(), provider.CreateRequest{ID: "half", AutoStopInterval: ptr(0)})
	require.NoError(t, err, "the id is free again")
	assert.Equal(t, provider.StateStarted, s.State)
}

func TestHundredParallelCreatesGetDistinctPorts(t *testing.T) {
	d := startDaemon(t, "")
	const n = 100
	type result struct {
		s   *provider.Sandbox
		err error
	}
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func() {
			s, err := d.P.Create(context.Background(), provider.CreateRequest{Labels: map[string]string{"batch": "100"}, AutoStopInterval: ptr(0)})
			results <- result{s, err}
		}()
	}
	ports := map[int]string{}
	for i := 0; i < n; i++ {
		r := <-results
		require.NoError(t, r.err)
		require.Equal(t, provider.StateStarted, r.s.State)
		prev, dup := ports[r.s.Port]
		require.False(t, dup, "port %d given to %s and %s", r.s.Port, prev, r.s.ID)
		ports[r.s.Port] = r.s.ID
	}
	list, err := d.P.List(context.Background(), provider.ListOptions{Labels: map[string]string{"batch": "100"}})
	require.NoError(t, err)
	assert.Len(t, list, n)
	var wg sync.WaitGroup
	for _, s := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, d.P.Delete(context.Background(), s.ID))
		}()
	}
	wg.Wait()
	orphans, err := native.New().Orphans(context.Background(), d.Root, nil)
	require.NoError(t, err)
	assert.Empty(t, orphans, "delete leaves no process")
}

func TestStopStartPreservesTheDirectory(t *testing.T) {
	d := startDaemon(t, "")
	ctx := context.Background()
	s, err := d.P.Create(ctx, provider.CreateRequest{Name: "keeper", AutoStopInterval: ptr(0), EnvVars: map[string]string{"SECRET_TOKEN": "hunter2-very-secret"}})
	require.NoError(t, err)
	exec := func(s *provider.Sandbox, cmd string) string {
		body, _ := json.Marshal(map[string]any{"command": cmd})
		resp := toolboxDo(t, d.P, s, http.MethodPost, "/process/execute", string(body))
		defer resp.Body.Close()
		var out struct {
			ExitCode int    `json:"exitCode"`
			Result   string `json:"result"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Zero(t, out.ExitCode, out.Result)
		return out.Result
	}
	exec(s, "echo kept > state.txt; echo token=$SECRET_TOKEN")
	stopped, err := d.P.Stop(ctx, "keeper")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStopped, stopped.State)
	started, err := d.P.Start(ctx, "keeper")
	require.NoError(t, err)
	assert.Equal(t, s.ID, started.ID)
	assert.Equal(t, "kept\n", exec(started, "cat state.txt"))
	assert.Equal(t, "hunter2-very-secret\n", exec(started, "echo $SECRET_TOKEN"), "env survives the restart")

	logs, err := d.P.EntrypointLogs(ctx, "keeper")
	require.NoError(t, err)
	assert.NotContains(t, logs.Output, "hunter2-very-secret")
}

func TestAutoStopEndToEnd(t *testing.T) {
	// A one-second minute: the refreshes below, twenty a minute, keep busy
	// alive unless the machine stalls this goroutine for a whole second.
	d := testdaemon.Start(t, testdaemon.Options{Config: slowConfig, Minute: time.Second})
	ctx := context.Background()
	idle, err := d.P.Create(ctx, provider.CreateRequest{Name: "idle", AutoStopInterval: ptr(1)})
	require.NoError(t, err)
	busy, err := d.P.Create(ctx, provider.CreateRequest{Name: "busy", AutoStopInterval: ptr(1)})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			s, err := d.P.Get(ctx, "idle")
			if err != nil || s.State != provider.StateStarted {
				return
			}
			_ = d.P.RefreshActivity(ctx, "busy")
			time.Sleep(50 * time.Millisecond) // the activity's pace: twenty a minute
		}
	}()
	got := eventuallyState(t, d.P, idle.ID, provider.StateStopped)
	<-done
	assert.Equal(t, provider.ErrorReasonAutoStopped, got.ErrorReason)
	b, err := d.P.Get(ctx, busy.ID)
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, b.State, "refresh-activity kept it alive")
	eventuallyState(t, d.P, busy.ID, provider.StateStopped)
}

func TestReapOnExit(t *testing.T) {
	d := startDaemon(t, "", "AGENT_CONTROL_PLANE_REAP_ON_EXIT=1")
	s, err := d.P.Create(context.Background(), provider.CreateRequest{AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	pid := workloadPID(t, d.P, s)
	d.Stop()
	assert.Error(t, syscall.Kill(pid, 0), "the child was stopped with the daemon")
}

func TestServeRefusesATakenPort(t *testing.T) {
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer squatter.Close()
	go http.Serve(squatter, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	root := filepath.Join(t.TempDir(), "root")
	out, err := exec.Command(testdaemon.Binary(t), "serve", "--listen", squatter.Addr().String(), "--root", root).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 4, ee.ExitCode(), "unavailable, as for the simulator")
	assert.Contains(t, string(out), "not a sandplane daemon")
	assert.NoDirExists(t, root, "a serve that cannot have its port makes no root")

	d := startDaemon(t, "")
	out, err = exec.Command(testdaemon.Binary(t), "serve", "--listen", d.Addr, "--root", t.TempDir()).CombinedOutput()
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 4, ee.ExitCode())
	assert.Contains(t, string(out), "a sandplane daemon")
	assert.Contains(t, string(out), "already serves")

	out, err = exec.Command(testdaemon.Binary(t), "serve", "--listen", testdaemon.FreeAddr(t), "--root", d.Root).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "already uses root")
}

func TestUnreachableDaemonIsUnavailable(t *testing.T) {
	p, err := local.New("http://" + testdaemon.FreeAddr(t))
	require.NoError(t, err)
	_, err = p.Get(context.Background(), "x")
	assert.Equal(t, provider.Unavailable, provider.Code(err))
	assert.Contains(t, err.Error(), "sandplane serve")
}

func TestDaemonPrintsItsURLs(t *testing.T) {
	d := startDaemon(t, "")
	// The daemon listens before it serves, so a request may be answered a
	// moment before the banner that follows reaches its stderr.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		sc := bufio.NewScanner(strings.NewReader(d.Stderr.String()))
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		joined := strings.Join(lines, "\n")
		assert.Contains(c, joined, "http://"+d.Addr+"/v1")
		assert.Contains(c, joined, "http://"+d.Addr+"/")
	}, 10*time.Second, 10*time.Millisecond)
}

func ptr[T any](v T) *T { return &v }

func TestWatchSurvivesADaemonRestart(t *testing.T) {
	d := startDaemon(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := d.P.Watch(ctx, provider.WatchOptions{Labels: map[string]string{"origin": "watch"}})
	require.NoError(t, err)
	next := func(want provider.EventType) provider.Event {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				require.True(t, ok, "stream closed")
				if ev.Type == want {
					return ev
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no %s event", want)
			}
		}
	}
	assert.Empty(t, next(provider.EventSandboxesReplaced).Sandboxes)
	s, err := d.P.Create(ctx, provider.CreateRequest{Name: "w", Labels: map[string]string{"origin": "watch"}, AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	assert.Equal(t, s.ID, next(provider.EventStarted).Sandbox.ID)

	d.Stop()
	d.Restart(t)
	snap := next(provider.EventSandboxesReplaced)
	require.Len(t, snap.Sandboxes, 1, "after the restart the client gets a fresh snapshot")
	assert.Equal(t, provider.StateStarted, snap.Sandboxes[0].State)
}

// running reports whether pid names a live process (not a zombie).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
