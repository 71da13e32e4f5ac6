package native

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
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
	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
)

// requirePIDNamespaces skips a test of PID namespace containment where the
// platform has none, saying why.
func requirePIDNamespaces(t *testing.T, r *Driver) {
	t.Helper()
	if r.Containment() != ContainPIDNamespace {
		t.Skipf("this machine gives no PID namespaces, so the runtime uses %s: %v", r.Containment(), r.ContainmentFallback())
	}
}

// nsDriver is a runtime in PID namespaces (the test is skipped where there
// are none) that, with userNS, starts its inits in a user namespace too, as
// it does for an unprivileged daemon.
func nsDriver(t *testing.T, userNS bool) *Driver {
	t.Helper()
	r := New()
	requirePIDNamespaces(t, r)
	if userNS {
		p := probeNamespaces(true)
		require.NoError(t, p.err, "user namespaces")
		r.userNS, r.ownProc = true, p.ownProc
	}
	return r
}

// listenerCommand is a shell command that serves TCP on $PORT: python's
// http.server when there is a python3, else this test binary.
func listenerCommand(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err == nil {
		return `python3 -m http.server "$PORT" --bind 127.0.0.1`
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	return listenVar + "=1 '" + exe + "'"
}

// escapeScript starts every kind of process that outlived its sandbox before
// containment: a nohup'd background job, a setsid'd one, and a server that
// double-forked away from its parent, holding the sandbox's port.
func escapeScript(listener string) string {
	return `nohup sleep 999 >/dev/null 2>&1 &
setsid sleep 999 &
sh -c '` + strings.ReplaceAll(listener, "'", `'"'"'`) + ` >/dev/null 2>&1 &' &
echo started
exec sleep 999`
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func waitServing(t *testing.T, port int) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, hangGuard, 10*time.Millisecond, "nothing came to serve on port %d", port)
}

// live lists the processes, zombies aside, that match.
func live(match func(pid string) bool) []int {
	entries, _ := os.ReadDir(procRoot)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if st, err := readStat(pid); err != nil || st.Zombie() {
			continue
		}
		if match(e.Name()) {
			out = append(out, pid)
		}
	}
	return out
}

// marked lists the processes carrying sandbox id's marker.
func marked(id string) []int {
	return live(func(pid string) bool {
		env, err := os.ReadFile(procRoot + "/" + pid + "/environ")
		return err == nil && hasVar(env, idVar+"="+id)
	})
}

// pidNS names process pid's PID namespace.
func pidNS(pid int) (string, error) {
	return os.Readlink(procRoot + "/" + strconv.Itoa(pid) + "/ns/pid")
}

// pidsInNamespace lists the processes in PID namespace ns.
func pidsInNamespace(ns string) []int {
	return live(func(pid string) bool {
		got, err := os.Readlink(procRoot + "/" + pid + "/ns/pid")
		return err == nil && got == ns
	})
}

// namespaceMembers lists the processes of namespace ns and the start time
// of the newest.
func namespaceMembers(t *testing.T, ns string) (members []int, newest uint64) {
	t.Helper()
	members = pidsInNamespace(ns)
	for _, pid := range members {
		st, err := readStat(pid)
		require.NoError(t, err)
		newest = max(newest, st.StartTime)
	}
	return members, newest
}

// survivors lists the processes of namespace ns that started no later than
// newest. Once freed, a namespace's number goes to the next one made on this
// machine: only members as old as the sandbox's can be the sandbox's.
func survivors(ns string, newest uint64) []int {
	var out []int
	for _, pid := range pidsInNamespace(ns) {
		if st, err := readStat(pid); err == nil && st.StartTime <= newest {
			out = append(out, pid)
		}
	}
	return out
}

// hostPID is the pid, in ours, of sandbox id's process whose pid in its own
// namespace is nsPID.
func hostPID(t *testing.T, id string, nsPID int) int {
	t.Helper()
	for _, pid := range marked(id) {
		if ns, err := nsPIDs(pid); err == nil && ns[len(ns)-1] == nsPID {
			return pid
		}
	}
	t.Fatalf("sandbox %s has no process %d", id, nsPID)
	return 0
}

// describe names pids by their command lines, for failure messages.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmd, _ := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/cmdline")
		st, _ := readStat(pid)
		fmt.Fprintf(&b, "[%d start %d: %s] ", pid, st.StartTime, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
	}
	return b.String()
}

// startEscaping starts the escape script (escapeScript) on r, under root,
// with a port of its own, as how says (see startAs), and waits until all it
// starts runs and serves.
func startEscaping(t *testing.T, r *Driver, root, how string) (driver.Spec, driver.Handle) {
	t.Helper()
	spec := newSpec(t, root, "sh", "-c", escapeScript(listenerCommand(t)))
	spec.Port = freePort(t)
	spec.Env["PORT"] = strconv.Itoa(spec.Port)
	h := startAs(t, r, spec, how)
	t.Cleanup(func() { killMarked(spec.SandboxID) })
	waitForLog(t, r, h, spec.Dir, "started")
	waitServing(t, spec.Port)
	return spec, h
}

// killMarked SIGKILLs whatever of sandbox id a failed test left.
func killMarked(id string) {
	for _, pid := range marked(id) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

func TestContainmentIsReported(t *testing.T) {
	r := New()
	requirePIDNamespaces(t, r)
	assert.Equal(t, ContainPIDNamespace, r.Containment())
	assert.NoError(t, r.ContainmentFallback())

	pg := New(WithContainment(ContainProcessGroup))
	assert.Equal(t, ContainProcessGroup, pg.Containment())
	assert.Error(t, pg.ContainmentFallback())
	var c driver.Containment = r
	assert.Equal(t, ContainPIDNamespace, c.Containment())
}

// TestNothingOutlivesTheSandbox is the regression test for workloads that
// escaped their sandbox: every way a sandbox ends must end all of it.
func TestNothingOutlivesTheSandbox(t *testing.T) {
	ends := []struct {
		name string
		end  func(t *testing.T, spawner *Driver, root string, h driver.Handle)
	}{
		{"stop", func(t *testing.T, r *Driver, _ string, h driver.Handle) {
			require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
		}},
		{"remove", func(t *testing.T, r *Driver, _ string, h driver.Handle) {
			require.NoError(t, r.Remove(testCtx(t), h))
		}},
		{"stop after the daemon died", func(t *testing.T, _ *Driver, _ string, h driver.Handle) {
			// A new value stands for the restarted daemon: it adopts the
			// handle it finds in sandbox.json.
			adopter := New()
			require.True(t, status(t, adopter, h).Running)
			require.NoError(t, adopter.Stop(testCtx(t), h, hangGuard))
		}},
		{"remove after the daemon died", func(t *testing.T, _ *Driver, _ string, h driver.Handle) {
			require.NoError(t, New().Remove(testCtx(t), h))
		}},
		{"orphan swept after the daemon died", func(t *testing.T, _ *Driver, root string, h driver.Handle) {
			// The handle never reached disk: only the marker finds it.
			adopter := New()
			orphans, err := adopter.Orphans(testCtx(t), root, nil)
			require.NoError(t, err)
			require.Equal(t, []driver.Handle{h}, orphans, "one root per workload, however many sessions it made")
			require.NoError(t, adopter.Stop(testCtx(t), orphans[0], hangGuard))
		}},
	}
	namespaces := []struct {
		name   string
		userNS bool
	}{{"pid", false}, {"pid+user", true}}
	for _, ns := range namespaces {
		for _, tt := range ends {
			for _, how := range starts {
				t.Run(ns.name+"/"+how+"/"+tt.name, func(t *testing.T) {
					r := nsDriver(t, ns.userNS)
					root := t.TempDir()
					spec, h := startEscaping(t, r, root, how)

					ns, err := pidNS(h.PID)
					require.NoError(t, err)
					self, err := pidNS(os.Getpid())
					require.NoError(t, err)
					require.NotEqual(t, self, ns, "the workload has a PID namespace of its own")
					procs := marked(spec.SandboxID)
					// init, the main sleep, the nohup'd and the setsid'd sleeps,
					// the server (python3 may be behind a shim that adds more).
					require.GreaterOrEqual(t, len(procs), 5, "the escape script did not start everything")
					ports, err := r.ListeningPorts(testCtx(t), h)
					require.NoError(t, err)
					assert.Contains(t, ports, netip.MustParseAddrPort("127.0.0.1:"+strconv.Itoa(spec.Port)),
						"the server that double-forked away is still the sandbox's")
					members, newest := namespaceMembers(t, ns)
					assert.ElementsMatch(t, procs, members, "every process of the sandbox is in its namespace")

					tt.end(t, r, root, h)

					left := survivors(ns, newest)
					assert.Empty(t, left, "processes of the sandbox's namespace outlived it: %s", describe(left))
					left = marked(spec.SandboxID)
					assert.Empty(t, left, "processes of the sandbox outlived it: %s", describe(left))
					assert.True(t, portFree(spec.Port), "the sandbox's port is still taken")
				})
			}
		}
	}
}

// TestProcessGroupsDoNotContainSetsid shows what the fallback does not
// guarantee, and that TestNothingOutlivesTheSandbox would see it.
func TestProcessGroupsDoNotContainSetsid(t *testing.T) {
	r := New(WithContainment(ContainProcessGroup))
	spec, h := startEscaping(t, r, "", "cold")

	require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
	// The group's SIGKILL takes a moment to end its members; what then
	// remains is what left the group.
	var left []int
	require.Eventually(t, func() bool {
		left = marked(spec.SandboxID)
		for _, pid := range left {
			if st, err := readStat(pid); err == nil && st.Session == h.PID {
				return false
			}
		}
		return true
	}, hangGuard, 10*time.Millisecond)
	assert.NotEmpty(t, left, "setsid escaped nothing: the fallback contains more than documented")
}

func TestInitReportsStartFailure(t *testing.T) {
	r := New()
	requirePIDNamespaces(t, r)
	// Preflight found the command; it is gone by the time the init runs it.
	bin := filepath.Join(t.TempDir(), "vanishing")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700))
	spec := newSpec(t, "", bin)
	path, dir, err := r.resolve(spec)
	require.NoError(t, err)
	env, err := environ(spec)
	require.NoError(t, err)
	require.NoError(t, os.Remove(bin))
	l, err := r.prepare(spec, path, dir, env)
	require.NoError(t, err)
	defer l.release()
	_, err = r.spawn(testCtx(t), l, spec.Command[0])
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such file")
	assert.Empty(t, marked(spec.SandboxID), "a failed start left its init behind")
}

func TestWorkloadKeepsTheDaemonsUser(t *testing.T) {
	for _, how := range starts {
		for _, userNS := range []bool{false, true} {
			t.Run(how+"/userns="+strconv.FormatBool(userNS), func(t *testing.T) {
				r := nsDriver(t, userNS)
				// No ambient or inheritable capability reaches the
				// workload: the init holds CAP_SYS_ADMIN in its user
				// namespace only to mount /proc.
				spec := newSpec(t, "", "sh", "-c", `echo "$(id -u) $(id -g)"; grep -E '^Cap(Inh|Amb):' /proc/self/status; touch made-here`)
				out := runAs(t, r, spec, how)
				assert.Equal(t, strconv.Itoa(os.Geteuid())+" "+strconv.Itoa(os.Getegid())+"\nCapInh:\t0000000000000000\nCapAmb:\t0000000000000000\n", out)
				fi, err := os.Stat(filepath.Join(spec.Dir, "made-here"))
				require.NoError(t, err)
				assert.Equal(t, uint32(os.Geteuid()), fi.Sys().(*syscall.Stat_t).Uid, "files keep the daemon's uid")
			})
		}
	}
}

func TestInitRefusesToRunOutsideItsNamespace(t *testing.T) {
	// Started as a plain child, the init is not PID 1: kill(-1) there would
	// reach every process of the user, so it must not run.
	exe, err := os.Executable()
	require.NoError(t, err)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	cmd := exec.CommandContext(context.Background(), exe, "--", "/bin/sh", "sh", "-c", "exit 0")
	cmd.Args[0] = "sandplane-nsinit"
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Run()
	w.Close()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 125, ee.ExitCode())
	report, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Contains(t, string(report), "error init: not PID 1")
}
