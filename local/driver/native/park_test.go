package native

import (
	"bufio"
	"context"
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
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// parkVar makes the test binary a process that parks an init for the root
// it names, prints the init's pid and waits to be killed: a daemon that
// dies with an init parked.
const parkVar = "NATIVE_TEST_PARK"

// parkAndWait is the test binary in parkVar's mode.
func parkAndWait(root string) {
	r := New()
	r.Warm(driver.Spec{Root: root, SandboxID: "x"})
	if r.parked == nil {
		os.Exit(1)
	}
	os.Stdout.WriteString(strconv.Itoa(r.parked.cmd.Process.Pid) + "\n")
	select {}
}

// warmed parks an init for spec on r and returns its pid, the pid of the
// next Start's workload.
func warmed(t *testing.T, r *Driver, spec driver.Spec) int {
	t.Helper()
	r.Warm(spec)
	require.NotNil(t, r.parked, "no init was parked")
	t.Cleanup(r.Cool) // if the test fails before it is used
	pid := r.parked.cmd.Process.Pid
	require.Eventually(t, func() bool {
		env, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/environ")
		return err == nil && strings.HasPrefix(string(env), ParkedEntry)
	}, hangGuard, time.Millisecond, "the init never showed it is parked")
	return pid
}

// endedPID reports whether pid has ended for good (see ended): gone, or a
// zombie whose threads have all exited and so closed its descriptors. A
// parked init whose parent died is reparented to an init that may reap it
// late.
func endedPID(pid int) bool {
	st, err := readStat(pid)
	if err != nil {
		return true
	}
	done, err := ended(driver.Handle{PID: pid, StartTime: st.StartTime})
	return err == nil && done
}

// Each start of these tests runs cold and under a parked init alike.
var starts = []string{"cold", "parked"}

// startAs starts spec on r as how says, checking that a parked start ran
// under the parked init.
func startAs(t *testing.T, r *Driver, spec driver.Spec, how string) driver.Handle {
	t.Helper()
	if how == "cold" {
		return start(t, r, spec)
	}
	requirePIDNamespaces(t, r)
	pid := warmed(t, r, spec)
	h := start(t, r, spec)
	require.Equal(t, pid, h.PID, "the workload did not run under the parked init")
	return h
}

// runAs runs spec on r as how says until it exits, requires that it
// exited 0, and returns its stdout.
func runAs(t *testing.T, r *Driver, spec driver.Spec, how string) string {
	t.Helper()
	h := startAs(t, r, spec, how)
	exit, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	out, stderr, err := r.Logs(testCtx(t), h, spec.Dir)
	require.NoError(t, err)
	require.Equal(t, "exited: code 0", exit.Reason, "stderr: %s", stderr)
	return string(out)
}

func TestParkable(t *testing.T) {
	requirePIDNamespaces(t, New())
	spec := newSpec(t, "", "true")
	tests := []struct {
		name string
		edit func(*driver.Spec)
		opts []Option
		want bool
	}{
		{"plain", func(*driver.Spec) {}, nil, true},
		{"bwrap isolation", func(s *driver.Spec) { s.Isolation = IsolationBwrap }, nil, false},
		{"bwrap by default", func(*driver.Spec) {}, []Option{WithIsolation(IsolationBwrap)}, false},
		{"binds", func(s *driver.Spec) { s.Binds = []driver.Bind{{Source: "/tmp", Target: "/data"}} }, nil, New().CanBind()},
		{"id longer than the room kept for it", func(s *driver.Spec) { s.SandboxID = strings.Repeat("a", maxParkedID+1) }, nil, false},
		{"process groups", func(*driver.Spec) {}, []Option{WithContainment(ContainProcessGroup)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec
			tt.edit(&s)
			assert.Equal(t, tt.want, New(tt.opts...).parkable(s))
		})
	}
}

// A parked init carries no mark, so no scan takes it for a workload; once
// handed one it shows the workload's marks and nothing else of its
// environment (values are secret), before the workload runs.
func TestParkedInitShowsOnlyTheMarks(t *testing.T) {
	r := New()
	requirePIDNamespaces(t, r)
	spec := newSpec(t, "", "sleep", "1000")
	spec.Env["SECRET"] = "s3cret-value"
	pid := warmed(t, r, spec)

	env, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	assert.Equal(t, []string{strings.TrimSuffix(ParkedEntry, "=")}, names(env))
	orphans, err := r.Orphans(testCtx(t), spec.Root, nil)
	require.NoError(t, err)
	assert.Empty(t, orphans, "a parked init is no workload")

	h := start(t, r, spec)
	env, err = os.ReadFile(procRoot + "/" + strconv.Itoa(h.PID) + "/environ")
	require.NoError(t, err)
	assert.Equal(t, []string{rootVar, idVar}, names(env))
	assert.True(t, hasVar(env, rootVar+"="+spec.Root) && hasVar(env, idVar+"="+spec.SandboxID), "%q", env)
	assert.NotContains(t, string(env), "s3cret-value")
	orphans, err = r.Orphans(testCtx(t), spec.Root, nil)
	require.NoError(t, err)
	assert.Equal(t, []driver.Handle{h}, orphans, "a crash now leaves the sweep its init to kill")
}

// names are the variable names of a NUL-separated environment, in order.
func names(environ []byte) []string {
	var out []string
	for e := range strings.SplitSeq(string(environ), "\x00") {
		if name, _, ok := strings.Cut(e, "="); ok {
			out = append(out, name)
		}
	}
	return out
}

// A parked init ends with the process that parked it, SIGKILL included:
// it holds nothing of a workload, and its control socket closes.
func TestParkedInitEndsWithItsParent(t *testing.T) {
	requirePIDNamespaces(t, New())
	exe, err := os.Executable()
	require.NoError(t, err)
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), parkVar+"="+t.TempDir())
	out, err := parent.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, parent.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the parent parked no init")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	assert.False(t, endedPID(pid), "the parked init waits")

	require.NoError(t, parent.Process.Signal(syscall.SIGKILL))
	_ = parent.Wait()
	assert.Eventually(t, func() bool { return endedPID(pid) }, hangGuard, 10*time.Millisecond,
		"the parked init outlived its parent")
}

// A parked init gone before its request (killed, or on a platform where it
// cannot park) costs a cold start, and turns parking off.
func TestColdStartWhenTheParkedInitIsGone(t *testing.T) {
	r := New()
	requirePIDNamespaces(t, r)
	spec := newSpec(t, "", "sleep", "1000")
	pid := warmed(t, r, spec)
	require.NoError(t, unix.Kill(pid, unix.SIGKILL))
	require.Eventually(t, func() bool { return endedPID(pid) }, hangGuard, 5*time.Millisecond)

	h := start(t, r, spec)
	assert.NotEqual(t, pid, h.PID)
	assert.True(t, status(t, r, h).Running)
	r.Warm(spec)
	assert.Nil(t, r.parked, "parking goes on after a parked init was gone before its request")
}

// An exec that fails under a parked init is the Start's error, as a cold
// one's is, and leaves nothing behind.
func TestStartFailureReported(t *testing.T) {
	for _, how := range starts {
		t.Run(how, func(t *testing.T) {
			r := New()
			requirePIDNamespaces(t, r)
			// Executable, so Start resolves it; its interpreter does not
			// exist, so the exec fails.
			bin := filepath.Join(t.TempDir(), "broken")
			require.NoError(t, os.WriteFile(bin, []byte("#!/sandplane/no/such/interpreter\n"), 0o700))
			spec := newSpec(t, "", bin)
			if how == "parked" {
				warmed(t, r, spec)
			}
			_, err := r.Start(testCtx(t), spec)
			assert.Equal(t, provider.CreateFailed, provider.Code(err), "%v", err)
			assert.Contains(t, err.Error(), "no such file")
			assert.Empty(t, marked(spec.SandboxID), "a failed start left its init behind")
			assert.Nil(t, r.parked, "the parked init was used")
		})
	}
}

func TestCoolEndsTheParkedInit(t *testing.T) {
	r := New()
	requirePIDNamespaces(t, r)
	spec := newSpec(t, "", "sleep", "1000")
	pid := warmed(t, r, spec)
	r.Cool()
	assert.Eventually(t, func() bool { return endedPID(pid) }, hangGuard, 5*time.Millisecond, "the parked init outlived Cool")
	r.Warm(spec)
	assert.Nil(t, r.parked, "Warm parked one after Cool")
	h := start(t, r, spec)
	assert.NotEqual(t, pid, h.PID, "a cold start after Cool")
}

// A root given as a relative path (--root state) means the same directory
// to a parked init as to a cold one, whose working directory it is.
func TestRelativeRoot(t *testing.T) {
	for _, how := range starts {
		t.Run(how, func(t *testing.T) {
			exe, err := os.Executable()
			require.NoError(t, err)
			base := t.TempDir()
			t.Chdir(base)
			require.NoError(t, os.MkdirAll(filepath.Join("state", "sb"), 0o700))
			spec := driver.Spec{SandboxID: "sb", Root: "state", Dir: filepath.Join("state", "sb"),
				Command: []string{exe}, Env: map[string]string{getwdVar: "1"}}
			r := New()
			assert.Equal(t, filepath.Join(base, "state", "sb")+"\n", runAs(t, r, spec, how))
		})
	}
}

// parkedWorkloadOf is the pid of the workload the parked init initPID
// started ahead, once it has started it.
func parkedWorkloadOf(t *testing.T, initPID int) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		pid = sessionMember(initPID, func(environ []byte) bool {
			return strings.HasPrefix(string(environ), nsinit.WorkloadVar+"=")
		})
		return pid != 0
	}, hangGuard, time.Millisecond, "the parked init started no workload")
	return pid
}

// sessionMember is the pid of a process of the session that leader leads
// (an init's, where its workload runs) whose environment ok accepts, or 0.
func sessionMember(leader int, ok func(environ []byte) bool) int {
	entries, _ := os.ReadDir(procRoot)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.Session != leader || pid == leader {
			continue
		}
		if environ, err := os.ReadFile(procRoot + "/" + e.Name() + "/environ"); err == nil && ok(environ) {
			return pid
		}
	}
	return 0
}

// reportSpec is a spec that runs this test binary in reportVar's mode with
// a secret in its environment, and a runtime (see nsDriver) that parks it
// as a workload.
func reportSpec(t *testing.T, userNS bool) (*Driver, driver.Spec) {
	exe, err := os.Executable()
	require.NoError(t, err)
	r := nsDriver(t, userNS)
	WithParkable(exe)(r)
	spec := newSpec(t, "", exe)
	spec.Env[reportVar] = "1"
	spec.Env["SECRET"] = "s3cret-value"
	return r, spec
}

// report is what reportAndWait printed for the workload behind h.
func report(t *testing.T, r *Driver, h driver.Handle, dir string) string {
	t.Helper()
	waitForLog(t, r, h, dir, "done\n")
	out, _, err := r.Logs(testCtx(t), h, dir)
	require.NoError(t, err)
	return string(out)
}

// A program started ahead as a parked workload holds nothing of a sandbox
// until it is handed one: no mark, so no scan takes it for a workload, and
// no value. Handed one, it runs as if started in it (environment,
// directory, output), and its own /proc environ shows the marks and
// nothing else: the values stay in its memory, where only the sandbox's
// processes' environments carry them on.
func TestParkedWorkload(t *testing.T) {
	for name, userNS := range map[string]bool{"pid": false, "pid+user": true} {
		t.Run(name, func(t *testing.T) { testParkedWorkload(t, userNS) })
	}
}

func testParkedWorkload(t *testing.T, userNS bool) {
	r, spec := reportSpec(t, userNS)
	initPID := warmed(t, r, spec)
	pid := parkedWorkloadOf(t, initPID)
	env, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	assert.Equal(t, []string{nsinit.WorkloadVar}, names(env))
	orphans, err := r.Orphans(testCtx(t), spec.Root, nil)
	require.NoError(t, err)
	assert.Empty(t, orphans, "a parked workload is no sandbox's")

	h := start(t, r, spec)
	require.Equal(t, initPID, h.PID, "the workload did not run under the parked init")
	out := report(t, r, h, spec.Dir)
	assert.Contains(t, out, "cwd="+spec.Dir+"\n")
	assert.Contains(t, out, "CapInh:\t0000000000000000\nCapAmb:\t0000000000000000\n", "the init's capability to mount /proc reached the workload")
	_, stderr, err := r.Logs(testCtx(t), h, spec.Dir)
	require.NoError(t, err)
	assert.Equal(t, "stderr too\n", string(stderr))
	assert.Contains(t, out, "env=SECRET=s3cret-value\n")
	assert.Contains(t, out, "env="+idVar+"="+spec.SandboxID+"\n")
	assert.NotContains(t, out, nsinit.WorkloadVar)

	env, err = os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err, "the parked workload is not the one that ran")
	assert.Equal(t, []string{rootVar, idVar}, names(env))
	assert.NotContains(t, string(env), "s3cret-value")
}

// A Start of another command, or one whose parked workload is gone or does
// not take its hand-off, runs its own, as a cold start would; the one
// parked ends.
func TestParkedWorkloadNotTaken(t *testing.T) {
	for name, edit := range map[string]func(t *testing.T, spec *driver.Spec, parked int){
		"other arguments": func(t *testing.T, spec *driver.Spec, _ int) {
			spec.Command = append(spec.Command, "-test.run=^$")
		},
		"a Go runtime setting, which it read before it was handed its environment": func(t *testing.T, spec *driver.Spec, _ int) {
			spec.Env["GOMAXPROCS"] = "1"
		},
		"workload killed": func(t *testing.T, _ *driver.Spec, parked int) {
			require.NoError(t, unix.Kill(parked, unix.SIGKILL))
			require.Eventually(t, func() bool { return endedPID(parked) }, hangGuard, time.Millisecond)
		},
		// It costs its start handOffTimeout, not the start.
		"workload not answering": func(t *testing.T, _ *driver.Spec, parked int) {
			require.NoError(t, unix.Kill(parked, unix.SIGSTOP))
		},
	} {
		t.Run(name, func(t *testing.T) {
			r, spec := reportSpec(t, false)
			initPID := warmed(t, r, spec)
			pid := parkedWorkloadOf(t, initPID)
			edit(t, &spec, pid)
			h := start(t, r, spec)
			require.Equal(t, initPID, h.PID, "the parked init was not used")
			assert.Contains(t, report(t, r, h, spec.Dir), "env=SECRET=s3cret-value\n")
			assert.Eventually(t, func() bool { return endedPID(pid) }, hangGuard, time.Millisecond,
				"the workload parked for another start outlived it")
		})
	}
}

// A parked workload that reads its hand-off and dies before it
// acknowledges it runs nothing of the sandbox's: the init starts the
// command anew, as a cold start would.
func TestParkedWorkloadDyingInItsHandOff(t *testing.T) {
	r := nsDriver(t, false)
	script := filepath.Join(t.TempDir(), "workload")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
if [ -n "$`+nsinit.WorkloadVar+`" ]; then
	head -c 1 <&3 >/dev/null
	exit 3
fi
echo "started anew with $SECRET"
sleep 1000
`), 0o755))
	WithParkable(script)(r)
	spec := newSpec(t, "", script)
	spec.Env["SECRET"] = "s3cret-value"
	initPID := warmed(t, r, spec)
	pid := parkedWorkloadOf(t, initPID)
	h := start(t, r, spec)
	require.Equal(t, initPID, h.PID, "the parked init was not used")
	waitForLog(t, r, h, spec.Dir, "started anew with s3cret-value\n")
	assert.True(t, endedPID(pid), "the parked workload outlived its failed hand-off")
}

// An init that never reports fails its Start after startTimeout, killed,
// rather than holding it for good: a create's context has no deadline.
func TestStartOfAnInitThatNeverReports(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	r := New(WithClock(clk))
	requirePIDNamespaces(t, r)
	spec := newSpec(t, "", "true")
	spec.Env[hangInitVar] = "1"
	t.Cleanup(func() { // should the Start not end it
		for _, pid := range marked(spec.SandboxID) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
	errc := make(chan error, 1)
	go func() {
		_, err := r.Start(context.WithoutCancel(testCtx(t)), spec)
		errc <- err
	}()
	require.NoError(t, clk.BlockUntilWaiters(testCtx(t), 1))
	clk.Advance(startTimeout)
	select {
	case err := <-errc:
		assert.Equal(t, provider.CreateFailed, provider.Code(err), "%v", err)
		assert.Contains(t, err.Error(), "did not start the command within 30s")
	case <-testCtx(t).Done():
		t.Fatal("the Start outlived its timeout")
	}
	assert.Empty(t, marked(spec.SandboxID), "the stuck init outlived its Start")
}

// Cool ends a parked workload with its init.
func TestCoolEndsTheParkedWorkload(t *testing.T) {
	r, spec := reportSpec(t, false)
	pid := parkedWorkloadOf(t, warmed(t, r, spec))
	r.Cool()
	assert.Eventually(t, func() bool { return endedPID(pid) }, hangGuard, time.Millisecond, "the parked workload outlived Cool")
}
