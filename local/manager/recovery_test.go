package manager

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/drivertest"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// termIgnored is a runtime whose workloads ignore SIGTERM: every Stop waits
// its whole grace on the clock, then kills.
type termIgnored struct {
	*drivertest.Fake
	clk clock.Clock

	waiting, most atomic.Int32
}

func (r *termIgnored) Stop(ctx context.Context, h driver.Handle, grace time.Duration) error {
	if st, _ := r.Status(ctx, h); !st.Running {
		return nil
	}
	n := r.waiting.Add(1)
	for {
		m := r.most.Load()
		if n <= m || r.most.CompareAndSwap(m, n) {
			break
		}
	}
	defer r.waiting.Add(-1)
	if err := clock.Sleep(ctx, r.clk, grace); err != nil {
		return err
	}
	return r.Fake.Stop(ctx, h, grace)
}

// rewrite changes the record of id on disk, as a crash mid-operation leaves it.
func rewrite(t *testing.T, root, id string, fn func(r *record)) {
	t.Helper()
	r := readRecord(t, root, id)
	fn(&r)
	writeRecord(t, root, r)
}

// A restart must answer at once, however long the stops it has to finish
// take: eight workloads that ignore SIGTERM, each needing a whole grace,
// must not hold a single read. The stops run in the background, a few at a
// time, their sandboxes visibly stopping, and an operation on one of them
// is refused at once rather than queued behind the stop.
func TestRestartAnswersWhileInterruptedStopsFinish(t *testing.T) {
	h := newHarness(t)
	rt := &termIgnored{Fake: h.rt, clk: h.clk}
	h.opts.Runtimes[provider.RuntimeNative] = rt
	h.restart()
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = "stubborn-" + strconv.Itoa(i)
		h.create(provider.CreateRequest{ID: ids[i]})
	}
	h.m.Close()
	for i, id := range ids {
		rewrite(t, h.root, id, func(r *record) {
			r.State, r.StopReason = provider.StateStopping, provider.ErrorReasonAutoStopped
			if i%2 == 1 {
				r.StopReason = reasonDeleted
			}
		})
	}

	h.m = nil
	h.restartAnswering()
	// The clock has not moved, so no stop can have finished: everything
	// below is answered while all eight are provably still in progress.
	h.eventually(func() bool { return rt.waiting.Load() == recoveryWorkers }, "the first stops are under way")
	list := h.m.List(context.Background(), Filter{})
	require.Len(t, list, len(ids))
	for _, s := range list {
		assert.Equal(t, provider.StateStopping, s.State, s.ID)
	}
	_, err := h.m.Start(context.Background(), ids[0])
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), "sandbox "+ids[0]+" is still stopping after the daemon restart; retry in a few seconds")
	err = h.m.Delete(context.Background(), ids[2])
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
	assert.Equal(t, provider.FailedPrecondition, provider.Code(h.m.RefreshActivity(context.Background(), ids[1])))
	s, err := h.m.Create(context.Background(), provider.CreateRequest{ID: "newcomer"})
	require.NoError(t, err, "creates do not wait for the recovery either")
	assert.Equal(t, provider.StateStarted, s.State)
	assert.Equal(t, len(ids)+1, rt.Running())

	h.finishRecovery()
	assert.LessOrEqual(t, rt.most.Load(), int32(recoveryWorkers), "the stops run a few at a time")
	for i, id := range ids {
		s, err := h.m.Get(context.Background(), id)
		if i%2 == 1 {
			assert.True(t, provider.IsNotFound(err), "%s: the interrupted delete is finished: %v", id, err)
			assert.NoDirExists(t, filepath.Join(h.root, id))
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, provider.StateStopped, s.State, id)
		assert.Equal(t, provider.ErrorReasonAutoStopped, s.ErrorReason, id)
	}
	assert.Equal(t, 1, rt.Running(), "only the newcomer runs")
	_, err = h.m.Start(context.Background(), ids[0])
	require.NoError(t, err, "once stopped, the sandbox starts again")
}

// finishRecovery moves the clock on until the restart's work is done.
func (h *harness) finishRecovery() {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-h.m.Recovered():
			return
		case <-deadline:
			h.t.Fatal("the restart's recovery did not finish")
		case <-time.After(time.Millisecond):
			h.clk.Advance(h.opts.StopGrace)
		}
	}
}

// Close during a recovery waits for the stops under way and drops the rest,
// which stay stopping on disk for the next daemon to finish.
func TestCloseDuringRecovery(t *testing.T) {
	h := newHarness(t)
	rt := &termIgnored{Fake: h.rt, clk: h.clk}
	h.opts.Runtimes[provider.RuntimeNative] = rt
	h.restart()
	ids := make([]string, 2*recoveryWorkers)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
		h.create(provider.CreateRequest{ID: ids[i]})
	}
	h.m.Close()
	for _, id := range ids {
		rewrite(t, h.root, id, func(r *record) { r.State, r.StopReason = provider.StateStopping, "" })
	}
	h.m = nil
	h.restartAnswering()
	h.eventually(func() bool { return rt.waiting.Load() == recoveryWorkers }, "the first stops are under way")
	closed := make(chan struct{})
	go func() { h.m.Close(); close(closed) }()
	h.eventually(func() bool { return h.m.ctx.Err() != nil }, "Close began")
	h.clk.Advance(h.opts.StopGrace)
	<-closed
	stopped := 0
	for _, id := range ids {
		switch r := readRecord(t, h.root, id); r.State {
		case provider.StateStopped:
			stopped++
		default:
			assert.Equal(t, provider.StateStopping, r.State, id)
		}
	}
	assert.Equal(t, recoveryWorkers, stopped, "the stops under way finished, the others were left for the next daemon")

	h.restartAnswering()
	h.finishRecovery()
	for _, id := range ids {
		assert.Equal(t, provider.StateStopped, h.get(id).State, id)
	}
	assert.Zero(t, rt.Running())
}

// A transition whose record cannot be written does not happen: the sandbox
// stays as it was, in memory as on disk, and the error says so.
func TestFailedWriteChangesNothing(t *testing.T) {
	var mu sync.Mutex
	var events []provider.EventType
	h := newHarness(t, func(o *Options) {
		o.OnEvent = func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e.Type)
		}
	})
	ctx := context.Background()
	before := h.create(provider.CreateRequest{ID: "vanished", AutoStopInterval: ptr(7)})
	mu.Lock()
	events = nil
	mu.Unlock()
	require.NoError(t, os.RemoveAll(filepath.Join(h.root, "vanished")), "removed behind the daemon's back")
	h.clk.Advance(time.Second)

	_, err := h.m.Stop(ctx, "vanished")
	require.Error(t, err)
	assert.Equal(t, provider.Internal, provider.Code(err))
	assert.Contains(t, provider.Message(err), "not stopped and is unchanged")
	_, err = h.m.SetAutoStopInterval(ctx, "vanished", 3)
	require.Error(t, err)

	assert.Equal(t, before, h.get("vanished"), "state, interval and activity as before")
	assert.Equal(t, 1, h.rt.Running(), "the workload was not touched")
	mu.Lock()
	assert.Empty(t, events, "nothing announced that did not happen")
	mu.Unlock()

	// Activity is not a transition: a refresh is taken in memory, and a
	// flush that cannot write keeps it for the next one.
	require.NoError(t, h.m.RefreshActivity(ctx, "vanished"))
	refreshed := h.clk.Now()
	h.clk.Advance(h.m.flush.every)
	got := h.get("vanished")
	assert.Equal(t, refreshed, got.LastActivityAt)
	assert.Equal(t, provider.StateStarted, got.State)
	assert.Equal(t, 7, got.AutoStopInterval)
	require.NoError(t, os.Mkdir(filepath.Join(h.root, "vanished"), 0o700))
	h.eventually(func() bool {
		h.clk.Advance(h.m.flush.every)
		r, err := loadRecord(filepath.Join(h.root, "vanished", recordFile), "vanished")
		return err == nil && r.LastActivityAt.Equal(refreshed) && r.State == provider.StateStarted
	}, "the pending activity is written once the directory is back")

	// The watch was not given up on: an exit is still noticed.
	h.rt.Kill(h.handle("vanished"), "exited: code 3")
	h.eventually(func() bool { return h.get("vanished").State == provider.StateStopped }, "exit noticed")
}

// A record the daemon cannot read belongs to a sandbox whose workload may
// still run: it is shown in state error, naming the file and the problem,
// its workload is left alone, and only delete acts on it, ending the
// workload and moving the directory aside.
func TestUnreadableRecordKeepsItsWorkloadUntilDeleted(t *testing.T) {
	tests := []struct {
		name   string
		spoil  func(t *testing.T, path string)
		reason string
	}{
		{"torn", func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, []byte(`{"id": "ke`), 0o644)) }, "parse"},
		{"from a newer daemon", func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var r map[string]any
			require.NoError(t, json.Unmarshal(data, &r))
			r["version"] = recordVersion + 1
			data, err = json.Marshal(r)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data, 0o644))
		}, "upgrade sandplane"},
		{"not a file", func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Mkdir(path, 0o700))
		}, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			h.create(provider.CreateRequest{ID: "kept"})
			h.create(provider.CreateRequest{ID: "fine"})
			h.m.Close()
			path := filepath.Join(h.root, "kept", recordFile)
			tt.spoil(t, path)
			h.rt.Spawn(driver.Spec{SandboxID: "lost", Root: h.root}) // a real orphan

			h.m = nil
			h.restart()
			s := h.get("kept")
			assert.Equal(t, provider.StateError, s.State)
			assert.Contains(t, s.ErrorReason, path)
			assert.Contains(t, s.ErrorReason, tt.reason)
			assert.Equal(t, 2, h.rt.Running(), "its workload and fine's run; only the orphan was killed")
			assert.Len(t, h.m.List(ctx, Filter{}), 2)

			for name, call := range map[string]func() error{
				"start":   func() error { _, err := h.m.Start(ctx, "kept"); return err },
				"stop":    func() error { _, err := h.m.Stop(ctx, "kept"); return err },
				"refresh": func() error { return h.m.RefreshActivity(ctx, "kept") },
				"logs":    func() error { _, err := h.m.EntrypointLogs(ctx, "kept"); return err },
			} {
				err := call()
				assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%s: %v", name, err)
			}
			_, err := h.m.Create(ctx, provider.CreateRequest{ID: "kept"})
			assert.Equal(t, provider.AlreadyExists, provider.Code(err), "the id stays taken")

			require.NoError(t, h.m.Delete(ctx, "kept"))
			assert.Equal(t, 1, h.rt.Running(), "the delete ended its workload, and only it")
			_, err = h.m.Get(ctx, "kept")
			assert.True(t, provider.IsNotFound(err))
			assert.NoDirExists(t, filepath.Join(h.root, "kept"))
			moved, err := os.ReadDir(filepath.Join(h.root, corruptDir))
			require.NoError(t, err)
			assert.Len(t, moved, 1, "the directory is kept aside, not deleted")
			h.create(provider.CreateRequest{ID: "kept"})
		})
	}
}

// unmarked hides the Fake's Marker: a runtime that cannot tell which
// sandbox a workload belongs to.
type unmarked struct{ driver.Driver }

// On a runtime that cannot read marks, every unknown workload is spared
// while any record is unreadable, since it may be that sandbox's; deleting
// the last unreadable sandbox ends them all.
func TestUnreadableRecordsOnARuntimeWithoutMarks(t *testing.T) {
	h := newHarness(t)
	fake := h.rt
	h.opts.Runtimes[provider.RuntimeNative] = unmarked{fake}
	h.restart()
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "a"})
	h.create(provider.CreateRequest{ID: "b"})
	h.m.Close()
	for _, id := range []string{"a", "b"} {
		require.NoError(t, os.WriteFile(filepath.Join(h.root, id, recordFile), []byte("garbage"), 0o644))
	}
	fake.Spawn(driver.Spec{SandboxID: "lost", Root: h.root})
	h.m = nil
	h.restart()
	assert.Equal(t, 3, fake.Running(), "nothing killed that might belong to an unreadable sandbox")

	require.NoError(t, h.m.Delete(ctx, "a"))
	assert.Equal(t, 3, fake.Running(), "b may still own any of them")
	require.NoError(t, h.m.Delete(ctx, "b"))
	assert.Zero(t, fake.Running(), "with no unreadable record left, every unknown workload is an orphan")
}

// The quarantine directory works whatever already sits at its path: a file
// or a symlink is moved aside (never followed, never deleted), and the id
// is free again afterwards, never a ghost that is refused on create yet
// invisible.
func TestQuarantineWhateverSitsAtCorrupt(t *testing.T) {
	tests := []struct {
		name  string
		place func(t *testing.T, path, outside string)
	}{
		{"a file", func(t *testing.T, path, _ string) { require.NoError(t, os.WriteFile(path, []byte("user data"), 0o600)) }},
		{"a symlink to a directory", func(t *testing.T, path, outside string) { require.NoError(t, os.Symlink(outside, path)) }},
		{"a dangling symlink", func(t *testing.T, path, outside string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "nothing"), path))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			outside := t.TempDir()
			h.create(provider.CreateRequest{ID: "ghost"})
			h.m.Close()
			require.NoError(t, os.WriteFile(filepath.Join(h.root, "ghost", recordFile), []byte("{"), 0o644))
			tt.place(t, filepath.Join(h.root, corruptDir), outside)

			h.m = nil
			h.restart()
			assert.Equal(t, provider.StateError, h.get("ghost").State, "visible, not a ghost")
			require.NoError(t, h.m.Delete(ctx, "ghost"))
			assert.Zero(t, h.rt.Running())
			fi, err := os.Lstat(filepath.Join(h.root, corruptDir))
			require.NoError(t, err)
			assert.True(t, fi.IsDir())
			aside, err := filepath.Glob(filepath.Join(h.root, corruptDir+".displaced-*"))
			require.NoError(t, err)
			assert.Len(t, aside, 1, "what sat there is kept")
			empty, err := os.ReadDir(outside)
			require.NoError(t, err)
			assert.Empty(t, empty, "a symlink is never followed")

			s := h.create(provider.CreateRequest{ID: "ghost"})
			assert.Equal(t, provider.StateStarted, s.State)
			assert.Len(t, h.m.List(ctx, Filter{}), 1)
		})
	}
}

// sweeping records the roots Sweep was called with.
type sweeping struct {
	*drivertest.Fake
	mu    sync.Mutex
	roots []string
}

func (s *sweeping) Sweep(ctx context.Context, root string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roots = append(s.roots, root)
	return nil
}

// A restart lets each runtime sweep what interrupted operations left
// besides workloads (docker: images of an interrupted replace).
func TestRestartSweepsTheRuntimes(t *testing.T) {
	rt := &sweeping{Fake: drivertest.New(provider.RuntimeNative)}
	h := newHarness(t, useRuntime(rt))
	rt.mu.Lock()
	defer rt.mu.Unlock()
	assert.Equal(t, []string{h.root}, rt.roots)
}

// A native start's started record is not synced before the start answers
// (startDurable): the machine crash that could lose it ends the workload
// too, and a restart must then make of the record left before it, which
// says starting, what it makes of a started one: the workload is gone, the
// sandbox stopped.
func TestAStartingRecordRecoversAsAStartedOne(t *testing.T) {
	for _, state := range []provider.State{provider.StateStarting, provider.StateStarted} {
		t.Run(string(state), func(t *testing.T) {
			h := newHarness(t)
			h.create(provider.CreateRequest{ID: "crashed"})
			h.m.Close()
			h.rt.Kill(h.handle("crashed"), "killed: signal SIGKILL") // the machine went down
			rewrite(t, h.root, "crashed", func(r *record) { r.State = state })
			h.m = nil
			h.restart()
			s := h.get("crashed")
			assert.Equal(t, provider.StateStopped, s.State)
			assert.Equal(t, reasonGone, s.ErrorReason)
			assert.Zero(t, s.Port)
			assert.Zero(t, h.rt.Running())
		})
	}
}

// A create syncs only its first record before it publishes the directory;
// its env and token files become durable while the workload starts. A
// machine crash before its commit point may then bring the directory back
// with those files empty: the record says creating, so the restart rolls
// the sandbox back whole, and nothing reads them.
func TestACreateCrashedWithItsEnvAndTokenLostIsRolledBack(t *testing.T) {
	h := newHarness(t)
	h.create(provider.CreateRequest{ID: "torn", EnvVars: map[string]string{"K": "v"}})
	h.m.Close()
	h.rt.Kill(h.handle("torn"), "killed: signal SIGKILL") // the machine went down
	rewrite(t, h.root, "torn", func(r *record) { r.State, r.Creating = provider.StateStarting, true })
	for _, name := range []string{envFile, tokenFile} {
		require.NoError(t, os.WriteFile(filepath.Join(h.root, "torn", name), nil, 0o600))
	}
	h.m = nil
	h.restart()
	_, err := h.m.Get(context.Background(), "torn")
	assert.Equal(t, provider.NotFound, provider.Code(err))
	assert.NoDirExists(t, filepath.Join(h.root, "torn"))
	assert.Empty(t, h.m.Warnings(), "nothing left behind to report")
}
