package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/daemon"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// A daemon killed while it stops eight workloads that ignore SIGTERM must
// answer as soon as it is back, not once it has waited out every grace:
// the first answer arrives while all eight are still listed stopping, an
// operation on one of them is refused at once, and the stops and deletes
// finish in the background.
func TestRestartAnswersWhileStopsFinish(t *testing.T) {
	// The server answers (and the create returns) only once the shell has
	// set SIGTERM ignored, which exec keeps: a stop sent sooner would end
	// it at once. The grace is long enough that every stop is still
	// waiting it out when the last one begins, on a machine too loaded to
	// send eight requests at once: all eight are seen stopping at once.
	d := testdaemon.Start(t, testdaemon.Options{Config: `
stopGrace: 20s
snapshots:
  stubborn:
    command: [sh, -c, "trap '' TERM; exec python3 -m http.server --bind 127.0.0.1 \"$PORT\""]
`})
	ctx := context.Background()
	ids := make([]string, 8)
	for i := range ids {
		s, err := d.P.Create(ctx, provider.CreateRequest{Snapshot: "stubborn", Labels: map[string]string{"i": strconv.Itoa(i)}, AutoStopInterval: ptr(0)})
		require.NoError(t, err)
		ids[i] = s.ID
	}
	// An answer before the kill is an error: each stop waits out its grace.
	answered := make(chan error, len(ids))
	var seen []string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %v", seen)
		}
	}()
	for i, id := range ids {
		go func() {
			if i%2 == 0 {
				_, err := d.P.Stop(ctx, id)
				answered <- fmt.Errorf("stop %s answered early: %v", id, err)
			} else {
				answered <- fmt.Errorf("delete %s answered early: %v", id, d.P.Delete(ctx, id))
			}
		}()
	}
	waitFor(t, 15*time.Second, "every sandbox stopping", func() bool {
		select {
		case err := <-answered:
			t.Fatal(err)
		default:
		}
		list, err := d.P.List(ctx, provider.ListOptions{})
		require.NoError(t, err)
		seen, stopping := seen[:0], 0
		for _, s := range list {
			seen = append(seen, s.ID+" "+string(s.State))
			if s.State == provider.StateStopping {
				stopping++
			}
		}
		return stopping == len(ids)
	})
	d.Kill9()

	d = d.Restart(t) // returns at the first answer to GET /v1/info
	assert.Equal(t, len(ids), countIn(t, d.P, provider.StateStopping),
		"the daemon answered while the stops were still under way, each waiting out its grace")
	_, err := d.P.Start(ctx, ids[0])
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), "still stopping after the daemon restart; retry in a few seconds")

	waitFor(t, 2*time.Minute, "the interrupted stops and deletes to finish", func() bool {
		list, err := d.P.List(ctx, provider.ListOptions{})
		require.NoError(t, err)
		for _, s := range list {
			if s.State != provider.StateStopped {
				return false
			}
		}
		return len(list) == len(ids)/2
	})
	for i, id := range ids {
		_, err := d.P.Get(ctx, id)
		if i%2 == 1 {
			assert.True(t, provider.IsNotFound(err), "%s: %v", id, err)
		} else {
			assert.NoError(t, err)
		}
	}
	s, err := d.P.Start(ctx, ids[0])
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, s.State)
}

func countIn(t *testing.T, p *local.Provider, state provider.State) int {
	t.Helper()
	list, err := p.List(context.Background(), provider.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, s := range list {
		if s.State == state {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	clk := clock.Real()
	deadline := clk.NewTimer(limit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-deadline.C():
			t.Fatalf("gave up waiting for %s after %s", what, limit)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestTokenFileMustBePrivate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("s3cret-token\n"), 0o600))
	require.NoError(t, os.Chmod(file, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testdaemon.Binary(t), "serve", "--listen", testdaemon.FreeAddr(t), "--root", t.TempDir(), "--token-file", file)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the daemon must refuse to start: %s", out)
	assert.Contains(t, string(out), "chmod 600 "+file)
	assert.NotContains(t, string(out), "s3cret-token")
}

// A listen address that is not loopback is a usage error (exit code 2), as
// it is for sim and relay, named where it was set, and refused before the
// daemon takes its root.
func TestServeRefusesBadSettingsAsAUsageError(t *testing.T) {
	_, port, err := net.SplitHostPort(testdaemon.FreeAddr(t))
	require.NoError(t, err)
	addr := "0.0.0.0:" + port
	config := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte("listen: "+addr+"\n"), 0o644))
	tests := []struct {
		name string
		args []string
		env  string
		say  string
	}{
		{"the flag", []string{"--listen", addr}, "", `--listen "` + addr + `" is not loopback`},
		{"the environment", nil, "SANDPLANE_LISTEN=" + addr, `SANDPLANE_LISTEN "` + addr + `" is not loopback`},
		{"the config file", []string{"--config", config}, "", `listen (in the config file) "` + addr + `" is not loopback`},
		{"no port", []string{"--listen", "127.0.0.1"}, "", `--listen "127.0.0.1": address 127.0.0.1: missing port`},
		{"a config file that is not there", []string{"--config", config + ".missing"}, "", "read config: open " + config + ".missing: no such file or directory"},
		{"a bad value in the environment", nil, "SANDPLANE_MINUTE=soon", "SANDPLANE_MINUTE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, testdaemon.Binary(t), append([]string{"serve", "--root", root}, tt.args...)...)
			cmd.Env = cliEnv("http://127.0.0.1:1")
			if tt.env != "" {
				cmd.Env = append(cmd.Env, tt.env)
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "serve must refuse to start: %s", out)
			assert.Equal(t, 2, ee.ExitCode(), "%s", out)
			assert.Contains(t, string(out), tt.say)
			assert.NoDirExists(t, root, "refused before the daemon takes its root")
		})
	}
}

// The CLI's check of a listen address refuses what daemon.Listen refuses,
// and nothing else.
func TestCheckLoopbackAgreesWithTheDaemon(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1:0", "127.0.0.2:0", "localhost:0", "[::1]:0",
		"0.0.0.0:0", "[::]:0", ":0", "192.0.2.1:0", "example.com:0", "LOCALHOST:0", "127.0.0.1.example:0",
	} {
		t.Run(addr, func(t *testing.T) {
			ln, err := daemon.Listen(context.Background(), addr)
			if err == nil {
				ln.Close()
			}
			daemonRefuses := err != nil && strings.Contains(err.Error(), "is not loopback")
			cliErr := checkLoopback("--listen", addr, "why")
			assert.Equal(t, daemonRefuses, cliErr != nil, "daemon: %v; cli: %v", err, cliErr)
			if cliErr != nil {
				assert.Equal(t, 2, exitCode(cliErr))
			}
		})
	}
}

// What the daemon holds stays with it: a token from a 0600 file guards the
// API, /v1/info tells an unauthenticated caller only what a probe needs, a
// workload inherits nothing of the daemon's environment but the documented
// variables (not the token, not a marker), and it cannot read the daemon's
// environment through /proc either, since the daemon is not dumpable.
//
// The daemon runs as an unprivileged user (nobody, when the test runs as
// root), as it would on a workstation: root may read any process's /proc
// entries whatever their owner says.
func TestDaemonSecretsStayWithTheDaemon(t *testing.T) {
	const token = "s3cret-token-from-a-file"
	const marker = "daemon-marker-value"
	u := unprivileged(t)
	require.NoError(t, os.WriteFile(u.path("token"), []byte(token+"\n"), 0o600))
	require.NoError(t, os.Chown(u.path("token"), u.uid, u.gid))
	require.NoError(t, os.WriteFile(u.path("config.yaml"), []byte(`
snapshots:
  spy:
    command: [sh, -c, "env > env.txt; cat /proc/$PPID/environ > daemon-env.txt 2> daemon-env.err; touch reported; exec sleep 600"]
    ready: none
`), 0o644))
	d := u.serve(t, []string{"--token-file", u.path("token"), "--config", u.path("config.yaml")},
		"SANDPLANE_TEST_MARKER="+marker, "SANDPLANE_TOKEN=from-the-environment-"+marker)

	// The API: the file's token, not the environment's.
	assert.Equal(t, http.StatusUnauthorized, getWithToken(t, d.url+"/v1/sandboxes", "").status)
	assert.Equal(t, http.StatusUnauthorized, getWithToken(t, d.url+"/v1/sandboxes", "from-the-environment-"+marker).status)
	assert.Equal(t, http.StatusOK, getWithToken(t, d.url+"/v1/sandboxes", token).status)

	// /v1/info
	var probe, full map[string]any
	require.NoError(t, json.Unmarshal([]byte(getWithToken(t, d.url+"/v1/info", "").body), &probe))
	assert.ElementsMatch(t, []string{"name", "version", "apiVersion", "auth"}, keysOf(probe), "identity, and that the caller needs the token")
	assert.Equal(t, "required", probe["auth"].(map[string]any)["state"])
	require.NoError(t, json.Unmarshal([]byte(getWithToken(t, d.url+"/v1/info", token).body), &full))
	assert.EqualValues(t, d.cmd.Process.Pid, full["pid"])
	assert.Equal(t, d.root, full["rootDir"])

	// A workload's view.
	p, err := local.New(d.url, local.WithToken(token))
	require.NoError(t, err)
	s, err := p.Create(context.Background(), provider.CreateRequest{Snapshot: "spy", EnvVars: map[string]string{"OWN": "mine"}, AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	dir := filepath.Join(d.root, s.ID)
	// Once "reported" exists, cat has written all it will: the shell makes
	// daemon-env.err before cat runs.
	waitFor(t, 20*time.Second, "the workload's reports", func() bool {
		_, err := os.Stat(filepath.Join(dir, "reported"))
		return err == nil
	})
	env := readFile(t, filepath.Join(dir, "env.txt"))
	assert.NotContains(t, env, marker, "no daemon variable beyond the documented ones reaches a workload")
	assert.NotContains(t, env, token)
	assert.Contains(t, env, "OWN=mine")
	assert.Contains(t, env, "PORT="+strconv.Itoa(s.Port))
	assert.Empty(t, readFile(t, filepath.Join(dir, "daemon-env.txt")), "the workload read the daemon's environment")
	assert.Contains(t, readFile(t, filepath.Join(dir, "daemon-env.err")), "Permission denied")

	// Any other process of the daemon's user fares no better.
	out, err := u.command("cat", fmt.Sprintf("/proc/%d/environ", d.cmd.Process.Pid)).CombinedOutput()
	require.Error(t, err, "read the daemon's environment as its own user: %q", out)
	assert.Contains(t, string(out), "Permission denied")
	assert.NotContains(t, string(out), marker)
}

// unprivilegedUser runs processes as a user without privileges over other
// users' processes: nobody when the test runs as root, the test's own user
// otherwise.
type unprivilegedUser struct {
	uid, gid int
	cred     *syscall.Credential // nil: the test's own user
	dir      string              // a directory the user may use
	bin      string              // the sandplane binary, executable by the user
}

func unprivileged(t *testing.T) *unprivilegedUser {
	t.Helper()
	u := &unprivilegedUser{uid: os.Getuid(), gid: os.Getgid()}
	dir, err := os.MkdirTemp("", "sandplane-unprivileged-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	u.dir = dir
	if u.uid == 0 {
		u.uid, u.gid = 65534, 65534
		u.cred = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, os.Chown(dir, u.uid, u.gid))
	}
	u.bin = u.path("sandplane")
	data, err := os.ReadFile(testdaemon.Binary(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(u.bin, data, 0o755))
	return u
}

func (u *unprivilegedUser) path(name string) string { return filepath.Join(u.dir, name) }

func (u *unprivilegedUser) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + u.dir}
	if u.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
	}
	return cmd
}

type servingDaemon struct {
	cmd  *exec.Cmd
	url  string
	root string
}

// serve runs `sandplane serve` as the user, with env added to a minimal
// environment, and waits until it answers.
func (u *unprivilegedUser) serve(t *testing.T, args []string, env ...string) *servingDaemon {
	t.Helper()
	d := &servingDaemon{url: "http://" + testdaemon.FreeAddr(t), root: u.path("root")}
	cmd := u.command(u.bin, append([]string{"serve", "--listen", strings.TrimPrefix(d.url, "http://"), "--root", d.root}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	stderr := &testdaemon.Buffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	d.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		testdaemon.KillMarked(t, d.root)
		if t.Failed() {
			t.Logf("daemon log:\n%s", stderr)
		}
	})
	waitFor(t, 20*time.Second, "the daemon to answer", func() bool {
		select {
		case <-exited:
			t.Fatalf("the daemon exited: %s", stderr)
		default:
		}
		resp, err := http.Get(d.url + "/v1/info")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return d
}

type reply struct {
	status int
	body   string
}

func getWithToken(t *testing.T, url, token string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, string(b)}
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
