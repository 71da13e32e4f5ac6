package manager

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/drivertest"
	"github.com/sandplane/sandplane/provider"
)

// A daemon restarted without a runtime (docker's engine was down, say) keeps
// that runtime's sandboxes as they are; every operation on them must answer
// with a coded error, never a panic, and reads must keep working.
func TestSandboxOfADisabledRuntime(t *testing.T) {
	dockerRT := drivertest.New(provider.RuntimeDocker)
	h := newHarness(t, func(o *Options) {
		o.Runtimes[provider.RuntimeDocker] = dockerRT
		o.Snapshots[DefaultSnapshot] = Snapshot{Command: []string{"workload"}, Image: "img", Ready: "none"}
	})
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "boxed", Runtime: provider.RuntimeDocker})
	h.create(provider.CreateRequest{ID: "native"})

	h.opts.Runtimes = map[provider.Runtime]driver.Driver{provider.RuntimeNative: h.rt}
	h.restart()

	assert.Equal(t, provider.StateStarted, h.get("boxed").State, "kept as recorded")
	assert.Len(t, h.m.List(ctx, Filter{}), 2)
	calls := map[string]func() error{
		"stop":   func() error { _, err := h.m.Stop(ctx, "boxed"); return err },
		"start":  func() error { _, err := h.m.Start(ctx, "boxed"); return err },
		"delete": func() error { return h.m.Delete(ctx, "boxed") },
		"logs":   func() error { _, err := h.m.EntrypointLogs(ctx, "boxed"); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = call() })
			require.Error(t, err)
			assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
			assert.Contains(t, provider.Message(err), "docker")
		})
	}
	assert.Equal(t, 1, dockerRT.Running(), "the workload is left alone, not forgotten")
	assert.Equal(t, provider.StateStarted, h.get("boxed").State)
}

// gatedStop holds every Stop until the test releases it, then behaves like
// the native runtime, whose wait for the exit ends with its context.
type gatedStop struct {
	*drivertest.Fake
	entered chan struct{}
	release chan struct{}
}

func newGatedStop() *gatedStop {
	return &gatedStop{Fake: drivertest.New(provider.RuntimeNative), entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedStop) Stop(ctx context.Context, h driver.Handle, grace time.Duration) error {
	g.entered <- struct{}{}
	<-g.release
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.Fake.Stop(ctx, h, grace)
}

func useRuntime(rt driver.Driver) func(*Options) {
	return func(o *Options) { o.Runtimes = map[provider.Runtime]driver.Driver{provider.RuntimeNative: rt} }
}

func readRecord(t *testing.T, root, id string) record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, id, recordFile))
	require.NoError(t, err)
	var r record
	require.NoError(t, json.Unmarshal(data, &r))
	return r
}

func TestFailingStopsScheduleOneRetry(t *testing.T) {
	h := newHarness(t)
	h.create(provider.CreateRequest{ID: "stubborn"})
	idle := h.clk.Waiters() // the reaper's ticker
	h.rt.FailStop(errors.New("operation not permitted"))
	for i := 0; i < 3; i++ {
		_, err := h.m.Stop(context.Background(), "stubborn")
		require.Error(t, err)
	}
	assert.Equal(t, idle+1, h.clk.Waiters(), "one pending retry, however often the stop was asked for")

	h.clk.Advance(killRetry) // fails again and re-arms
	h.eventually(func() bool { return h.clk.Waiters() == idle+1 }, "the failed retry schedules the next")
	h.rt.FailStop(nil)
	h.clk.Advance(killRetry)
	h.eventually(func() bool { return h.get("stubborn").State == provider.StateStopped }, "the retry stops it")
	h.eventually(func() bool { return h.clk.Waiters() == idle }, "nothing left pending once stopped")
}

// A kill retry that is running when the manager closes must not write the
// registry after Close returned: the next manager on the root owns it then.
func TestCloseWaitsForAKillRetry(t *testing.T) {
	g := newGatedStop()
	h := newHarness(t, useRuntime(g))
	h.create(provider.CreateRequest{ID: "stubborn"})
	g.FailStop(errors.New("operation not permitted"))
	stopped := make(chan error, 1)
	go func() { _, err := h.m.Stop(context.Background(), "stubborn"); stopped <- err }()
	<-g.entered
	g.release <- struct{}{}
	require.Error(t, <-stopped)

	g.FailStop(nil)
	advanced := make(chan struct{})
	go func() { h.clk.Advance(killRetry); close(advanced) }()
	<-g.entered // the retry is killing
	closed := make(chan struct{})
	go func() { h.m.Close(); close(closed) }()
	h.eventually(func() bool { return h.m.ctx.Err() != nil }, "Close began")
	select {
	case <-closed:
		before := readRecord(t, h.root, "stubborn")
		close(g.release)
		<-advanced
		h.eventually(func() bool { return g.Running() == 0 }, "the retry ran")
		assert.Equal(t, before, readRecord(t, h.root, "stubborn"), "the registry was written after Close returned")
	case <-time.After(100 * time.Millisecond):
		close(g.release) // Close is waiting for the retry, as it should
		<-closed
		<-advanced
	}
}

// An auto-stop in progress when the manager closes finishes its kill instead
// of failing it with the manager's cancelled context.
func TestCloseDuringAutoStop(t *testing.T) {
	g := newGatedStop()
	h := newHarness(t, useRuntime(g))
	h.create(provider.CreateRequest{ID: "idle", AutoStopInterval: ptr(1)})
	h.clk.Advance(time.Minute)
	<-g.entered // the reaper is killing
	closed := make(chan struct{})
	go func() { h.m.Close(); close(closed) }()
	h.eventually(func() bool { return h.m.ctx.Err() != nil }, "Close began")
	close(g.release)
	<-closed
	r := readRecord(t, h.root, "idle")
	assert.Equal(t, provider.StateStopped, r.State)
	assert.Equal(t, provider.ErrorReasonAutoStopped, r.ErrorReason)
	assert.Zero(t, g.Running())
}

// Updates that race must reach sandbox.json in the order they took effect:
// a stale write landing last would make the registry disagree with the
// daemon (and a stale creating=true would roll a created sandbox back at
// the next restart).
func TestConcurrentUpdatesPersistTheLatest(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "racy"})
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		for i := 1; i <= 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := h.m.SetAutoStopInterval(ctx, "racy", round*10+i)
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		want := h.get("racy").AutoStopInterval
		require.Equal(t, want, readRecord(t, h.root, "racy").AutoStopInterval, "round %d: sandbox.json holds a stale record", round)
	}
}

// probeSabotage is ready at once, but first makes sandbox.json unwritable
// (a directory in its place), so the create's final write fails.
type probeSabotage struct {
	*drivertest.Fake
	off atomic.Bool
}

// The launcher asks a driver that is a Prober: one that stopped being one
// would be dialled instead, and wait for a port no one listens on.
var (
	_ driver.Prober = (*probeSabotage)(nil)
	_ driver.Prober = (*probeGate)(nil)
)

func (p *probeSabotage) Probe(ctx context.Context, h driver.Handle, addr netip.AddrPort) (bool, error) {
	if p.off.Load() {
		return true, nil
	}
	for _, s := range p.Specs() {
		path := filepath.Join(s.Dir, recordFile)
		if err := os.Remove(path); err == nil {
			if err := os.Mkdir(path, 0o700); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

func TestCreateReleasesThePortWhenItsLastWriteFails(t *testing.T) {
	hook := &recordingHook{}
	p := &probeSabotage{Fake: drivertest.New(provider.RuntimeNative)}
	h := newHarness(t, useRuntime(p), func(o *Options) {
		o.PortMin, o.PortMax = 14400, 14400
		o.LaunchHook = hook
		o.Snapshots[DefaultSnapshot] = Snapshot{Command: []string{"workload"}, Ready: "port"} // up when the driver's Probe says
	})
	_, err := h.m.Create(context.Background(), provider.CreateRequest{ID: "unlucky"})
	assert.Equal(t, provider.CreateFailed, provider.Code(err), "%v", err)
	assert.Zero(t, p.Running(), "the workload is killed")
	assert.NoDirExists(t, filepath.Join(h.root, "unlucky"))
	assert.Equal(t, []string{"unlucky"}, hook.exits(), "the launch hook cleans up")

	p.off.Store(true)
	s, err := h.m.Create(context.Background(), provider.CreateRequest{ID: "lucky"})
	require.NoError(t, err)
	assert.Equal(t, 14400, s.Port)
}

// statusDown answers Status with unavailable while down is set, like a
// docker engine that does not answer.
type statusDown struct {
	*drivertest.Fake
	down atomic.Bool
}

func (s *statusDown) Status(ctx context.Context, h driver.Handle) (driver.Status, error) {
	if s.down.Load() {
		return driver.Status{}, provider.Errorf(provider.Unavailable, "engine does not answer")
	}
	return s.Fake.Status(ctx, h)
}

// A sandbox that rehydrate cannot check keeps its port: its workload may
// still serve there, so handing the port out again would put two
// sandboxes on it.
func TestUncheckedSandboxKeepsItsPort(t *testing.T) {
	tests := []struct {
		name  string
		blind func(h *harness, rt *statusDown)
	}{
		{"status fails", func(h *harness, rt *statusDown) { rt.down.Store(true) }},
		{"runtime disabled", func(h *harness, rt *statusDown) {
			h.opts.Runtimes = map[provider.Runtime]driver.Driver{provider.RuntimeDocker: drivertest.New(provider.RuntimeDocker)}
			h.opts.Snapshots = map[string]Snapshot{DefaultSnapshot: {Image: "img", Ready: "none"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &statusDown{Fake: drivertest.New(provider.RuntimeNative)}
			h := newHarness(t, useRuntime(rt), func(o *Options) { o.PortMin, o.PortMax = 14500, 14500 })
			first := h.create(provider.CreateRequest{ID: "first"})
			tt.blind(h, rt)
			h.restart()
			s, err := h.m.Create(context.Background(), provider.CreateRequest{ID: "second"})
			assert.Equal(t, provider.ResourceExhausted, provider.Code(err), "port %d handed out again", s.Port)
			assert.Equal(t, first.Port, h.get("first").Port)
		})
	}
}

// A sandbox left stopping by a daemon that could not finish the kill must
// not get a second workload beside the first on start.
func TestStartFinishesAnInterruptedStopFirst(t *testing.T) {
	rt := &statusDown{Fake: drivertest.New(provider.RuntimeNative)}
	h := newHarness(t, useRuntime(rt))
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "stubborn"})
	rt.FailStop(errors.New("operation not permitted"))
	_, err := h.m.Stop(ctx, "stubborn")
	require.Error(t, err)
	rt.down.Store(true) // the restarted daemon cannot check it
	h.restart()
	rt.down.Store(false)
	require.Equal(t, provider.StateStopping, h.get("stubborn").State)

	_, err = h.m.Start(ctx, "stubborn")
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
	assert.Equal(t, 1, rt.Running(), "no second workload while the first may live")

	rt.FailStop(nil)
	h.clk.Advance(killRetry)
	h.eventually(func() bool { return h.get("stubborn").State == provider.StateStopped }, "the retry stops it")
	assert.Zero(t, rt.Running())
	s, err := h.m.Start(ctx, "stubborn")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, s.State)
	assert.Empty(t, s.ErrorReason)
	assert.Equal(t, 1, rt.Running())
}

// Folders in the root that are not sandboxes are the user's: a restart
// reports them and never removes them, even empty ones, and a create never
// takes their name. A create builds its directory under a staging name, so
// a crash before its first record leaves only a staging directory, which
// the next start removes.
func TestForeignFoldersSurviveARestart(t *testing.T) {
	h := newHarness(t)
	h.m.Close()
	foreign := map[string][]string{
		"empty":       nil,
		"only-env":    {envFile},
		"users-notes": {"notes.txt"},
	}
	for name, files := range foreign {
		require.NoError(t, os.Mkdir(filepath.Join(h.root, name), 0o700))
		for _, f := range files {
			require.NoError(t, os.WriteFile(filepath.Join(h.root, name, f), []byte(`{"K":"v"}`), 0o600))
		}
	}
	staged := filepath.Join(h.root, stagingPrefix+"crashed-123")
	require.NoError(t, os.Mkdir(staged, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(staged, envFile), []byte(`{"TOKEN":"secret-value"}`), 0o600))

	h.m = nil
	h.restart()
	assert.NoDirExists(t, staged, "a create that never finished is removed")
	warnings := strings.Join(h.m.Warnings(), "\n")
	for name := range foreign {
		assert.DirExists(t, filepath.Join(h.root, name))
		assert.Contains(t, warnings, filepath.Join(h.root, name))
		_, err := h.m.Create(context.Background(), provider.CreateRequest{ID: name})
		assert.Equal(t, provider.AlreadyExists, provider.Code(err), "%v", err)
		assert.DirExists(t, filepath.Join(h.root, name), "a refused create leaves the folder alone")
	}
	h.create(provider.CreateRequest{ID: "crashed"})
	h.restart()
	for name := range foreign {
		assert.DirExists(t, filepath.Join(h.root, name), "a second restart keeps it too")
	}
}

// A setter that races a delete answers not_found, never an internal error
// about a sandbox.json it could not write.
func TestSettersRacingDeleteAnswerNotFound(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for round := 0; round < 30; round++ {
		h.create(provider.CreateRequest{ID: "short-lived"})
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); assert.NoError(t, h.m.Delete(ctx, "short-lived")) }()
		for _, set := range []func() error{
			func() error { return h.m.RefreshActivity(ctx, "short-lived") },
			func() error { _, err := h.m.SetAutoStopInterval(ctx, "short-lived", 5); return err },
		} {
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if err := set(); err != nil {
						assert.Equal(t, provider.NotFound, provider.Code(err), "round %d: %v", round, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		assert.NoDirExists(t, filepath.Join(h.root, "short-lived"))
	}
}

// probeGate is ready once released, and says when it is first asked: the
// workload is started then, its handle on record, its started record
// prepared.
type probeGate struct {
	*drivertest.Fake
	asked   chan struct{}
	once    sync.Once
	release chan struct{}
}

func newProbeGate() *probeGate {
	return &probeGate{Fake: drivertest.New(provider.RuntimeNative), asked: make(chan struct{}), release: make(chan struct{})}
}

func (p *probeGate) Probe(ctx context.Context, h driver.Handle, addr netip.AddrPort) (bool, error) {
	p.once.Do(func() { close(p.asked) })
	select {
	case <-p.release:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// The record that says a sandbox started is prepared while its workload
// starts; a change that comes meanwhile (a setter, a refresh) must not be
// lost to it: the create and the start write theirs afresh over the change.
func TestAChangeWhileTheWorkloadStartsIsKept(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"create", "start"} {
		t.Run(op, func(t *testing.T) {
			p := newProbeGate()
			h := newHarness(t, useRuntime(p), func(o *Options) {
				o.Snapshots[DefaultSnapshot] = Snapshot{Command: []string{"workload"}, Ready: "port"} // up when the driver's Probe says
			})
			if op == "start" {
				close(p.release)
				h.create(provider.CreateRequest{ID: "busy"})
				_, err := h.m.Stop(ctx, "busy")
				require.NoError(t, err)
				p.once, p.asked, p.release = sync.Once{}, make(chan struct{}), make(chan struct{})
			}
			done := make(chan error, 1)
			go func() {
				var err error
				if op == "create" {
					_, err = h.m.Create(ctx, provider.CreateRequest{ID: "busy"})
				} else {
					_, err = h.m.Start(ctx, "busy")
				}
				done <- err
			}()
			<-p.asked
			_, err := h.m.SetAutoStopInterval(ctx, "busy", 7)
			require.NoError(t, err)
			h.clk.Advance(time.Second)
			require.NoError(t, h.m.RefreshActivity(ctx, "busy"))
			refreshed := h.clk.Now()
			close(p.release)
			require.NoError(t, <-done)

			s := h.get("busy")
			assert.Equal(t, provider.StateStarted, s.State)
			assert.Equal(t, 7, s.AutoStopInterval, "the setter's change")
			assert.Equal(t, refreshed, s.LastActivityAt, "the refresh's time")
			r := readRecord(t, h.root, "busy")
			assert.Equal(t, provider.StateStarted, r.State)
			assert.False(t, r.Creating)
			assert.Equal(t, 7, r.AutoStopInterval, "on disk too")
			assert.True(t, r.LastActivityAt.Equal(refreshed), "on disk too")
		})
	}
}

// Without a change meanwhile, the prepared record is the one written: on
// disk what is in memory, started, no longer creating.
func TestThePreparedRecordIsWhatStartedWrites(t *testing.T) {
	ctx := context.Background()
	p := newProbeGate()
	close(p.release)
	h := newHarness(t, useRuntime(p), func(o *Options) {
		o.Snapshots[DefaultSnapshot] = Snapshot{Command: []string{"workload"}, Ready: "port"} // up when the driver's Probe says
	})
	check := func(s provider.Sandbox) {
		t.Helper()
		r := readRecord(t, h.root, s.ID)
		assert.Equal(t, provider.StateStarted, r.State)
		assert.False(t, r.Creating)
		assert.Equal(t, s.Port, r.Port)
		assert.NotNil(t, r.Handle)
		assert.True(t, r.LastActivityAt.Equal(s.LastActivityAt))
		assert.Equal(t, s, h.get(s.ID))
	}
	s := h.create(provider.CreateRequest{ID: "plain"})
	check(s)
	_, err := h.m.Stop(ctx, "plain")
	require.NoError(t, err)
	h.clk.Advance(time.Second)
	s, err = h.m.Start(ctx, "plain")
	require.NoError(t, err)
	check(s)
	assert.Equal(t, h.clk.Now(), s.LastActivityAt)
}
