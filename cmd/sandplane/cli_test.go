package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/wire"
)

// The CLI tests run the built binary against a daemon process of their own:
// real processes, real HTTP, real signals.

// TestMain gives the daemons and sandboxes of these tests a HOME of their
// own: a native sandbox's interactive bash (exec -it) sources ~/.bashrc.
func TestMain(m *testing.M) {
	nsinit.Main() // first: re-executed as an init, this binary makes no home
	remove := testdaemon.PrivateHome()
	code := testdaemon.Main(m)
	remove()
	os.Exit(code)
}

// cliConfig adds snapshots whose workload is not the default toolbox.
func cliConfig(t *testing.T) string {
	return `
snapshots:
  slow-start:
    command: [sh, -c, "sleep 1; exec '` + testdaemon.Binary(t) + `' toolbox"]
    # The shell reaches the test's binary in the host's /tmp, which an
    # isolated sandbox's private /tmp hides.
    isolation: none
  exits-four:
    command: [sh, -c, "echo from-entrypoint; echo to-stderr >&2; sleep 0.3; exit 4"]
    ready: none
  ticker:
    command: [sh, -c, "echo one; sleep 0.5; echo two; sleep 0.5; echo three"]
    ready: none
`
}

type cliDaemon struct {
	root string
	url  string
	p    *local.Provider
	// env is added to the environment of every command cli runs.
	env []string
}

// startCLIDaemon runs `sandplane serve` with its own root. Cleanup stops it
// and kills whatever is left marked with its root.
func startCLIDaemon(t *testing.T) *cliDaemon {
	t.Helper()
	root := t.TempDir()
	// Registered before the daemon's own cleanup, so it runs after the
	// daemon stopped.
	t.Cleanup(func() {
		for _, pid := range markedProcesses(t, root) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	d := testdaemon.Start(t, testdaemon.Options{Root: root, Config: cliConfig(t), Ports: 100})
	return &cliDaemon{root: d.Root, url: d.URL, p: d.P}
}

// assertNothingLeft checks the daemon's list and the process table: no
// sandbox, no workload, no command a workload started.
func (d *cliDaemon) assertNothingLeft(t *testing.T) {
	t.Helper()
	list, err := d.p.List(context.Background(), provider.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list, "sandboxes left behind")
	orphans, err := native.New().Orphans(context.Background(), d.root, nil)
	require.NoError(t, err)
	assert.Empty(t, orphans, "workloads left behind")
	assert.Eventually(t, func() bool { return len(markedProcesses(t, d.root)) == 0 }, 10*time.Second, 20*time.Millisecond,
		"processes left behind: %v", markedProcesses(t, d.root))
}

type result struct {
	stdout, stderr string
	code           int
}

// cli runs the binary against d, with its stdin from /dev/null, and waits
// for it.
func (d *cliDaemon) cli(t *testing.T, args ...string) result {
	t.Helper()
	return d.cliIn(t, nil, args...)
}

// cliIn is cli with stdin as the binary's stdin (nil: /dev/null).
func (d *cliDaemon) cliIn(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testdaemon.Binary(t), args...)
	cmd.Env = append(cliEnv(d.url), d.env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "sandplane %v: %s", args, stderr.String())
		code = ee.ExitCode()
	}
	return result{stdout.String(), stderr.String(), code}
}

// start runs the binary against d without waiting; Cleanup kills it if the
// test did not wait for it.
func (d *cliDaemon) start(t *testing.T, args ...string) *running {
	t.Helper()
	r := &running{stdout: &testdaemon.Buffer{}, stderr: &testdaemon.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(testdaemon.Binary(t), args...)
	r.cmd.Env = cliEnv(d.url)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	require.NoError(t, r.cmd.Start())
	go func() {
		err := r.cmd.Wait()
		r.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

type running struct {
	cmd            *exec.Cmd
	stdout, stderr *testdaemon.Buffer
	done           chan struct{}
	code           int
}

func (r *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(60 * time.Second):
		t.Fatalf("sandplane did not exit; stderr: %s", r.stderr)
		return -1
	}
}

func cliEnv(url string) []string {
	env := []string{"AGENT_CONTROL_PLANE_URL=" + url}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENT_CONTROL_PLANE_URL=") && !strings.HasPrefix(kv, provider.EnvProvider+"=") && !strings.HasPrefix(kv, "SANDPLANE_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

var sandboxLine = regexp.MustCompile(`(?m)^Sandbox: (\S+)$`)

func sandboxID(t *testing.T, stderr string) string {
	t.Helper()
	m := sandboxLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, "no Sandbox: line in %q", stderr)
	return m[1]
}

func TestRunStreamsAndExitsWithTheCommandsCode(t *testing.T) {
	d := startCLIDaemon(t)
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"success", []string{"echo", "hello", "world"}, 0, "hello world\n", ""},
		{"exit code", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, 3, "out\n", "err\n"},
		{"quoting", []string{"printf", "%s|", "a b", "it's", "$HOME"}, 0, "a b|it's|$HOME|", ""},
		{"missing program", []string{"no-such-program-here"}, 127, "", "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := d.cli(t, append([]string{"run", "--auto-stop", "0", "--rm", "--"}, tt.args...)...)
			assert.Equal(t, tt.code, r.code, "stderr: %s", r.stderr)
			assert.Equal(t, tt.stdout, r.stdout)
			assert.Contains(t, r.stderr, tt.stderr)
			sandboxID(t, r.stderr)
			assert.Contains(t, r.stderr, "Dashboard: "+d.url+"/")
		})
	}
	d.assertNothingLeft(t)
}

func TestRunWithoutRmKeepsTheSandbox(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "run", "--auto-stop", "0", "--name", "kept", "--label", "task=7", "--", "true")
	require.Equal(t, 0, r.code, r.stderr)
	s, err := d.p.Get(context.Background(), "kept")
	require.NoError(t, err)
	assert.Equal(t, sandboxID(t, r.stderr), s.ID)
	assert.Equal(t, map[string]string{"origin": "cli", "task": "7"}, s.Labels)
	assert.Equal(t, provider.StateStarted, s.State)
}

func TestRunRmLeavesNothingAfterSIGINT(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.start(t, "run", "--auto-stop", "0", "--rm", "--", "sh", "-c", "echo $$; exec sleep 30")
	var pid int
	require.Eventually(t, func() bool {
		n, err := strconv.Atoi(strings.TrimSpace(r.stdout.String()))
		pid = n
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the command never started: %s", r.stderr)
	// $$ is the command's pid in the sandbox's PID namespace.
	pid = inRoot(t, d.root, pid)
	require.True(t, testdaemon.ProcessAlive(pid))
	want, tree := 4, "the sandbox's init, toolbox, session shell and sleep run"
	if info, err := d.p.Info(context.Background()); err == nil && info.Isolation == wire.IsolationBwrap {
		want, tree = 6, "the sandbox's outer init, bwrap, inner init, toolbox, session shell and sleep run"
	}
	require.Len(t, markedProcesses(t, d.root), want, tree)

	require.NoError(t, r.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, interruptedCode, r.wait(t), "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr.String(), "Deleting sandbox")
	assert.False(t, testdaemon.ProcessAlive(pid), "the command was killed")
	d.assertNothingLeft(t)
}

func TestRunRmDuringCreateLeavesNothing(t *testing.T) {
	d := startCLIDaemon(t)
	// SIGINT while the daemon waits for a slow workload to come up: the
	// create finishes regardless, and run must delete what it made.
	r := d.start(t, "run", "--auto-stop", "0", "--rm", "--snapshot", "slow-start", "--", "true")
	require.Eventually(t, func() bool {
		list, _ := d.p.List(context.Background(), provider.ListOptions{})
		return len(list) == 1 && list[0].State == provider.StateStarting
	}, 30*time.Second, time.Millisecond, "the create never began")
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, interruptedCode, r.wait(t), "stderr: %s", r.stderr)
	id := sandboxID(t, r.stderr.String())
	assert.Contains(t, r.stderr.String(), "Deleting sandbox "+id)
	d.assertNothingLeft(t)
}

func TestRunKeepsTheSandboxAliveWhileStreaming(t *testing.T) {
	d := startCLIDaemon(t)
	// A one-second window (5 minutes of 200ms) and a quiet command three
	// times as long: only run's refreshes keep the sandbox up.
	r := d.cli(t, "run", "--rm", "--auto-stop", "5", "--", "sh", "-c", "sleep 3; echo survived")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "survived\n", r.stdout)
	d.assertNothingLeft(t)
}

func TestRunFollowsTheSnapshotsOwnWorkload(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "run", "--auto-stop", "0", "--rm", "--snapshot", "exits-four")
	assert.Equal(t, 4, r.code, r.stderr)
	assert.Equal(t, "from-entrypoint\n", r.stdout)
	assert.Contains(t, r.stderr, "to-stderr\n")
	d.assertNothingLeft(t)
}

func TestRunWithoutADaemonSaysHowToStartOne(t *testing.T) {
	d := &cliDaemon{url: "http://" + testdaemon.FreeAddr(t)}
	r := d.cli(t, "run", "--", "true")
	assert.Equal(t, 4, r.code)
	assert.Contains(t, r.stderr, "sandplane serve")
	assert.Contains(t, r.stderr, "--provider local://HOST:PORT", "the flag that points the CLI elsewhere")
	r = d.cli(t, "ls")
	assert.Equal(t, 4, r.code)
	r = d.cli(t, "rm", "one", "two")
	assert.Equal(t, 4, r.code)
	assert.Contains(t, r.stderr, "sandplane: 2 of 2 failed: no sandplane daemon answers at "+d.url)
	assert.NotContains(t, r.stderr, "unavailable:", "the code is the exit code's, not the message's")
}

func TestExitCodesScriptsCanTrust(t *testing.T) {
	d := startCLIDaemon(t)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "exists").code)
	tests := []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"logs of a missing sandbox", []string{"logs", "nope"}, 3, "not found"},
		{"stop a missing sandbox", []string{"stop", "nope"}, 3, "not found"},
		{"start one missing of two", []string{"start", "exists", "nope"}, 3, "1 of 2 failed"},
		{"delete a missing sandbox", []string{"rm", "nope"}, 3, `sandbox "nope" not found`},
		{"delete two missing sandboxes", []string{"rm", "nope", "nope-too"}, 3, `2 of 2 failed: sandbox "nope" not found`},
		{"unknown snapshot", []string{"run", "--snapshot", "nope", "--", "true"}, 2, "snapshot \"nope\""},
		{"taken name", []string{"create", "--name", "exists"}, 2, "already exists"},
		{"bad label", []string{"ls", "--label", "novalue"}, 2, "key=value"},
		{"negative auto-stop", []string{"create", "--auto-stop", "-1"}, 2, "--auto-stop"},
		{"unknown provider", []string{"ls", "--provider", "nowhere://"}, 2, "unknown provider"},
		{"unknown provider in the CLI's terms", []string{"rm", "--provider", "bogus://", "x"}, 2, "--provider (or SANDBOX_PROVIDER) must be one of daytona://, local://"},
		{"no toolbox in the snapshot", []string{"run", "--rm", "--snapshot", "ticker", "--", "true"}, 1, "serves no toolbox"},
		{"follow and json", []string{"logs", "-f", "--json", "exists"}, 2, "--follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := d.cli(t, tt.args...)
			assert.Equal(t, tt.code, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stderr, tt.say)
			assert.NotRegexp(t, `(not_found|invalid_argument|already_exists|internal): `, r.stderr, "no error code in a message")
			assert.NotContains(t, r.stderr, "import its package", "advice for Go programs")
		})
	}
	list, err := d.p.List(context.Background(), provider.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list, 1, "only the sandbox the test made is left")
}

func TestLifecycleCommands(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "create", "--json", "--name", "life", "--label", "k=v", "--env", "SECRET=hunter2", "--auto-stop", "0")
	require.Equal(t, 0, r.code, r.stderr)
	var created provider.Sandbox
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &created))
	assert.Equal(t, "life", created.Name)
	assert.Equal(t, provider.StateStarted, created.State)
	assert.Equal(t, map[string]string{"origin": "cli", "k": "v"}, created.Labels)
	assert.Zero(t, created.AutoStopInterval)

	r = d.cli(t, "create", "--auto-stop", "0", "--name", "plain")
	require.Equal(t, 0, r.code, r.stderr)
	plainID := strings.TrimSpace(r.stdout)
	assert.Contains(t, r.stderr, "Sandbox plain ("+plainID+") is started")

	r = d.cli(t, "stop", "--json", "life", plainID)
	require.Equal(t, 0, r.code, r.stderr)
	var stopped []provider.Sandbox
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &stopped))
	require.Len(t, stopped, 2)
	for _, s := range stopped {
		assert.Equal(t, provider.StateStopped, s.State)
	}

	r = d.cli(t, "start", "life")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "life\n", r.stdout)
	s, err := d.p.Get(context.Background(), "life")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, s.State)

	r = d.cli(t, "rm", "--json", "life", plainID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `[{"id":"life"},{"id":"`+plainID+`"}]`, r.stdout)
	d.assertNothingLeft(t)
}

func TestLsShowsWhatTheDashboardShows(t *testing.T) {
	d := startCLIDaemon(t)
	ctx := context.Background()
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "from-cli").code)
	_, err := d.p.Create(ctx, provider.CreateRequest{Name: "from-harness", Labels: map[string]string{"origin": "harness"}, AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	_, err = d.p.Create(ctx, provider.CreateRequest{Name: "unlabelled", AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	require.Equal(t, 0, d.cli(t, "stop", "from-harness").code)

	r := d.cli(t, "ls", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var listed []provider.Sandbox
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	var fromCLI []string
	for _, s := range listed {
		fromCLI = append(fromCLI, s.ID+" "+s.Name+" "+string(s.State))
	}

	resp, err := http.Get(d.url + "/")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	var fromPage []string
	for _, m := range regexp.MustCompile(`<tr data-id="([^"]+)" data-name="([^"]+)" data-state="([^"]+)">`).FindAllStringSubmatch(string(page), -1) {
		fromPage = append(fromPage, m[1]+" "+m[2]+" "+m[3])
	}
	assert.Len(t, fromCLI, 3)
	assert.Equal(t, fromPage, fromCLI, "same sandboxes, same states, same order")

	r = d.cli(t, "ls")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4)
	assert.Equal(t, []string{"ID", "NAME", "STATE", "RUNTIME", "PORT", "AGE", "IDLE", "REASON", "ORIGIN", "SESSION"}, strings.Fields(lines[0]))
	for i, s := range listed {
		f := strings.Fields(lines[i+1])
		require.Len(t, f, 10, lines[i+1])
		assert.Equal(t, []string{s.ID, s.Name, string(s.State), string(s.Runtime)}, f[:4])
		assert.Equal(t, orDash(s.Labels["origin"]), f[8])
		assert.Equal(t, orDash(deref(s.SessionID)), f[9])
	}

	r = d.cli(t, "ls", "--json", "--label", "origin=harness")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	require.Len(t, listed, 1)
	assert.Equal(t, "from-harness", listed[0].Name)
}

func TestWatchSeesEveryTransition(t *testing.T) {
	d := startCLIDaemon(t)
	w := d.start(t, "watch", "--json")
	lines := make(chan provider.Event, 1024)
	go func() {
		defer close(lines)
		off := 0
		for {
			exited := false
			select {
			case <-w.done:
				exited = true
			case <-time.After(10 * time.Millisecond):
			}
			out := w.stdout.String()
			for {
				i := strings.IndexByte(out[off:], '\n')
				if i < 0 {
					break
				}
				var ev provider.Event
				if assert.NoError(t, json.Unmarshal([]byte(out[off:off+i]), &ev), "not a JSON event: %s", out[off:off+i]) {
					lines <- ev
				}
				off += i + 1
			}
			if exited {
				return
			}
		}
	}()
	first := nextEvent(t, lines)
	require.Equal(t, provider.EventSandboxesReplaced, first.Type)

	for _, args := range [][]string{
		{"create", "--auto-stop", "0", "--name", "watched"}, {"stop", "watched"}, {"start", "watched"}, {"rm", "watched"},
	} {
		r := d.cli(t, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
	var seen []string
	for {
		ev := nextEvent(t, lines)
		if ev.Sandbox == nil || ev.Sandbox.Name != "watched" || ev.Type == provider.EventActivity {
			continue
		}
		seen = append(seen, string(ev.Type)+":"+string(ev.Sandbox.State))
		if ev.Type == provider.EventDeleted {
			break
		}
	}
	assert.Equal(t, []string{
		"sandbox.created:started", "sandbox.started:started",
		"sandbox.stopped:stopped",
		"sandbox.started:started",
		"sandbox.stopped:stopped", "sandbox.deleted:destroyed",
	}, seen)

	require.NoError(t, w.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 0, w.wait(t), "Ctrl-C is how watch ends: %s", w.stderr)
}

func TestWatchForPeople(t *testing.T) {
	d := startCLIDaemon(t)
	w := d.start(t, "watch", "--label", "origin=cli")
	require.Eventually(t, func() bool { return strings.Contains(w.stdout.String(), "snapshot") }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "seen").code)
	_, err := d.p.Create(context.Background(), provider.CreateRequest{Name: "filtered-out", AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	require.Equal(t, 0, d.cli(t, "rm", "seen").code)
	require.Eventually(t, func() bool { return strings.Contains(w.stdout.String(), "deleted") }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, w.wait(t))
	out := w.stdout.String()
	assert.Regexp(t, `(?m)^\d\d:\d\d:\d\d\.\d{3}  created +seen +started port=\d+ origin=cli$`, out)
	assert.Contains(t, out, `reason="deleted"`)
	assert.NotContains(t, out, "filtered-out")
}

func TestLogs(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "create", "--auto-stop", "0", "--name", "ticking", "--snapshot", "ticker")
	require.Equal(t, 0, r.code, r.stderr)
	r = d.cli(t, "logs", "-f", "ticking")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "one\ntwo\nthree\n", r.stdout, "-f follows until the workload ends")

	r = d.cli(t, "logs", "ticking")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "one\ntwo\nthree\n", r.stdout)

	r = d.cli(t, "logs", "--json", "ticking")
	require.Equal(t, 0, r.code, r.stderr)
	var logs provider.EntrypointLogs
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &logs))
	assert.Equal(t, "one\ntwo\nthree\n", logs.Stdout)
}

func TestInfo(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "info")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^dashboard: +`+regexp.QuoteMeta(d.url+"/")+`$`, r.stdout)
	assert.Regexp(t, `(?m)^minute: +200ms$`, r.stdout)
	assert.Regexp(t, `(?m)^snapshots: +default, exits-four, slow-start, ticker$`, r.stdout)

	r = d.cli(t, "info", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var info provider.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info))
	assert.Equal(t, "sandplane", info.Name)
	assert.Equal(t, d.root, info.RootDir)
}

func nextEvent(t *testing.T, ch <-chan provider.Event) provider.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "watch ended early")
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event from watch")
		return provider.Event{}
	}
}

// markedProcesses lists every live process that carries root's marker in
// its environment: workloads and whatever they started.
func markedProcesses(t *testing.T, root string) []int {
	t.Helper()
	marker := []byte("\x00SANDPLANE_ROOT=" + root + "\x00")
	return testdaemon.ProcessesWhere(t, "environ", func(env []byte) bool {
		return bytes.Contains(append([]byte{0}, env...), marker)
	})
}

// inRoot is the pid, in ours, of the process marked with root whose pid in
// its own PID namespace is nsPID.
func inRoot(t *testing.T, root string, nsPID int) int {
	t.Helper()
	for _, pid := range markedProcesses(t, root) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if f, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if ns := strings.Fields(f); len(ns) > 0 && ns[len(ns)-1] == strconv.Itoa(nsPID) {
					return pid
				}
			}
		}
	}
	t.Fatalf("no process of %s is %d in its namespace", root, nsPID)
	return 0
}

func TestRunRmLeavesNothingWhenTheReaderGoesAway(t *testing.T) {
	d := startCLIDaemon(t)
	// sandplane run --rm -- yes | head -1
	cmd := exec.Command(testdaemon.Binary(t), "run", "--auto-stop", "0", "--rm", "--", "sh", "-c", "while :; do echo y; sleep 0.01; done")
	cmd.Env = cliEnv(d.url)
	var stderr testdaemon.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "stderr: %s", &stderr)
	assert.Equal(t, "y\n", line)
	require.NoError(t, stdout.Close())

	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, brokenPipeCode, ee.ExitCode(), "the shell's code for a process a broken pipe ended; stderr: %s", &stderr)
	d.assertNothingLeft(t)
}

// A sandbox made for an agent session is listed by it, and shows it.
func TestSessionFlags(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "create", "--auto-stop", "0", "--name", "turn", "--session", "sess-7")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "turn", strings.TrimSpace(r.stdout), "the name is the id")
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "other").code)

	r = d.cli(t, "ls", "-q", "--session", "sess-7")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "turn", strings.TrimSpace(r.stdout))
	r = d.cli(t, "ls")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^turn\s+turn\s.*\ssess-7$`, r.stdout)

	r = d.cli(t, "create", "--id", "a", "--name", "b")
	assert.Equal(t, 2, r.code, "a usage error")
	assert.Contains(t, r.stderr, "a sandbox's id is its name")
}
