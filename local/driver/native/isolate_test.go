package native

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// isolatedRuntime is a runtime that can isolate with bubblewrap, or skips
// the test saying what is missing.
func isolatedRuntime(t *testing.T, opts ...Option) *Driver {
	t.Helper()
	r := New(opts...)
	requirePIDNamespaces(t, r)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed: apt-get install bubblewrap")
	}
	return r
}

// isolatedSpec runs script in a bubblewrap sandbox with a port of its own.
func isolatedSpec(t *testing.T, root, script string) driver.Spec {
	t.Helper()
	spec := newSpec(t, root, "sh", "-c", script)
	spec.Isolation = IsolationBwrap
	spec.Port = freePort(t)
	spec.Env["PORT"] = strconv.Itoa(spec.Port)
	return spec
}

// python3 is the interpreter the isolated workloads run; a shim under a home
// directory (pyenv's) is hidden in the sandbox, so the system's is named.
func python3(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if executable(p) == nil {
			return p
		}
	}
	t.Skip("no system python3 to serve HTTP in the sandbox: apt-get install python3")
	return ""
}

// checks are shell conditions the isolated workload reports on, and what
// each must say.
var isolationChecks = []struct {
	name, cond string
	want       bool
}{
	{"own home is HOME", `[ "$HOME" = "$OWN_HOME" ] && [ "$(pwd)" = "$OWN_HOME" ]`, true},
	{"own home is writable", `echo mine > "$HOME/mine"`, true},
	{"own tmp is writable", `echo inside > /tmp/inside`, true},
	{"host tmp is hidden", `test -e "$HOST_TMP_FILE"`, false},
	{"other sandbox is hidden", `ls "$OTHER_HOME"`, false},
	{"daemon root is hidden", `cat "$ROOT_FILE"`, false},
	{"own logs are hidden", `test -e "$OWN_DIR/stdout.log"`, false},
	{"home directories are hidden", `ls -A "$DAEMON_HOME" | grep -q .`, false},
	{"the rest is read-only", `touch /usr/sandplane-was-here`, false},
	{"the rest is visible", `test -x /bin/sh`, true},
	{"daemon processes are hidden", `[ "$(ls -d /proc/[0-9]* | wc -l)" -gt 20 ]`, false},
	{"pid 1 is the init", `grep -q sandplane-nsinit /proc/1/cmdline`, true},
	{"host loopback is unreachable", `"$PY" -c 'import socket,os; socket.create_connection(("127.0.0.1", int(os.environ["HOST_PORT"])), 2)'`, false},
	{"no new user namespaces", `"$PY" -c 'import os; os.unshare(os.CLONE_NEWUSER)'`, false},
}

func isolationScript() string {
	var b strings.Builder
	b.WriteString("check() { if sh -c \"$2\" >/dev/null 2>&1; then echo \"check $1: true\"; else echo \"check $1: false\"; fi; }\n")
	for _, c := range isolationChecks {
		b.WriteString("check '" + c.name + "' '" + strings.ReplaceAll(c.cond, "'", `'"'"'`) + "'\n")
	}
	b.WriteString("echo checks done\nexec \"$PY\" -m http.server \"$PORT\" --bind 127.0.0.1\n")
	return b.String()
}

func TestIsolatedSandbox(t *testing.T) {
	// A root under /tmp is hidden by the sandbox's own /tmp; one elsewhere
	// by a tmpfs of its own.
	elsewhere, err := os.MkdirTemp("/var/tmp", "sandplane-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(elsewhere) })
	for name, root := range map[string]string{"root under tmp": t.TempDir(), "root elsewhere": elsewhere} {
		t.Run(name, func(t *testing.T) { testIsolatedSandbox(t, root) })
	}
}

func testIsolatedSandbox(t *testing.T, root string) {
	r := isolatedRuntime(t)
	py := python3(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, "daemon-file"), []byte("daemon"), 0o600))
	hostTmp := filepath.Join(t.TempDir(), "host-file")
	require.NoError(t, os.WriteFile(hostTmp, []byte("host"), 0o600))
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	inHome, err := os.ReadDir(home)
	require.NoError(t, err)
	require.NotEmpty(t, inHome, "the daemon's home must hold something to see it hidden")
	hostSvc, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer hostSvc.Close()
	go func() {
		for {
			c, err := hostSvc.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	other := isolatedSpec(t, root, "echo other > \"$HOME/secret\"; exec sleep 30")
	oh := start(t, r, other)
	waitFile(t, filepath.Join(other.Dir, homeDir, "secret"))

	spec := isolatedSpec(t, root, isolationScript())
	for k, v := range map[string]string{
		"PY": py, "OWN_HOME": filepath.Join(spec.Dir, homeDir), "OWN_DIR": spec.Dir,
		"HOST_TMP_FILE": hostTmp, "OTHER_HOME": filepath.Join(other.Dir, homeDir),
		"ROOT_FILE": filepath.Join(root, "daemon-file"), "DAEMON_HOME": home,
		"HOST_PORT": strconv.Itoa(hostSvc.Addr().(*net.TCPAddr).Port),
	} {
		spec.Env[k] = v
	}
	require.NoError(t, r.Preflight(testCtx(t), spec))
	h := start(t, r, spec)
	waitForLog(t, r, h, spec.Dir, "checks done")
	out, _, err := r.Logs(testCtx(t), h, spec.Dir)
	require.NoError(t, err)
	for _, c := range isolationChecks {
		assert.Contains(t, string(out), "check "+c.name+": "+strconv.FormatBool(c.want), c.cond)
	}
	assert.FileExists(t, filepath.Join(spec.Dir, homeDir, "mine"))
	assert.FileExists(t, filepath.Join(spec.Dir, tmpDir, "inside"), "/tmp is the sandbox's own")

	t.Run("port forwarded from the host", func(t *testing.T) {
		require.Eventually(t, func() bool {
			ok, err := r.Probe(testCtx(t), h, spec.HostAddrPort())
			return err == nil && ok
		}, hangGuard, 20*time.Millisecond)
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(spec.Port) + "/")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, string(body), "mine", "the listing of the sandbox's home")
	})

	t.Run("stop ends it all", func(t *testing.T) {
		ns, err := pidNS(h.PID)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(marked(spec.SandboxID)), 4, "outer init, bwrap, inner init, server")
		_, newest := namespaceMembers(t, ns)
		require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
		exit, err := r.Wait(testCtx(t), h)
		require.NoError(t, err)
		assert.Equal(t, "killed: signal SIGTERM", exit.Reason, "the server's own end, relayed")
		assert.Empty(t, marked(spec.SandboxID))
		assert.Empty(t, survivors(ns, newest), "processes of the sandbox's namespace outlived it")
		assert.True(t, portFree(spec.Port), "the forwarded port is still taken")
		assert.True(t, status(t, r, oh).Running, "the other sandbox was hit")
	})
}

func waitFile(t *testing.T, p string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := os.Stat(p)
		return err == nil
	}, hangGuard, 10*time.Millisecond, "%s never appeared", p)
}

// TestIsolatedReadinessGoesThroughTheForwarder: the forwarder accepts on the
// port from the start, so only an answer from inside proves readiness.
func TestIsolatedReadinessGoesThroughTheForwarder(t *testing.T) {
	r := isolatedRuntime(t)
	py := python3(t)
	spec := isolatedSpec(t, "", `while [ ! -e go ]; do sleep 0.02; done; exec "$PY" -m http.server "$PORT" --bind 127.0.0.1`)
	spec.Env["PY"] = py
	h := start(t, r, spec)

	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(spec.Port)))
	require.NoError(t, err, "the forwarder holds the port from Start on")
	c.Close()
	ok, err := r.Probe(testCtx(t), h, spec.HostAddrPort())
	require.NoError(t, err)
	assert.False(t, ok, "ready before the workload listens")

	require.NoError(t, os.WriteFile(filepath.Join(spec.Dir, homeDir, "go"), nil, 0o600))
	require.Eventually(t, func() bool {
		ok, err := r.Probe(testCtx(t), h, spec.HostAddrPort())
		return err == nil && ok
	}, hangGuard, 20*time.Millisecond, "never ready")
}

// TestIsolatedPortsAreForwardedToTheirSandboxPorts: each host port leads to
// the port its workload serves on in the sandbox's own network, which no
// host port holds.
func TestIsolatedPortsAreForwardedToTheirSandboxPorts(t *testing.T) {
	r := isolatedRuntime(t)
	spec := isolatedSpec(t, "", `mkdir -p a b && echo workload > a/who && echo extra > b/who
"$PY" -m http.server 3000 --bind 127.0.0.1 --directory b & exec "$PY" -m http.server 4000 --bind 127.0.0.1 --directory a`)
	spec.Env["PY"] = python3(t)
	spec.SandboxPort = 4000
	spec.ExtraPorts = []driver.PortMapping{{Sandbox: 3000, Host: freePort(t)}}
	assert.False(t, r.SharesHostNetwork(spec), "an isolated workload has a network of its own")
	h := start(t, r, spec)
	require.Eventually(t, func() bool {
		ok, err := r.Probe(testCtx(t), h, spec.HostAddrPort())
		return err == nil && ok
	}, hangGuard, 20*time.Millisecond, "the workload's own port never answered through its forwarder")

	for port, want := range map[int]string{spec.Port: "workload", spec.ExtraPorts[0].Host: "extra"} {
		var body string
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/who")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == http.StatusOK
		}, hangGuard, 20*time.Millisecond, "host port %d", port)
		assert.Equal(t, want+"\n", body, "host port %d leads to its sandbox port", port)
	}
	require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
	_, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	assert.True(t, portFree(spec.ExtraPorts[0].Host), "the extra port is given back with the workload")
}

func TestUnisolatedSharesTheHostNetwork(t *testing.T) {
	r := New()
	spec := newSpec(t, "", "true")
	assert.True(t, r.SharesHostNetwork(spec))
	spec.Isolation = IsolationBwrap
	assert.False(t, r.SharesHostNetwork(spec))
}

func TestIsolatedExitReasons(t *testing.T) {
	r := isolatedRuntime(t)
	code := func(n int) *int { return &n }
	tests := []struct {
		name   string
		script string
		stop   time.Duration // stop after "ready" with this grace; 0: no stop
		want   driver.Exit
	}{
		{"failure", "exit 3", 0, driver.Exit{Reason: "exited: code 3", Code: code(3)}},
		{"self term", "kill -TERM $$", 0, driver.Exit{Reason: "killed: signal SIGTERM"}},
		{"stopped", "echo ready; exec sleep 30", hangGuard, driver.Exit{Reason: "killed: signal SIGTERM"}},
		{"ignores term", ignoreTerm, 200 * time.Millisecond, driver.Exit{Reason: "killed: signal SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := isolatedSpec(t, "", tt.script)
			h := start(t, r, spec)
			if tt.stop > 0 {
				waitForLog(t, r, h, spec.Dir, "ready")
				require.NoError(t, r.Stop(testCtx(t), h, tt.stop))
			}
			exit, err := r.Wait(testCtx(t), h)
			require.NoError(t, err)
			assert.Equal(t, tt.want, exit)
			assert.Empty(t, marked(spec.SandboxID))
		})
	}
}

func TestIsolationIsTheDaemonsDefault(t *testing.T) {
	r := isolatedRuntime(t, WithIsolation(IsolationBwrap))
	spec := isolatedSpec(t, "", `echo "$HOME"`)
	spec.Isolation = ""
	h := start(t, r, spec)
	_, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	out, _, err := r.Logs(testCtx(t), h, spec.Dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(spec.Dir, homeDir)+"\n", string(out))

	spec.Isolation = IsolationNone
	spec.Env["HOME"] = "/the-daemons-home"
	h = start(t, r, spec)
	_, err = r.Wait(testCtx(t), h)
	require.NoError(t, err)
	out, _, err = r.Logs(testCtx(t), h, spec.Dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(spec.Dir, homeDir)+"\n/the-daemons-home\n", string(out), "none opts out")
}

func TestIsolationPreflight(t *testing.T) {
	tests := []struct {
		name    string
		rt      func(t *testing.T, opts ...Option) *Driver
		edit    func(t *testing.T, s *driver.Spec)
		mention string
	}{
		{"unknown isolation", isolatedRuntime, func(t *testing.T, s *driver.Spec) { s.Isolation = "chroot" }, `"chroot" is not known`},
		{"bubblewrap missing", isolatedRuntime, func(t *testing.T, s *driver.Spec) {
			t.Setenv("PATH", t.TempDir())
		}, "apt-get install bubblewrap"},
		{"no PID namespaces", func(t *testing.T, _ ...Option) *Driver {
			return New(WithContainment(ContainProcessGroup))
		}, func(t *testing.T, s *driver.Spec) {}, "needs PID namespaces"},
		{"no port", isolatedRuntime, func(t *testing.T, s *driver.Spec) { s.Port = 0 }, "port 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rt(t)
			spec := isolatedSpec(t, "", "true")
			spec.Command = []string{"/bin/sh", "-c", "true"}
			tt.edit(t, &spec)
			err := r.Preflight(testCtx(t), spec)
			assert.Equal(t, provider.PreflightFailed, provider.Code(err), "%v", err)
			assert.ErrorContains(t, err, tt.mention)
			_, err = r.Start(testCtx(t), spec)
			assert.Error(t, err, "Start ran what Preflight refused")
		})
	}
}

// A start that bubblewrap refuses says why in its error, from the stderr
// log, so that the reader need not go and find that log.
func TestIsolatedStartFailureQuotesStderr(t *testing.T) {
	r := isolatedRuntime(t)
	spec := isolatedSpec(t, "", "echo never")
	spec.Binds = []driver.Bind{{Source: filepath.Join(t.TempDir(), "gone"), Target: "/mnt/gone"}}
	_, err := r.Start(testCtx(t), spec)
	assert.Equal(t, provider.CreateFailed, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), "its stderr: \"bwrap: Can't find source path")
	assert.Empty(t, marked(spec.SandboxID), "a failed start left its init behind")
}

func TestMountRaced(t *testing.T) {
	tests := []struct {
		stderr string
		want   bool
	}{
		{`bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/run/docker/netns/1": No such file or directory`, true},
		{`bwrap: Can't find source path /gone: No such file or directory`, false},
		{"", false},
	}
	for _, tt := range tests {
		err := provider.Errorf(provider.CreateFailed, "start the workload: ended; its stderr: %q", tt.stderr)
		assert.Equal(t, tt.want, mountRaced(err), tt.stderr)
	}
}

// TestDialPortReachesAnyPortOfAnIsolatedSandbox: a server the workload
// starts on a port it never declared is reached from the host through
// DialPort, and a port where nothing listens is unavailable.
func TestDialPortReachesAnyPortOfAnIsolatedSandbox(t *testing.T) {
	r := isolatedRuntime(t)
	spec := isolatedSpec(t, "", `mkdir -p d && echo undeclared > d/who
"$PY" -m http.server 8123 --bind 127.0.0.1 --directory d & exec "$PY" -m http.server "$PORT" --bind 127.0.0.1`)
	spec.Env["PY"] = python3(t)
	start(t, r, spec)
	get := func() (string, error) {
		c, err := r.DialPort(testCtx(t), spec.Dir, 8123)
		if err != nil {
			return "", err
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /who HTTP/1.0\r\n\r\n"); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	var body string
	require.Eventually(t, func() bool {
		var err error
		body, err = get()
		return err == nil && strings.HasSuffix(body, "undeclared\n")
	}, hangGuard, 20*time.Millisecond, "the undeclared port never answered: %q", body)

	_, err := r.DialPort(testCtx(t), spec.Dir, 8124)
	assert.Equal(t, provider.Unavailable, provider.Code(err), "nothing listens there: %v", err)
	_, err = r.DialPort(testCtx(t), t.TempDir(), 8123)
	assert.Equal(t, provider.Unavailable, provider.Code(err), "not an isolated sandbox: %v", err)
}
