package manager

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/drivertest"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

type harness struct {
	t    *testing.T
	m    *Manager
	rt   *drivertest.Fake
	clk  *clocktest.Fake
	root string
	opts Options
}

func newHarness(t *testing.T, mutate ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, rt: drivertest.New(provider.RuntimeNative), clk: clocktest.NewFake(time.Time{}), root: t.TempDir()}
	h.opts = Options{
		Root:     h.root,
		Runtimes: map[provider.Runtime]driver.Driver{provider.RuntimeNative: h.rt},
		Snapshots: map[string]Snapshot{
			DefaultSnapshot: {Command: []string{"workload"}, Ready: "none", Env: map[string]string{"FROM_SNAPSHOT": "s"}},
			"other":         {Command: []string{"other"}, Ready: "none"},
		},
		Clock:     h.clk,
		PortMin:   14100,
		PortMax:   14199,
		PassEnv:   map[string]string{"MODEL_KEY": "daemon-secret-key", "SHARED": "from-daemon"},
		BaseEnv:   map[string]string{"PATH": "/usr/bin"},
		StopGrace: time.Second,
	}
	for _, f := range mutate {
		f(&h.opts)
	}
	h.restart()
	return h
}

// restart simulates a daemon restart: a new Manager on the same root and the
// same (still running) workloads. It returns once the restart's recovery is
// done; restartAnswering returns at once.
func (h *harness) restart() {
	h.t.Helper()
	h.restartAnswering()
	select {
	case <-h.m.Recovered():
	case <-time.After(10 * time.Second):
		h.t.Fatal("the restart's recovery did not finish")
	}
}

func (h *harness) restartAnswering() {
	h.t.Helper()
	if h.m != nil {
		h.m.Close()
	}
	m, err := New(h.opts)
	require.NoError(h.t, err)
	h.m = m
	h.t.Cleanup(m.Close)
}

func (h *harness) create(req provider.CreateRequest) provider.Sandbox {
	h.t.Helper()
	s, err := h.m.Create(context.Background(), req)
	require.NoError(h.t, err)
	return s
}

func (h *harness) get(idOrName string) provider.Sandbox {
	h.t.Helper()
	s, err := h.m.Get(context.Background(), idOrName)
	require.NoError(h.t, err)
	return s
}

func (h *harness) handle(id string) driver.Handle {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return *h.m.reg.byID[id].rec.Handle
}

// eventually waits for an asynchronous transition (a goroutine reacting to
// the fake clock or to a fake exit). It polls real time only to avoid a hang.
func (h *harness) eventually(cond func() bool, msg string) {
	h.t.Helper()
	require.Eventually(h.t, cond, 5*time.Second, time.Millisecond, msg)
}

func ptr[T any](v T) *T { return &v }

func TestCreateGetListDelete(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a := h.create(provider.CreateRequest{Name: "a", Labels: map[string]string{"team": "x", "origin": "cli"}})
	h.clk.Advance(time.Second)
	b := h.create(provider.CreateRequest{ID: "b-id", Labels: map[string]string{"team": "x"}})
	h.create(provider.CreateRequest{Labels: map[string]string{"team": "y"}})

	assert.Equal(t, provider.StateStarted, a.State)
	assert.Equal(t, "a", a.Name)
	assert.NotEmpty(t, a.ID)
	assert.Equal(t, "b-id", b.Name, "name defaults to id")
	assert.Equal(t, DefaultSnapshot, a.Snapshot)
	assert.Equal(t, provider.RuntimeNative, a.Runtime)
	assert.Equal(t, 15, a.AutoStopInterval)
	assert.NotEqual(t, a.Port, b.Port)
	assert.Equal(t, "http://127.0.0.1:"+itoa(a.Port), a.PreviewURL)
	assert.Equal(t, a.CreatedAt, a.LastActivityAt)

	assert.Equal(t, a, h.get(a.ID))
	assert.Equal(t, a, h.get("a"), "lookup by name")

	tests := []struct {
		labels map[string]string
		want   []string
	}{
		{nil, []string{a.ID, b.ID}},
		{map[string]string{"team": "x"}, []string{a.ID, b.ID}},
		{map[string]string{"team": "x", "origin": "cli"}, []string{a.ID}},
		{map[string]string{"team": "z"}, nil},
		{map[string]string{"origin": ""}, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, s := range h.m.List(ctx, Filter{Labels: tt.labels}) {
			if tt.labels == nil && s.Labels["team"] == "y" {
				continue
			}
			got = append(got, s.ID)
		}
		assert.Equal(t, tt.want, got, "labels %v", tt.labels)
	}

	require.NoError(t, h.m.Delete(ctx, "a"))
	_, err := h.m.Get(ctx, a.ID)
	assert.Equal(t, provider.NotFound, provider.Code(err))
	require.NoError(t, h.m.Delete(ctx, "a"), "delete is idempotent")
	require.NoError(t, h.m.Delete(ctx, "never-existed"))
	assert.NoDirExists(t, filepath.Join(h.root, a.ID))
	assert.Equal(t, 2, h.rt.Running())
}

// A snapshot that only docker can run (an image, no command) runs on
// docker when the create names no runtime; named native, it is refused
// with the way out.
func TestAnImageOnlySnapshotRunsOnDocker(t *testing.T) {
	dockerRT := drivertest.New(provider.RuntimeDocker)
	h := newHarness(t, func(o *Options) {
		o.Runtimes[provider.RuntimeDocker] = dockerRT
		o.DefaultRuntime = provider.RuntimeNative
		o.Snapshots["node"] = Snapshot{Image: "node:20-slim", Ready: "none"}
	})
	s := h.create(provider.CreateRequest{Snapshot: "node"})
	assert.Equal(t, provider.RuntimeDocker, s.Runtime)
	assert.Equal(t, 1, dockerRT.Running())
	assert.Equal(t, provider.RuntimeNative, h.create(provider.CreateRequest{}).Runtime, "the default snapshot keeps the default runtime")

	_, err := h.m.Create(context.Background(), provider.CreateRequest{Snapshot: "node", Runtime: provider.RuntimeNative})
	require.Error(t, err)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err))
	assert.Contains(t, provider.Message(err), "create it on the docker runtime (sandplane create --runtime docker)")
}

func TestCreateErrors(t *testing.T) {
	h := newHarness(t)
	h.create(provider.CreateRequest{ID: "taken"})
	tests := []struct {
		name string
		req  provider.CreateRequest
		code provider.ErrorCode
	}{
		{"id taken", provider.CreateRequest{ID: "taken"}, provider.AlreadyExists},
		{"name taken", provider.CreateRequest{Name: "taken"}, provider.AlreadyExists},
		{"bad id", provider.CreateRequest{ID: "../etc"}, provider.InvalidArgument},
		{"bad name", provider.CreateRequest{Name: "has space"}, provider.InvalidArgument},
		{"id and name differ", provider.CreateRequest{ID: "a", Name: "b"}, provider.InvalidArgument},
		{"a name no host name can hold", provider.CreateRequest{Name: "Upper_case"}, provider.InvalidArgument},
		{"a name too long for its preview host", provider.CreateRequest{Name: strings.Repeat("a", 58)}, provider.InvalidArgument},
		{"a name ending in '-'", provider.CreateRequest{Name: "box-"}, provider.InvalidArgument},
		{"bad session", provider.CreateRequest{SessionID: ptr("has space")}, provider.InvalidArgument},
		{"autoDeleteInterval below -1", provider.CreateRequest{AutoDeleteInterval: ptr(-2)}, provider.InvalidArgument},
		{"negative autoArchiveInterval", provider.CreateRequest{AutoArchiveInterval: ptr(-1)}, provider.InvalidArgument},
		{"negative cpu", provider.CreateRequest{CPU: -1}, provider.InvalidArgument},
		{"negative ttlMinutes", provider.CreateRequest{TTLMinutes: -1}, provider.InvalidArgument},
		{"a TTL", provider.CreateRequest{TTLMinutes: 5}, provider.Unsupported},
		{"negative autoPauseInterval", provider.CreateRequest{AutoPauseInterval: ptr(-1)}, provider.InvalidArgument},
		{"auto-pause", provider.CreateRequest{AutoPauseInterval: ptr(5)}, provider.Unsupported},
		{"secrets", provider.CreateRequest{Secrets: map[string]string{"API_KEY": "api"}}, provider.Unsupported},
		{"negative autostop", provider.CreateRequest{AutoStopInterval: ptr(-1)}, provider.InvalidArgument},
		{"unknown runtime", provider.CreateRequest{Runtime: "vm"}, provider.InvalidArgument},
		{"runtime not enabled", provider.CreateRequest{Runtime: provider.RuntimeDocker}, provider.PreflightFailed},
		{"unknown snapshot", provider.CreateRequest{Snapshot: "nope"}, provider.PreflightFailed},
		{"PORT is the daemon's", provider.CreateRequest{EnvVars: map[string]string{"PORT": "1"}}, provider.InvalidArgument},
		{"empty label key", provider.CreateRequest{Labels: map[string]string{"": "v"}}, provider.InvalidArgument},
		{"label key too long", provider.CreateRequest{Labels: map[string]string{strings.Repeat("k", MaxLabelKeyLen+1): "v"}}, provider.InvalidArgument},
		{"too many labels", provider.CreateRequest{Labels: manyLabels(MaxLabels + 1)}, provider.InvalidArgument},
		{"NUL in an env value", provider.CreateRequest{EnvVars: map[string]string{"SECRET": "abc\x00def"}}, provider.InvalidArgument},
		{"= in an env name", provider.CreateRequest{EnvVars: map[string]string{"A=B": "v"}}, provider.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.m.Create(context.Background(), tt.req)
			require.Error(t, err)
			assert.Equal(t, tt.code, provider.Code(err), "%v", err)
			assert.NotEmpty(t, provider.Message(err))
		})
	}
	_, err := h.m.Create(context.Background(), provider.CreateRequest{EnvVars: map[string]string{"SECRET": "abc\x00def"}})
	assert.NotContains(t, provider.Message(err), "abc", "an env value never reaches an error")

	// A clash names what clashed with what.
	for _, tt := range []struct {
		req  provider.CreateRequest
		want string
	}{
		{provider.CreateRequest{ID: "taken"}, `a sandbox named "taken" already exists`},
		{provider.CreateRequest{Name: "taken"}, `a sandbox named "taken" already exists`},
		{provider.CreateRequest{ID: "a", Name: "b"}, `a sandbox's id is its name`},
		{provider.CreateRequest{Name: "Box_1"}, `it is part of the preview host <port>-<id>.localhost`},
	} {
		_, err := h.m.Create(context.Background(), tt.req)
		assert.Contains(t, provider.Message(err), tt.want)
	}
	_, err = h.m.Create(context.Background(), provider.CreateRequest{Labels: manyLabels(MaxLabels), EnvVars: map[string]string{"K": "ok"}})
	require.NoError(t, err, "the bounds themselves are allowed")
	assert.Len(t, h.m.List(context.Background(), Filter{}), 2, "failed creates leave nothing in the registry")
	entries, _ := os.ReadDir(h.root)
	var dirs []string
	for _, e := range entries {
		if e.Name()[0] != '.' {
			dirs = append(dirs, e.Name())
		}
	}
	assert.Len(t, dirs, 2, "failed creates leave no directory")
}

func manyLabels(n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out["k"+strconv.Itoa(i)] = "v"
	}
	return out
}

func TestCreateRollsBackWhenTheWorkloadFails(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.PortMin, o.PortMax = 14200, 14200 })
	h.rt.FailStart(errors.New("exec format error"))
	_, err := h.m.Create(context.Background(), provider.CreateRequest{ID: "doomed"})
	assert.Equal(t, provider.CreateFailed, provider.Code(err))
	assert.NoDirExists(t, filepath.Join(h.root, "doomed"))
	assert.Empty(t, h.m.List(context.Background(), Filter{}))

	h.rt.FailStart(nil)
	s := h.create(provider.CreateRequest{ID: "doomed"})
	assert.Equal(t, 14200, s.Port, "the failed create released the only port")
}

func TestSnapshotIsolationReachesTheRuntime(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Snapshots["isolated"] = Snapshot{Command: []string{"workload"}, Ready: "none", Isolation: "bwrap"}
	})
	h.create(provider.CreateRequest{ID: "plain"})
	h.create(provider.CreateRequest{ID: "boxed", Snapshot: "isolated"})
	specs := h.rt.Specs()
	require.Len(t, specs, 2)
	assert.Empty(t, specs[0].Isolation, "the runtime's default")
	assert.Equal(t, "bwrap", specs[1].Isolation)
}

func TestEnvProvenanceAndRedaction(t *testing.T) {
	h := newHarness(t)
	s := h.create(provider.CreateRequest{ID: "env", EnvVars: map[string]string{"SHARED": "from-request", "TOKEN": "request-secret"}})
	spec := h.rt.Specs()[0]
	tok, err := h.m.readToken("env")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"PATH":          "/usr/bin",
		"FROM_SNAPSHOT": "s",
		"MODEL_KEY":     "daemon-secret-key",
		"SHARED":        "from-request",
		"TOKEN":         "request-secret",
		"PORT":          itoa(s.Port),
		"PORT_4000":     itoa(s.Port),
		TokenEnv:        tok,
	}, spec.Env)
	fi, err := os.Stat(filepath.Join(h.root, "env", envFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	raw, err := os.ReadFile(filepath.Join(h.root, "env", recordFile))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "request-secret", "sandbox.json never holds env values")

	h.rt.SetLogs(h.handle("env"), "key=request-secret model=daemon-secret-key port=1\n")
	logs, err := h.m.EntrypointLogs(context.Background(), "env")
	require.NoError(t, err)
	assert.Equal(t, "key=[REDACTED] model=[REDACTED] port=1\n", logs.Stdout)
	assert.Equal(t, logs.Stdout, logs.Output)
}

func TestStopStartKeepsIdentity(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := h.create(provider.CreateRequest{ID: "cycle"})
	stopped, err := h.m.Stop(ctx, "cycle")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStopped, stopped.State)
	assert.Zero(t, stopped.Port)
	assert.Empty(t, stopped.PreviewURL)
	assert.DirExists(t, filepath.Join(h.root, "cycle"), "stop keeps the directory")

	again, err := h.m.Stop(ctx, "cycle")
	require.NoError(t, err, "stop is idempotent locally (trait StopStoppedIsNoop)")
	assert.Equal(t, provider.StateStopped, again.State)

	started, err := h.m.Start(ctx, "cycle")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, started.State)
	assert.Equal(t, s.ID, started.ID)
	assert.Equal(t, s.Port, started.Port, "start prefers the previous port")
	noop, err := h.m.Start(ctx, "cycle")
	require.NoError(t, err)
	assert.Equal(t, started, noop, "start on started is a no-op")
	assert.Equal(t, 1, h.rt.Running())
}

func TestNotFound(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	calls := map[string]func() error{
		"get":      func() error { _, err := h.m.Get(ctx, "x"); return err },
		"start":    func() error { _, err := h.m.Start(ctx, "x"); return err },
		"stop":     func() error { _, err := h.m.Stop(ctx, "x"); return err },
		"refresh":  func() error { return h.m.RefreshActivity(ctx, "x") },
		"autostop": func() error { _, err := h.m.SetAutoStopInterval(ctx, "x", 1); return err },
		"resize":   func() error { _, err := h.m.Resize(ctx, "x", provider.ResizeRequest{}); return err },
		"preview":  func() error { _, err := h.m.PreviewURL(ctx, "x", 0); return err },
		"logs":     func() error { _, err := h.m.EntrypointLogs(ctx, "x"); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, provider.NotFound, provider.Code(call()))
		})
	}
}

func TestPreviewURL(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Snapshots["web"] = Snapshot{Command: []string{"web"}, Ready: "none", Port: 8000, Ports: []int{3000, 5173}}
	})
	ctx := context.Background()
	s := h.create(provider.CreateRequest{ID: "p"})
	u, err := h.m.PreviewURL(ctx, "p", 0)
	require.NoError(t, err)
	assert.Equal(t, s.PreviewURL, u.URL, "port 0 is the workload's")
	assert.NotEmpty(t, u.Token)
	u, err = h.m.PreviewURL(ctx, "p", DefaultPort)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:"+itoa(s.Port), u.URL, "4000 inside the sandbox is its host port")

	_, err = h.m.PreviewURL(ctx, "p", 8080)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
	assert.EqualError(t, err, "invalid_argument: port 8080 is not declared by snapshot default (it declares 4000): declare it in the daemon config's snapshot ports, then start the sandbox again")
	_, err = h.m.PreviewURL(ctx, "p", 70000)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))

	t.Run("a snapshot's own and extra ports", func(t *testing.T) {
		w := h.create(provider.CreateRequest{ID: "w", Snapshot: "web"})
		spec := h.rt.Specs()[len(h.rt.Specs())-1]
		assert.Equal(t, 8000, spec.SandboxPort)
		require.Len(t, spec.ExtraPorts, 2)
		hosts := map[int]int{8000: w.Port}
		for _, pm := range spec.ExtraPorts {
			hosts[pm.Sandbox] = pm.Host
			assert.Equal(t, itoa(pm.Host), spec.Env["PORT_"+itoa(pm.Sandbox)], "the workload binds host ports on the host's network")
		}
		for port, host := range hosts {
			u, err := h.m.PreviewURL(ctx, "w", port)
			require.NoError(t, err)
			assert.Equal(t, "http://127.0.0.1:"+itoa(host), u.URL, "port %d", port)
		}
		_, err = h.m.PreviewURL(ctx, "w", DefaultPort)
		assert.ErrorContains(t, err, "port 4000 is not declared by snapshot web (it declares 3000, 5173, 8000)")

		t.Run("the daemon's URLs", func(t *testing.T) {
			h.m.opts.PreviewURL = func(id string, port int) string { return "http://url/" + itoa(port) + "-" + id }
			h.m.opts.PreviewLink = func(id string, port int) string { return "http://" + itoa(port) + "-" + id + ".link" }
			u, err := h.m.PreviewURL(ctx, "w", 3000)
			require.NoError(t, err)
			assert.Equal(t, "http://url/3000-w", u.URL)
			// A sandbox's view is made when its record changes, and the
			// daemon sets its URLs before any: build this one anew.
			rec, err := h.m.record("w")
			require.NoError(t, err)
			assert.Equal(t, "http://8000-w.link", h.m.info(rec).PreviewURL)
		})
		h.m.opts.PreviewURL, h.m.opts.PreviewLink = nil, nil

		t.Run("given back on stop, the same again on start", func(t *testing.T) {
			_, err := h.m.Stop(ctx, "w")
			require.NoError(t, err)
			_, err = h.m.PreviewURL(ctx, "w", 3000)
			assert.Equal(t, provider.FailedPrecondition, provider.Code(err))
			_, err = h.m.Start(ctx, "w")
			require.NoError(t, err)
			for port, host := range hosts {
				u, err := h.m.PreviewURL(ctx, "w", port)
				require.NoError(t, err)
				assert.Equal(t, "http://127.0.0.1:"+itoa(host), u.URL, "port %d keeps its host port", port)
			}
		})
	})

	_, err = h.m.Stop(ctx, "p")
	require.NoError(t, err)
	_, err = h.m.PreviewURL(ctx, "p", 0)
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err))
}

func TestPreviewTarget(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Minute = time.Second
		o.Snapshots["web"] = Snapshot{Command: []string{"web"}, Ready: "none", Ports: []int{3000}}
	})
	ctx := context.Background()
	s := h.create(provider.CreateRequest{Name: "t", Snapshot: "web", AutoStopInterval: ptr(3)})
	tok, err := h.m.readToken("t")
	require.NoError(t, err)
	tg, err := h.m.PreviewTarget(ctx, "t", DefaultPort)
	require.NoError(t, err)
	assert.Equal(t, PreviewTarget{ID: "t", HostPort: s.Port, Addr: netip.MustParseAddr("127.0.0.1"), Token: tok, AutoStop: 3 * time.Second, Minute: time.Second}, tg)
	tg, err = h.m.PreviewTarget(ctx, "t", 3000)
	require.NoError(t, err)
	assert.NotEqual(t, s.Port, tg.HostPort)

	_, err = h.m.PreviewTarget(ctx, "t", 5000)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
	_, err = h.m.PreviewTarget(ctx, "nobody", 3000)
	assert.Equal(t, provider.NotFound, provider.Code(err))
	_, err = h.m.Stop(ctx, "t")
	require.NoError(t, err)
	_, err = h.m.PreviewTarget(ctx, "t", 3000)
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err))
}

func TestSnapshotPortsAreValidated(t *testing.T) {
	for name, snap := range map[string]Snapshot{
		"out of range": {Command: []string{"x"}, Port: 70000},
		"twice":        {Command: []string{"x"}, Ports: []int{3000, 3000}},
		"the default":  {Command: []string{"x"}, Ports: []int{DefaultPort}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(Options{Root: t.TempDir(), Runtimes: map[provider.Runtime]driver.Driver{provider.RuntimeNative: drivertest.New(provider.RuntimeNative)},
				Snapshots: map[string]Snapshot{"bad": snap}})
			assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
		})
	}
}

func TestProxyRefreshIsAnEventOfItsSource(t *testing.T) {
	evc := make(chan Event, 16)
	h := newHarness(t, func(o *Options) { o.OnEvent = func(e Event) { evc <- e } })
	h.create(provider.CreateRequest{ID: "r"})
	h.clk.Advance(time.Minute)
	for len(evc) > 0 {
		<-evc
	}
	require.NoError(t, h.m.RefreshActivityFrom(context.Background(), "r", provider.SourceProxy))
	ev := <-evc
	assert.Equal(t, provider.EventActivity, ev.Type)
	assert.Equal(t, provider.SourceProxy, ev.Source)
	assert.Equal(t, h.clk.Now(), ev.Sandbox.LastActivityAt)
	require.NoError(t, h.m.RefreshActivity(context.Background(), "r"))
	assert.Equal(t, provider.SourceRefresh, (<-evc).Source)
}

func TestExitIsNoticedWithoutARead(t *testing.T) {
	h := newHarness(t)
	var events []Event
	evc := make(chan Event, 16)
	h.opts.OnEvent = func(e Event) { evc <- e }
	h.restart()
	h.create(provider.CreateRequest{ID: "dies"})
	h.rt.Kill(h.handle("dies"), "killed: signal SIGKILL")
	for ev := range evc {
		events = append(events, ev)
		if ev.Type == provider.EventStopped {
			break
		}
	}
	last := events[len(events)-1]
	assert.Equal(t, "killed: signal SIGKILL", last.Sandbox.ErrorReason)
	assert.Equal(t, provider.StateStopped, last.Sandbox.State)
	assert.Equal(t, []provider.EventType{provider.EventCreated, provider.EventStarted, provider.EventActivity, provider.EventStopped}, types(events))
}

func types(evs []Event) []provider.EventType {
	var out []provider.EventType
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestKillFailureBlocksRespawnUntilRetrySucceeds(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "stubborn"})
	h.rt.FailStop(errors.New("operation not permitted"))
	_, err := h.m.Stop(ctx, "stubborn")
	require.Error(t, err)
	s := h.get("stubborn")
	assert.Equal(t, provider.StateStopping, s.State)
	assert.Contains(t, s.ErrorReason, "kill failed")
	_, err = h.m.Start(ctx, "stubborn")
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "no second workload while the first may live")
	assert.Equal(t, 1, h.rt.Running())

	h.rt.FailStop(nil)
	h.clk.Advance(killRetry)
	h.eventually(func() bool { return h.get("stubborn").State == provider.StateStopped }, "the retry stops it")
	_, err = h.m.Start(ctx, "stubborn")
	require.NoError(t, err)
}

func TestConcurrentStopsAreSerialised(t *testing.T) {
	h := newHarness(t)
	h.create(provider.CreateRequest{ID: "s"})
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() { _, err := h.m.Stop(context.Background(), "s"); errs <- err }()
	}
	for i := 0; i < 8; i++ {
		assert.NoError(t, <-errs)
	}
	assert.Equal(t, provider.StateStopped, h.get("s").State)
}

func TestPortsAreNeverHandedOutTwice(t *testing.T) {
	h := newHarness(t)
	const n = 50
	ports := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			s, err := h.m.Create(context.Background(), provider.CreateRequest{})
			if err != nil {
				ports <- -1
				return
			}
			ports <- s.Port
		}()
	}
	seen := map[int]bool{}
	for i := 0; i < n; i++ {
		p := <-ports
		require.Positive(t, p)
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
	}
}

func TestPortRangeExhausted(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.PortMin, o.PortMax = 14300, 14301 })
	h.create(provider.CreateRequest{})
	h.create(provider.CreateRequest{})
	_, err := h.m.Create(context.Background(), provider.CreateRequest{})
	assert.Equal(t, provider.ResourceExhausted, provider.Code(err))
}

func TestRehydrate(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "lives"})
	h.create(provider.CreateRequest{ID: "dies"})
	h.create(provider.CreateRequest{ID: "was-stopped"})
	_, err := h.m.Stop(ctx, "was-stopped")
	require.NoError(t, err)
	h.m.Close()
	h.rt.Kill(h.handle("dies"), "exited: code 1")

	// A create interrupted after its spawn: on disk with creating=true.
	crashed := h.rt.Spawn(driver.Spec{SandboxID: "half", Root: h.root})
	require.NoError(t, os.Mkdir(filepath.Join(h.root, "half"), 0o700))
	writeRecord(t, h.root, record{Version: 1, ID: "half", Name: "half", State: provider.StateStarting, Runtime: provider.RuntimeNative, Creating: true, Handle: &crashed})
	// A workload whose handle never reached disk.
	h.rt.Spawn(driver.Spec{SandboxID: "lost", Root: h.root})
	// A torn record.
	require.NoError(t, os.Mkdir(filepath.Join(h.root, "torn"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(h.root, "torn", recordFile), []byte(`{"id": "to`), 0o644))

	h.m = nil
	h.restart()
	assert.Equal(t, provider.StateStarted, h.get("lives").State)
	dead := h.get("dies")
	assert.Equal(t, provider.StateStopped, dead.State)
	assert.Equal(t, reasonGone, dead.ErrorReason)
	assert.Equal(t, provider.StateStopped, h.get("was-stopped").State)
	_, err = h.m.Get(ctx, "half")
	assert.Equal(t, provider.NotFound, provider.Code(err))
	assert.NoDirExists(t, filepath.Join(h.root, "half"))
	assert.Equal(t, 1, h.rt.Running(), "only the adopted workload runs: the half-created one and the orphan are gone")
	torn := h.get("torn")
	assert.Equal(t, provider.StateError, torn.State, "a torn record is shown, never moved or deleted")
	assert.Contains(t, torn.ErrorReason, filepath.Join(h.root, "torn", recordFile))
	assert.FileExists(t, filepath.Join(h.root, "torn", recordFile))

	// The adopted workload is still watched.
	h.rt.Kill(h.handle("lives"), "killed: signal SIGKILL")
	h.eventually(func() bool { return h.get("lives").State == provider.StateStopped }, "adopted exit noticed")

	s := h.create(provider.CreateRequest{})
	assert.NotEqual(t, 0, s.Port)
}

func writeRecord(t *testing.T, root string, r record) {
	t.Helper()
	data, err := json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, r.ID, recordFile), data, 0o644))
}

func itoa(i int) string { return strconv.Itoa(i) }

type recordingHook struct {
	mu     sync.Mutex
	exited []string
	refuse bool
}

func (h *recordingHook) BeforeSpawn(ctx context.Context, spec *driver.Spec) error {
	if h.refuse {
		return errors.New("no spawning today")
	}
	spec.Env["FROM_HOOK"] = "1"
	spec.Command = append([]string{"wrapper"}, spec.Command...)
	return nil
}

func (h *recordingHook) AfterExit(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.exited = append(h.exited, id)
}

func (h *recordingHook) exits() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.exited...)
}

func TestLaunchHook(t *testing.T) {
	hook := &recordingHook{}
	h := newHarness(t, func(o *Options) { o.LaunchHook = hook })
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "hooked"})
	spec := h.rt.Specs()[0]
	assert.Equal(t, []string{"wrapper", "workload"}, spec.Command)
	assert.Equal(t, "1", spec.Env["FROM_HOOK"])

	_, err := h.m.Stop(ctx, "hooked")
	require.NoError(t, err)
	assert.Equal(t, []string{"hooked"}, hook.exits(), "cleanup after a stop")
	_, err = h.m.Start(ctx, "hooked")
	require.NoError(t, err)
	h.rt.Kill(h.handle("hooked"), "exited: code 0")
	h.eventually(func() bool { return len(hook.exits()) == 2 }, "cleanup after an exit nobody asked for")

	hook.refuse = true
	_, err = h.m.Create(ctx, provider.CreateRequest{ID: "refused"})
	assert.Equal(t, provider.CreateFailed, provider.Code(err))
	assert.NoDirExists(t, filepath.Join(h.root, "refused"))
}

func TestDaemonsOnOneMachineNeverShareAPort(t *testing.T) {
	lockDir := t.TempDir()
	a := newHarness(t, func(o *Options) { o.PortMin, o.PortMax, o.PortLockDir = 14400, 14401, lockDir })
	b := newHarness(t, func(o *Options) { o.PortMin, o.PortMax, o.PortLockDir = 14400, 14401, lockDir })
	sa := a.create(provider.CreateRequest{})
	sb := b.create(provider.CreateRequest{})
	assert.NotEqual(t, sa.Port, sb.Port, "two managers (two roots) coordinate through the lock directory")
	_, err := a.m.Create(context.Background(), provider.CreateRequest{})
	assert.Equal(t, provider.ResourceExhausted, provider.Code(err), "the other daemon's port is not free")

	_, err = b.m.Stop(context.Background(), sb.ID)
	require.NoError(t, err)
	s, err := a.m.Create(context.Background(), provider.CreateRequest{})
	require.NoError(t, err, "a stopped sandbox's port is free for everyone")
	assert.Equal(t, sb.Port, s.Port)
}

func TestDeleteWhoseKillFailsFinishesOnTheRetry(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "doomed"})
	h.rt.FailStop(errors.New("operation not permitted"))
	require.Error(t, h.m.Delete(ctx, "doomed"))
	assert.Equal(t, provider.StateStopping, h.get("doomed").State, "still there, and says why")

	h.rt.FailStop(nil)
	h.clk.Advance(killRetry)
	h.eventually(func() bool {
		_, err := h.m.Get(ctx, "doomed")
		return provider.IsNotFound(err)
	}, "the retry finishes the delete the client asked for")
	assert.NoDirExists(t, filepath.Join(h.root, "doomed"))
	assert.Zero(t, h.rt.Running())
}

func TestRehydrateFinishesInterruptedStopsAndDeletes(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"auto", "del-stopping", "del-stopped"} {
		h.create(provider.CreateRequest{ID: id})
	}
	h.m.Close()
	// What a crash leaves: a stop under way for the reaper, a delete under
	// way, and a delete that stopped the workload but never removed the dir.
	rewrite := func(id string, fn func(r *record)) {
		data, err := os.ReadFile(filepath.Join(h.root, id, recordFile))
		require.NoError(t, err)
		var r record
		require.NoError(t, json.Unmarshal(data, &r))
		fn(&r)
		writeRecord(t, h.root, r)
	}
	rewrite("auto", func(r *record) {
		r.State, r.StopReason, r.ErrorReason = provider.StateStopping, provider.ErrorReasonAutoStopped, "kill failed: EPERM"
	})
	rewrite("del-stopping", func(r *record) { r.State, r.StopReason = provider.StateStopping, reasonDeleted })
	h.rt.Kill(h.handle("del-stopped"), "killed: signal SIGTERM")
	rewrite("del-stopped", func(r *record) { r.State, r.ErrorReason = provider.StateStopped, reasonDeleted })

	h.m = nil
	h.restart()
	s := h.get("auto")
	assert.Equal(t, provider.StateStopped, s.State)
	assert.Equal(t, provider.ErrorReasonAutoStopped, s.ErrorReason, "the stop keeps the reason it was asked for")
	for _, id := range []string{"del-stopping", "del-stopped"} {
		_, err := h.m.Get(context.Background(), id)
		assert.True(t, provider.IsNotFound(err), id)
		assert.NoDirExists(t, filepath.Join(h.root, id))
	}
	assert.Zero(t, h.rt.Running())
}

func TestNothingOfASandboxIsAnnouncedAfterItsDeletion(t *testing.T) {
	var mu sync.Mutex
	var events []provider.Event
	h := newHarness(t, func(o *Options) {
		o.OnEvent = func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, provider.Event{Type: e.Type, Source: e.Source})
		}
	})
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "busy"})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					_ = h.m.RefreshActivity(ctx, "busy")
				}
			}
		}()
	}
	require.NoError(t, h.m.Delete(ctx, "busy"))
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, events)
	assert.Equal(t, provider.EventDeleted, events[len(events)-1].Type, "a refresh racing the delete is never announced after it")
}

// A deleted event says the sandbox was deleted, whatever had stopped it.
func TestDeletedEventSaysDeleted(t *testing.T) {
	var mu sync.Mutex
	reasons := map[string]string{}
	h := newHarness(t, func(o *Options) {
		o.OnEvent = func(e Event) {
			if e.Type == provider.EventDeleted {
				mu.Lock()
				defer mu.Unlock()
				reasons[e.Sandbox.ID] = e.Sandbox.ErrorReason
			}
		}
	})
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "running"})
	h.create(provider.CreateRequest{ID: "parked"})
	_, err := h.m.StopWithReason(ctx, "parked", "pool: evicted")
	require.NoError(t, err)
	require.NoError(t, h.m.Delete(ctx, "running"))
	require.NoError(t, h.m.Delete(ctx, "parked"))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]string{"running": "deleted", "parked": "deleted"}, reasons)
}

func TestDeclaredPortsAreHeldAcrossARestart(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.PortMin, o.PortMax = 14300, 14303
		o.PortLockDir = t.TempDir()
		o.Snapshots["web"] = Snapshot{Command: []string{"web"}, Ready: "none", Ports: []int{3000}}
	})
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "a", Snapshot: "web"})
	before, err := h.m.PreviewURL(ctx, "a", 3000)
	require.NoError(t, err)
	h.restart()
	after, err := h.m.PreviewURL(ctx, "a", 3000)
	require.NoError(t, err)
	assert.Equal(t, before.URL, after.URL, "the adopted workload keeps its ports")

	h.create(provider.CreateRequest{ID: "b", Snapshot: "web"})
	_, err = h.m.Create(ctx, provider.CreateRequest{ID: "c", Snapshot: "web"})
	assert.Equal(t, provider.ResourceExhausted, provider.Code(err), "two sandboxes of two ports hold the four: %v", err)
	_, err = h.m.Stop(ctx, "a")
	require.NoError(t, err)
	h.create(provider.CreateRequest{ID: "c", Snapshot: "web"})
}

// A sandbox of a daemon before one identity (an id no new create may take,
// a name that is not its id) keeps working as it was: found by either, its
// name still taken, and never renamed.
func TestSandboxesBeforeOneIdentityKeepTheirNames(t *testing.T) {
	h := newHarness(t)
	h.m.Close()
	require.NoError(t, os.Mkdir(filepath.Join(h.root, "Old_Box.1"), 0o700))
	writeRecord(t, h.root, record{Version: 1, ID: "Old_Box.1", Name: "legacy", State: provider.StateStopped, Runtime: provider.RuntimeNative,
		Snapshot: DefaultSnapshot, ErrorReason: "stopped"})
	h.m = nil
	h.restart()
	ctx := context.Background()

	for _, idOrName := range []string{"Old_Box.1", "legacy"} {
		s := h.get(idOrName)
		assert.Equal(t, "Old_Box.1", s.ID)
		assert.Equal(t, "legacy", s.Name)
		assert.Equal(t, -1, s.AutoDeleteInterval, "a record before auto-delete never auto-deletes")
		assert.Nil(t, s.SessionID)
	}
	_, err := h.m.Create(ctx, provider.CreateRequest{Name: "legacy"})
	assert.Equal(t, provider.AlreadyExists, provider.Code(err))
	assert.Contains(t, provider.Message(err), `a sandbox named "legacy" already exists (its id is Old_Box.1)`)

	s, err := h.m.Start(ctx, "legacy")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, s.State)
	assert.Equal(t, "legacy", h.get("Old_Box.1").Name, "not renamed")
	require.NoError(t, h.m.Delete(ctx, "legacy"))
}
