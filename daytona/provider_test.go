package daytona

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/simulator"
)

func ptr[T any](v T) *T { return &v }

func TestLifecycleOnTheSimulator(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p := h.p

	sb, err := p.Create(ctx, provider.CreateRequest{
		Name:             "box",
		Labels:           map[string]string{"team": "a"},
		EnvVars:          map[string]string{"K": "v"},
		AutoStopInterval: ptr(5),
	})
	require.NoError(t, err)
	_, err = uuid.Parse(sb.ID)
	assert.NoError(t, err, "Daytona ids are UUIDs")
	assert.Equal(t, "box", sb.Name)
	assert.Equal(t, provider.StateStarted, sb.State)
	assert.Equal(t, map[string]string{"team": "a"}, sb.Labels)
	assert.Equal(t, 5, sb.AutoStopInterval)
	assert.Equal(t, "daytonaio/sandbox:0.6.0-slim", sb.Snapshot)
	assert.Empty(t, sb.Runtime, "Daytona's runtime is neither local one")
	assert.False(t, sb.CreatedAt.IsZero())
	assert.False(t, sb.LastActivityAt.IsZero())

	got, err := p.Get(ctx, "box")
	require.NoError(t, err)
	assert.Equal(t, sb.ID, got.ID, "get by name")

	_, err = p.Create(ctx, provider.CreateRequest{Name: "box"})
	assert.Equal(t, provider.AlreadyExists, provider.Code(err))
	assert.Equal(t, "Sandbox with name box already exists", provider.Message(err), "the server's message is kept")

	list, err := p.List(ctx, provider.ListOptions{Labels: map[string]string{"team": "a"}})
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, sb.ID, list[0].ID)
	list, err = p.List(ctx, provider.ListOptions{Labels: map[string]string{"team": "b"}})
	require.NoError(t, err)
	assert.Empty(t, list)

	stopped := drive(h.clk, func() *provider.Sandbox {
		s, err := p.Stop(ctx, sb.ID)
		require.NoError(t, err)
		return s
	})
	assert.Equal(t, provider.StateStopped, stopped.State, "stop waits for stopped")
	_, err = p.Stop(ctx, sb.ID)
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "Daytona refuses to stop a stopped sandbox")
	assert.Equal(t, "Sandbox is not in a stoppable state", provider.Message(err))
	_, err = p.PreviewURL(ctx, sb.ID, 3000)
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "no preview of a stopped sandbox")
	_, _, err = p.Toolbox(ctx, sb.ID)
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "no toolbox in a stopped sandbox")

	started := drive(h.clk, func() *provider.Sandbox {
		s, err := p.Start(ctx, "box")
		require.NoError(t, err)
		return s
	})
	assert.Equal(t, provider.StateStarted, started.State)
	assert.Equal(t, sb.ID, started.ID)

	before, err := p.Get(ctx, sb.ID)
	require.NoError(t, err)
	h.clk.Advance(time.Minute)
	require.NoError(t, p.RefreshActivity(ctx, "box"), "by name: resolved to the id, which Daytona needs")
	after, err := p.Get(ctx, sb.ID)
	require.NoError(t, err)
	assert.True(t, after.LastActivityAt.After(before.LastActivityAt), "refresh moved lastActivityAt")

	set, err := p.SetAutoStopInterval(ctx, sb.ID, 0)
	require.NoError(t, err)
	assert.Equal(t, 0, set.AutoStopInterval)
	assert.Equal(t, after.LastActivityAt, set.LastActivityAt, "a setter is not activity")
	_, err = p.SetAutoStopInterval(ctx, sb.ID, -1)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))

	preview, err := p.PreviewURL(ctx, sb.ID, 3000)
	require.NoError(t, err)
	assert.Contains(t, preview.URL, "/_preview/3000-", "a signed preview URL carries its token")
	assert.Empty(t, preview.Token, "so no header is needed")
	_, err = p.PreviewURL(ctx, sb.ID, 0)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err), "a Daytona sandbox has no port of its own")

	base, hdr, err := p.Toolbox(ctx, "box")
	require.NoError(t, err)
	assert.Equal(t, h.srv.URL+"/toolbox/"+sb.ID, base)
	assert.Equal(t, "Bearer "+testKey, hdr.Get("Authorization"))

	_, err = p.Resize(ctx, sb.ID, provider.ResizeRequest{CPU: 2})
	assert.NoError(t, err, "the simulator resizes, as Daytona does with its SANDBOX_RESIZE flag on")
	err = drive(h.clk, func() error {
		_, err := p.EntrypointLogs(ctx, sb.ID)
		return err
	})
	assert.Equal(t, provider.Unavailable, provider.Code(err), "a simulator without workloads has no toolbox to read logs from: %v", err)

	drive(h.clk, func() error {
		require.NoError(t, p.Delete(ctx, "box"))
		return nil
	})
	_, err = p.Get(ctx, sb.ID)
	assert.Equal(t, provider.NotFound, provider.Code(err), "delete waits until the sandbox is gone")
	assert.NoError(t, p.Delete(ctx, sb.ID), "deleting a missing sandbox is not an error")
	list, err = p.List(ctx, provider.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestCreateFailsFastWithTheErrorReason(t *testing.T) {
	h := newHarness(t)
	h.sim.AddFault(simulator.Fault{Op: "createSandbox", FailStart: "image pull failed"})
	_, err := h.p.Create(context.Background(), provider.CreateRequest{Name: "doomed"})
	assert.Equal(t, provider.CreateFailed, provider.Code(err))
	assert.Contains(t, provider.Message(err), "image pull failed")
	assert.Equal(t, []string{"createSandbox", "deleteSandbox"}, h.ops(), "the errored sandbox is rolled back")
	_, err = h.p.Get(context.Background(), "doomed")
	assert.Equal(t, provider.NotFound, provider.Code(err))
}

func TestListFollowsTheCursorOldestFirst(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 205; i++ {
		sb, err := h.p.Create(ctx, provider.CreateRequest{Labels: map[string]string{"batch": "x"}})
		require.NoError(t, err)
		ids = append(ids, sb.ID)
		h.clk.Advance(time.Millisecond)
	}
	list, err := h.p.List(ctx, provider.ListOptions{Labels: map[string]string{"batch": "x"}})
	require.NoError(t, err)
	require.Len(t, list, len(ids))
	for i, sb := range list {
		assert.Equal(t, ids[i], sb.ID)
	}
}

func TestStatus(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tests := []struct {
		name string
		p    *Provider
		code provider.ErrorCode
		msg  string
		auth provider.AuthState // the evidence's settled answer
	}{
		{"good key", h.p, "", "", provider.AuthAuthenticated},
		{"bad key", h.provider("wrong", nil), provider.Unauthenticated, EnvAPIKey, provider.AuthRequired},
		{"nothing answers", unreachable(t), provider.Unavailable, EnvAPIURL, provider.AuthConfigured},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.p.Status(ctx)
			assert.True(t, st.Configured)
			assert.Equal(t, "daytona", st.Provider)
			assert.Equal(t, tt.code == "", st.Authenticated)
			assert.Equal(t, tt.code, st.Code)
			assert.Contains(t, st.Message, tt.msg)
			assert.Equal(t, tt.auth, st.Auth.State, st.Auth.Why)
		})
	}

	// A transient failure after an answer keeps the settled answer.
	p := h.provider(testKey, nil)
	require.True(t, p.Status(ctx).OK())
	h.sim.AddFault(simulator.Fault{Op: "listSandboxes", Status: http.StatusServiceUnavailable})
	st := p.Status(ctx)
	assert.Equal(t, provider.Unavailable, st.Code)
	assert.Equal(t, provider.AuthAuthenticated, st.Auth.State, "a 503 says nothing about the key")
}

// unreachable is a provider of an address where nothing listens.
func unreachable(t *testing.T) *Provider {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	p, err := New(WithAPIKey("k"), WithAPIURL(addr+"/api"), WithRetries(0))
	require.NoError(t, err)
	return p
}

func TestInfo(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	info, err := h.provider(testKey, nil, WithMinute(time.Second)).Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, "daytona", info.Name)
	assert.Equal(t, "1s", info.Minute)
	assert.Contains(t, info.APIVersion, "0.190.0")

	p, err := New(WithAPIKey(testKey), WithAPIURL(h.srv.URL), WithClock(h.clk))
	require.NoError(t, err)
	_, err = p.Info(ctx)
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
	assert.Contains(t, provider.Message(err), "must end in /api")

	_, err = unreachable(t).Info(ctx)
	assert.Equal(t, provider.Unavailable, provider.Code(err))
}

func TestConfiguration(t *testing.T) {
	t.Setenv(EnvAPIKey, "")
	t.Setenv(EnvAPIURL, "")
	t.Setenv(envServerURL, "http://old.example/api")
	t.Setenv(EnvTarget, "eu")
	_, err := New(FromEnv())
	assert.Equal(t, provider.Unauthenticated, provider.Code(err), "no key")
	dp, err := New(WithAPIKey("k"), WithTarget("us"), FromEnv())
	require.NoError(t, err)
	assert.Equal(t, config{APIKey: "k", APIURL: "http://old.example/api", Target: "eu", Clock: dp.clk}, dp.cfg,
		"the deprecated URL variable still counts, and the environment overrides the options before FromEnv")
	dp, err = New(WithAPIKey("k"), FromEnv(), WithTarget("us"))
	require.NoError(t, err)
	assert.Equal(t, "us", dp.cfg.Target, "the options after FromEnv override the environment")

	_, err = provider.Open(context.Background(), "daytona://")
	assert.Equal(t, provider.Unauthenticated, provider.Code(err))
	assert.Contains(t, err.Error(), EnvAPIKey, "the error says what to set")

	t.Setenv(EnvAPIKey, "k")
	t.Setenv(EnvAPIURL, "http://127.0.0.1:4026/api/")
	p, err := provider.Open(context.Background(), "daytona")
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:4026/api", p.(*Provider).URL())

	t.Setenv(provider.EnvProvider, "daytona://127.0.0.1:4026/api")
	p, err = provider.Open(context.Background(), "")
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:4026/api", p.(*Provider).URL(), "a loopback host speaks plain http")

	_, err = New(WithAPIKey("k"), WithAPIURL("app.daytona.io"))
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
	assert.True(t, strings.Contains(err.Error(), EnvAPIURL))
}

func TestCreateRejectsWhatDaytonaDecides(t *testing.T) {
	h := newHarness(t)
	for name, req := range map[string]provider.CreateRequest{
		"id":       {ID: "mine"},
		"runtime":  {Runtime: provider.RuntimeDocker},
		"autostop": {AutoStopInterval: ptr(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.p.Create(context.Background(), req)
			assert.Equal(t, provider.InvalidArgument, provider.Code(err))
		})
	}
	assert.Empty(t, h.ops(), "nothing reached the server")
}

// TestResizeBehindItsFeatureFlag: a Daytona whose SANDBOX_RESIZE flag is
// off (its default) answers 404, which the provider reports as unsupported.
func TestResizeBehindItsFeatureFlag(t *testing.T) {
	h := newHarnessConfig(t, simulator.Config{DisableResize: true})
	ctx := context.Background()
	var sb *provider.Sandbox
	require.NoError(t, drive(h.clk, func() (err error) { sb, err = h.p.Create(ctx, provider.CreateRequest{}); return err }))
	_, err := h.p.Resize(ctx, sb.ID, provider.ResizeRequest{CPU: 2})
	assert.Equal(t, provider.Unsupported, provider.Code(err))
}

// The host's create body reaches Daytona whole, and the session a sandbox
// belongs to travels in its label both ways.
func TestCreateSendsTheHostsBody(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	session := "sess-1"
	_, err := h.p.Create(ctx, provider.CreateRequest{Name: "sized", CPU: 2, Memory: 2, Disk: 4})
	assert.Equal(t, provider.InvalidArgument, provider.Code(err), "resources reach Daytona, which takes them only with an image: %v", err)
	assert.Contains(t, provider.Message(err), "resources")
	sb, err := h.p.Create(ctx, provider.CreateRequest{
		Name: "host-body", SessionID: &session, Public: true,
		AutoDeleteInterval: ptr(30), AutoArchiveInterval: ptr(60), Labels: map[string]string{"team": "x"},
	})
	require.NoError(t, err)
	require.NotNil(t, sb.SessionID)
	assert.Equal(t, session, *sb.SessionID)
	_, err = h.p.Create(ctx, provider.CreateRequest{Name: "no-session", Labels: map[string]string{"team": "x"}})
	require.NoError(t, err)

	list, err := h.p.List(ctx, provider.ListOptions{SessionID: session})
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, sb.ID, list[0].ID)
	require.NotNil(t, list[0].SessionID)
	assert.Equal(t, session, *list[0].SessionID)

	req, err := http.NewRequest(http.MethodGet, h.srv.URL+"/api/sandbox/"+sb.ID, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var got struct {
		Public              bool              `json:"public"`
		AutoDeleteInterval  int               `json:"autoDeleteInterval"`
		AutoArchiveInterval int               `json:"autoArchiveInterval"`
		Labels              map[string]string `json:"labels"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	assert.True(t, got.Public)
	assert.Equal(t, []int{30, 60}, []int{got.AutoDeleteInterval, got.AutoArchiveInterval})
	assert.Equal(t, map[string]string{"team": "x", provider.LabelSession: session}, got.Labels)
}
