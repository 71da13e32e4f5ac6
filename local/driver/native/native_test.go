package native

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// containments are the modes every test of a stop runs in.
var containments = []string{ContainPIDNamespace, ContainProcessGroup}

// hangGuard bounds every wait in these tests so that a bug hangs nothing.
const hangGuard = 20 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// newSpec returns a spec with a fresh root and sandbox directory.
func newSpec(t *testing.T, root string, command ...string) driver.Spec {
	t.Helper()
	if root == "" {
		root = t.TempDir()
	}
	dir, err := os.MkdirTemp(root, "sb-")
	require.NoError(t, err)
	return driver.Spec{
		SandboxID: filepath.Base(dir),
		Root:      root,
		Dir:       dir,
		Command:   command,
		Env:       map[string]string{"PATH": os.Getenv("PATH")},
	}
}

// start spawns spec on r and makes sure the test leaves nothing running.
func start(t *testing.T, r *Driver, spec driver.Spec) driver.Handle {
	t.Helper()
	h, err := r.Start(testCtx(t), spec)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = unix.Kill(-h.PID, unix.SIGKILL)
		_, err := r.Wait(testCtx(t), h)
		assert.NoError(t, err, "workload %d did not end after SIGKILL", h.PID)
	})
	return h
}

// waitForLog waits until the workload's stdout holds want.
func waitForLog(t *testing.T, r *Driver, h driver.Handle, dir, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		out, _, err := r.Logs(context.Background(), h, dir)
		return err == nil && strings.Contains(string(out), want)
	}, hangGuard, 10*time.Millisecond, "stdout never showed %q", want)
}

func status(t *testing.T, r *Driver, h driver.Handle) driver.Status {
	t.Helper()
	st, err := r.Status(testCtx(t), h)
	require.NoError(t, err)
	return st
}

func TestName(t *testing.T) {
	assert.Equal(t, provider.RuntimeNative, New().Name())
}

func TestLifecycle(t *testing.T) {
	r := New()
	spec := newSpec(t, "", "sh", "-c", `echo to-stdout; echo to-stderr >&2; exec sleep 30`)
	h := start(t, r, spec)

	assert.Equal(t, provider.RuntimeNative, h.Runtime)
	assert.Positive(t, h.PID)
	assert.NotZero(t, h.StartTime)
	assert.True(t, status(t, r, h).Running)

	require.Eventually(t, func() bool {
		out, errb, err := r.Logs(context.Background(), h, spec.Dir)
		return err == nil && string(out) == "to-stdout\n" && string(errb) == "to-stderr\n"
	}, hangGuard, 10*time.Millisecond)
	for _, name := range []string{stdoutLog, stderrLog} {
		fi, err := os.Stat(filepath.Join(spec.Dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}

	require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
	exit, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	assert.Equal(t, "killed: signal SIGTERM", exit.Reason)
	assert.Nil(t, exit.Code)

	st := status(t, r, h)
	assert.False(t, st.Running)
	assert.Equal(t, exit, st.Exit)
	require.NoError(t, r.Stop(testCtx(t), h, time.Second), "stopping a stopped workload")
	require.NoError(t, r.Remove(testCtx(t), h))
	require.NoError(t, r.Remove(testCtx(t), h), "Remove is idempotent")
}

// ignoreTerm ignores SIGTERM (sleep inherits that) and says so once it does,
// so that the test does not race the trap.
const ignoreTerm = `trap "" TERM; echo ready; sleep 30`

func TestStopKillsWhatIgnoresTerm(t *testing.T) {
	r := New()
	spec := newSpec(t, "", "sh", "-c", ignoreTerm)
	h := start(t, r, spec)
	waitForLog(t, r, h, spec.Dir, "ready")

	require.NoError(t, r.Stop(testCtx(t), h, 200*time.Millisecond))
	exit, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	assert.Equal(t, "killed: signal SIGKILL", exit.Reason)
}

func TestStopGraceRunsOnTheInjectedClock(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	r := New(WithClock(clk))
	spec := newSpec(t, "", "sh", "-c", ignoreTerm)
	h := start(t, r, spec)
	waitForLog(t, r, h, spec.Dir, "ready")

	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(testCtx(t), h, time.Hour) }()
	require.NoError(t, clk.BlockUntilWaiters(testCtx(t), 1), "Stop never armed its grace timer")
	assert.True(t, status(t, r, h).Running, "killed before the grace period ran out")

	clk.Advance(time.Hour)
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-testCtx(t).Done():
		t.Fatal("Stop did not return after the grace period")
	}
	exit, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	assert.Equal(t, "killed: signal SIGKILL", exit.Reason)
}

func TestStopSweepsTheGroup(t *testing.T) {
	for _, mode := range containments {
		t.Run(mode, func(t *testing.T) {
			r := New(WithContainment(mode))
			// The leader ends on SIGTERM at once; its child ignores it.
			spec := newSpec(t, "", "sh", "-c",
				`(trap "" TERM; exec sh -c 'echo "child $$"; echo ready; exec sleep 30') & wait`)
			h := start(t, r, spec)
			waitForLog(t, r, h, spec.Dir, "ready")
			out, _, err := r.Logs(testCtx(t), h, spec.Dir)
			require.NoError(t, err)
			var childPID int
			for line := range strings.Lines(string(out)) {
				if pid, ok := strings.CutPrefix(strings.TrimSpace(line), "child "); ok {
					childPID, err = strconv.Atoi(pid)
					require.NoError(t, err)
				}
			}
			// $$ is the child's pid in the workload's namespace.
			childPID = hostPID(t, spec.SandboxID, childPID)
			require.Positive(t, childPID)
			childStat, err := readStat(childPID)
			require.NoError(t, err)
			child := driver.Handle{Runtime: provider.RuntimeNative, PID: childPID, StartTime: childStat.StartTime}
			require.True(t, status(t, r, child).Running)

			require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
			require.Eventually(t, func() bool { return !status(t, r, child).Running }, hangGuard, 10*time.Millisecond,
				"a group member that ignored SIGTERM survived Stop")
		})
	}
}

func TestExitReasons(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		name   string
		script string
		want   driver.Exit
	}{
		{"success", "exit 0", driver.Exit{Reason: "exited: code 0", Code: code(0)}},
		{"failure", "exit 3", driver.Exit{Reason: "exited: code 3", Code: code(3)}},
		{"self kill", "kill -KILL $$", driver.Exit{Reason: "killed: signal SIGKILL"}},
		{"self term", "kill -TERM $$", driver.Exit{Reason: "killed: signal SIGTERM"}},
	}
	// "parked": in a PID namespace, under an init parked ahead.
	for _, mode := range append(containments, "parked") {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				var opts []Option
				how := "parked"
				if mode != how {
					opts, how = []Option{WithContainment(mode)}, "cold"
				}
				r := New(opts...)
				h := startAs(t, r, newSpec(t, "", "sh", "-c", tt.script), how)
				exit, err := r.Wait(testCtx(t), h)
				require.NoError(t, err)
				assert.Equal(t, tt.want, exit)
				st := status(t, r, h)
				assert.False(t, st.Running)
				assert.Equal(t, tt.want, st.Exit)
			})
		}
	}
}

func TestKilledFromOutside(t *testing.T) {
	r := New()
	h := start(t, r, newSpec(t, "", "sleep", "30"))
	require.True(t, status(t, r, h).Running)

	require.NoError(t, unix.Kill(h.PID, unix.SIGKILL))
	exit, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	assert.Equal(t, "killed: signal SIGKILL", exit.Reason)
	assert.False(t, status(t, r, h).Running)
}

func TestAdoptedHandle(t *testing.T) {
	spawner := New()
	h := start(t, spawner, newSpec(t, "", "sleep", "30"))

	// A second value stands for the daemon after a restart: it did not
	// spawn h and cannot reap it. Its clock never moves, so only the pidfd
	// can tell it the process ended.
	r := New(WithClock(clocktest.NewFake(time.Time{})))
	assert.True(t, status(t, r, h).Running)

	waited := make(chan driver.Exit, 1)
	go func() {
		exit, err := r.Wait(testCtx(t), h)
		assert.NoError(t, err)
		waited <- exit
	}()
	require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
	select {
	case exit := <-waited:
		assert.Equal(t, "process gone", exit.Reason)
	case <-testCtx(t).Done():
		t.Fatal("Wait on an adopted handle did not return after Stop")
	}
	st := status(t, r, h)
	assert.False(t, st.Running)
	assert.Equal(t, "process gone", st.Exit.Reason)

	exit, err := spawner.Wait(testCtx(t), h)
	require.NoError(t, err)
	assert.Equal(t, "killed: signal SIGTERM", exit.Reason, "the spawner still knows the real exit")
}

func TestWaitReadableWakesOnExitAndOnCancel(t *testing.T) {
	r := New()
	h := start(t, r, newSpec(t, "", "sleep", "30"))
	open := func() int {
		fd, err := unix.PidfdOpen(h.PID, 0)
		require.NoError(t, err)
		return fd
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, waitReadable(ctx, open()), context.Canceled)

	// Opened before the kill: once the reaper has collected the child, its
	// pid no longer opens.
	fd := open()
	woke := make(chan error, 1)
	go func() { woke <- waitReadable(testCtx(t), fd) }()
	require.NoError(t, unix.Kill(h.PID, unix.SIGKILL))
	select {
	case err := <-woke:
		assert.NoError(t, err)
	case <-testCtx(t).Done():
		t.Fatal("the pidfd never became readable")
	}
}

func TestWaitHonoursContext(t *testing.T) {
	spawner := New()
	h := start(t, spawner, newSpec(t, "", "sleep", "30"))
	for name, r := range map[string]*Driver{"own child": spawner, "adopted": New()} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			waited := make(chan error, 1)
			go func() {
				_, err := r.Wait(ctx, h)
				waited <- err
			}()
			cancel()
			select {
			case err := <-waited:
				assert.ErrorIs(t, err, context.Canceled)
			case <-testCtx(t).Done():
				t.Fatal("Wait ignored its context")
			}
		})
	}
	assert.True(t, status(t, spawner, h).Running)
}

func TestReusedPidIsNeverSignalled(t *testing.T) {
	spawner := New()
	h := start(t, spawner, newSpec(t, "", "sleep", "30"))
	// Same pid, another start time: what a handle looks like once its
	// process has ended and the pid went to someone else.
	stale := h
	stale.StartTime++

	for name, r := range map[string]*Driver{"spawner": spawner, "adopter": New()} {
		t.Run(name, func(t *testing.T) {
			st := status(t, r, stale)
			assert.False(t, st.Running)
			assert.Equal(t, "process gone", st.Exit.Reason)

			require.NoError(t, r.Stop(testCtx(t), stale, 0))
			exit, err := r.Wait(testCtx(t), stale)
			require.NoError(t, err)
			assert.Equal(t, "process gone", exit.Reason)
		})
	}
	assert.True(t, status(t, spawner, h).Running, "Stop signalled a pid whose start time did not match")
}

func TestZeroHandleIsNotRunning(t *testing.T) {
	r := New()
	st := status(t, r, driver.Handle{})
	assert.False(t, st.Running)
	require.NoError(t, r.Stop(testCtx(t), driver.Handle{}, 0))
	exit, err := r.Wait(testCtx(t), driver.Handle{})
	require.NoError(t, err)
	assert.Equal(t, "process gone", exit.Reason)
}

func TestDetached(t *testing.T) {
	r := New()
	ctx, cancel := context.WithCancel(context.Background())
	h, err := r.Start(ctx, newSpec(t, "", "sleep", "30"))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = unix.Kill(-h.PID, unix.SIGKILL)
		_, _ = r.Wait(testCtx(t), h)
	})
	cancel()

	// Its own session and group: a SIGINT to the daemon's terminal or
	// group never reaches it.
	st, err := readStat(h.PID)
	require.NoError(t, err)
	assert.Equal(t, h.PID, st.Session)
	assert.Equal(t, h.PID, st.PGrp)
	assert.NotEqual(t, unix.Getpgrp(), st.PGrp)

	// A correct driver never kills it: the pause only gives a wrong one,
	// which bound the child to the cancelled context, time to, so a slow
	// machine can hide a bug but never fail this test.
	time.Sleep(100 * time.Millisecond) // a chance for a wrong driver only; cannot fail a right one
	assert.True(t, status(t, r, h).Running, "the workload died with the context that started it")
}

func TestOrphans(t *testing.T) {
	r := New()
	root := t.TempDir()
	// A shell with a child of its own: only the session leader counts.
	orphanSpec := newSpec(t, root, "sh", "-c", "sleep 30 & echo started; wait")
	orphanDir := orphanSpec.Dir
	orphan := start(t, r, orphanSpec)
	known := start(t, r, newSpec(t, root, "sleep", "30"))
	other := start(t, r, newSpec(t, t.TempDir(), "sleep", "30"))
	// A root that merely starts with ours is another root.
	prefix := root + "x"
	require.NoError(t, os.Mkdir(prefix, 0o700))
	t.Cleanup(func() { os.RemoveAll(prefix) })
	prefixed := start(t, r, newSpec(t, prefix, "sleep", "30"))
	waitForLog(t, r, orphan, orphanDir, "started")

	got, err := r.Orphans(testCtx(t), root, []driver.Handle{known})
	require.NoError(t, err)
	assert.Equal(t, []driver.Handle{orphan}, got)
	assert.NotContains(t, got, other)
	assert.NotContains(t, got, prefixed)

	// A known entry with the right pid but another start time is not ours.
	stale := known
	stale.StartTime++
	got, err = r.Orphans(testCtx(t), root, []driver.Handle{stale, orphan})
	require.NoError(t, err)
	assert.Equal(t, []driver.Handle{known}, got)
}

func TestPreflight(t *testing.T) {
	bin := t.TempDir()
	tool := filepath.Join(bin, "only-here")
	require.NoError(t, os.WriteFile(tool, []byte("#!/bin/sh\necho hi\n"), 0o700))
	notExec := filepath.Join(bin, "not-exec")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600))

	tests := []struct {
		name    string
		edit    func(*driver.Spec)
		want    provider.ErrorCode
		mention string
	}{
		{"resolvable", func(s *driver.Spec) {}, "", ""},
		{"missing command", func(s *driver.Spec) { s.Command = []string{"sandplane-no-such-command"} },
			provider.PreflightFailed, `"sandplane-no-such-command" not found on PATH`},
		{"no command", func(s *driver.Spec) { s.Command = nil }, provider.PreflightFailed, "no command"},
		{"found on the spec's PATH", func(s *driver.Spec) {
			s.Command = []string{"only-here"}
			s.Env["PATH"] = bin
		}, "", ""},
		{"not on the spec's PATH even if on the daemon's", func(s *driver.Spec) { s.Env["PATH"] = bin },
			provider.PreflightFailed, `"sh" not found on PATH`},
		{"daemon's PATH when the spec has none", func(s *driver.Spec) { delete(s.Env, "PATH") }, "", ""},
		{"absolute path", func(s *driver.Spec) { s.Command = []string{tool} }, "", ""},
		{"missing absolute path", func(s *driver.Spec) { s.Command = []string{filepath.Join(bin, "nope")} },
			provider.PreflightFailed, "not found"},
		{"not executable", func(s *driver.Spec) { s.Command = []string{notExec} },
			provider.PreflightFailed, "permission denied"},
		{"missing dir", func(s *driver.Spec) { s.Dir = filepath.Join(s.Dir, "nope") },
			provider.PreflightFailed, "sandbox directory"},
		{"missing workdir", func(s *driver.Spec) { s.WorkDir = "nope" },
			provider.PreflightFailed, "working directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := newSpec(t, "", "sh", "-c", "true")
			tt.edit(&spec)
			err := New().Preflight(testCtx(t), spec)
			assert.Equal(t, tt.want, provider.Code(err), "%v", err)
			if tt.mention != "" {
				assert.ErrorContains(t, err, tt.mention)
			}
		})
	}
}

func TestStartFailsCleanly(t *testing.T) {
	r := New()
	spec := newSpec(t, "", "sandplane-no-such-command")
	_, err := r.Start(testCtx(t), spec)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "%v", err)
	entries, err := os.ReadDir(spec.Dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a failed Start left files behind")

	spec = newSpec(t, "", "true")
	spec.Env["BAD=NAME"] = "x"
	_, err = r.Start(testCtx(t), spec)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
}

func TestEnvironmentIsExactlyTheSpecs(t *testing.T) {
	large := map[string]string{}
	var largeWant []string
	for i := range 300 {
		k, v := fmt.Sprintf("LARGE_%03d", i), strings.Repeat(string(rune('a'+i%26)), 1000)
		large[k] = v
		largeWant = append(largeWant, k+"="+v)
	}
	tests := []struct {
		name string
		env  map[string]string
		want []string // without the markers
	}{
		{"given", map[string]string{"PATH": os.Getenv("PATH"), "FOO": "bar baz", "EMPTY": "", "PORT": "4321"},
			[]string{"EMPTY=", "FOO=bar baz", "PATH=" + os.Getenv("PATH"), "PORT=4321"}},
		{"empty: nothing inherited from the daemon", map[string]string{}, nil},
		{"markers cannot be forged", map[string]string{rootVar: "/elsewhere", idVar: "someone"}, nil},
		{"large: more than one read or write of a parked init's socket", large, largeWant},
	}
	for _, how := range starts {
		for _, tt := range tests {
			t.Run(how+"/"+tt.name, func(t *testing.T) {
				r := New()
				spec := newSpec(t, "", "env")
				spec.Env = tt.env
				out := runAs(t, r, spec, how)
				got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				want := append(slices.Clone(tt.want), rootVar+"="+spec.Root, idVar+"="+spec.SandboxID)
				assert.ElementsMatch(t, want, got)
			})
		}
	}
}

func TestWorkingDirectory(t *testing.T) {
	abs := t.TempDir()
	tests := []struct {
		name    string
		workDir string
		want    func(spec driver.Spec) string
	}{
		{"sandbox dir by default", "", func(s driver.Spec) string { return s.Dir }},
		{"absolute", abs, func(driver.Spec) string { return abs }},
		{"relative to the sandbox dir", "sub", func(s driver.Spec) string { return filepath.Join(s.Dir, "sub") }},
	}
	for _, how := range starts {
		for _, tt := range tests {
			t.Run(how+"/"+tt.name, func(t *testing.T) {
				r := New()
				exe, err := os.Executable()
				require.NoError(t, err)
				spec := newSpec(t, "", exe)
				spec.Env[getwdVar] = "1"
				require.NoError(t, os.Mkdir(filepath.Join(spec.Dir, "sub"), 0o700))
				spec.WorkDir = tt.workDir
				assert.Equal(t, tt.want(spec)+"\n", runAs(t, r, spec, how))
			})
		}
	}
}

func TestLogsAccumulateAcrossStarts(t *testing.T) {
	r := New()
	spec := newSpec(t, "", "sh", "-c", "echo run")
	var h driver.Handle
	for range 2 {
		h = start(t, r, spec)
		_, err := r.Wait(testCtx(t), h)
		require.NoError(t, err)
	}
	out, errb, err := r.Logs(testCtx(t), h, spec.Dir)
	require.NoError(t, err)
	assert.Equal(t, "run\nrun\n", string(out))
	assert.Empty(t, errb)
}

func TestLogsAreCappedAndMissingIsEmpty(t *testing.T) {
	dir := t.TempDir()
	big := append(bytes.Repeat([]byte("a"), maxLogBytes), []byte("tail")...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, stderrLog), big, 0o600))

	out, errb, err := New().Logs(testCtx(t), driver.Handle{}, dir)
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Len(t, errb, maxLogBytes)
	assert.True(t, bytes.HasSuffix(errb, []byte("aatail")), "kept the oldest bytes, not the newest")

	_, _, err = New().Logs(testCtx(t), driver.Handle{}, "")
	assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
}

func BenchmarkSpawn(b *testing.B) {
	r := New()
	root := b.TempDir()
	spec := driver.Spec{SandboxID: "bench", Root: root, Dir: root, Command: []string{"true"},
		Env: map[string]string{"PATH": os.Getenv("PATH")}}
	ctx := context.Background()
	for b.Loop() {
		h, err := r.Start(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := r.Wait(ctx, h); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// threads is how many OS threads this process runs.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// Workloads this runtime spawned are waited for in the poller: a hundred
// running children add no OS thread each, and an exit is still reported
// exactly (the exit tests above check the codes and signals).
func TestChildrenHoldNoThreadEach(t *testing.T) {
	if !pidfdsWork() {
		t.Skip("this kernel makes no pidfds: children are waited for on a thread each")
	}
	const n = 100
	for _, mode := range containments {
		t.Run(mode, func(t *testing.T) {
			r := New(WithContainment(mode))
			if mode == ContainPIDNamespace && r.Containment() != mode {
				t.Skipf("no PID namespaces here: %v", r.ContainmentFallback())
			}
			root := t.TempDir()
			// One first, so that what the runtime sets up once is counted
			// in the baseline.
			first := start(t, r, newSpec(t, root, "sleep", "1000"))
			before := threads(t)
			for range n {
				start(t, r, newSpec(t, root, "sleep", "1000"))
			}
			after := threads(t)
			assert.LessOrEqual(t, after-before, n/10, "%d children took %d threads (%d before)", n, after-before, before)

			require.NoError(t, r.Stop(testCtx(t), first, 0))
			exit, err := r.Wait(testCtx(t), first)
			require.NoError(t, err)
			assert.Contains(t, []string{"killed: signal SIGTERM", "killed: signal SIGKILL"}, exit.Reason)
		})
	}
}
