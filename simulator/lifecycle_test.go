package simulator

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/engine"
)

func TestLifecycleInstantProfile(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI

	sb := h.create(apiclient.CreateSandbox{
		Name:   ptr("life"),
		Labels: &map[string]string{"code-toolbox-language": "python", "team": "a"},
		Env:    &map[string]string{"A": "1"},
	})
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState())
	assert.Equal(t, "life", sb.Name)
	assert.Equal(t, "daytona", sb.User)
	assert.Equal(t, map[string]string{"A": "1"}, sb.Env)
	assert.Equal(t, "us", sb.Target)
	assert.EqualValues(t, 1, sb.Cpu)
	assert.EqualValues(t, 1, sb.Memory)
	assert.EqualValues(t, 3, sb.Disk)
	assert.EqualValues(t, 0, sb.Gpu)
	assert.EqualValues(t, 15, sb.GetAutoStopInterval())
	assert.EqualValues(t, 10080, sb.GetAutoArchiveInterval())
	assert.EqualValues(t, -1, sb.GetAutoDeleteInterval())
	assert.Equal(t, "None", sb.GetBackupState())
	assert.Equal(t, "container", sb.GetSandboxClass())
	assert.Equal(t, defaultSnapshot, sb.GetSnapshot())
	assert.Equal(t, h.srv.URL+"/toolbox", sb.ToolboxProxyUrl)
	assert.Equal(t, "2025-01-01T12:00:00.000Z", sb.GetCreatedAt())
	assert.NotEmpty(t, sb.GetLastActivityAt())

	got := h.get("life")
	assert.Equal(t, sb.Id, got.Id)

	stopped, _, err := api.StopSandbox(h.ctx, sb.Id).Force(false).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPING, stopped.GetState(), "stop answers before the stop lands")
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPED, h.get(sb.Id).GetState())

	started, _, err := api.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState())

	list, _, err := api.ListSandboxes(h.ctx).Labels(`{"team":"a"}`).Execute()
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, sb.Id, list.Items[0].Id)
	assert.False(t, list.NextCursor.IsSet() && list.NextCursor.Get() != nil, "nextCursor is null on the last page")

	withStop, resp, err := api.SetAutostopInterval(h.ctx, sb.Id, 0).Execute()
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.EqualValues(t, 0, withStop.GetAutoStopInterval())

	link, _, err := api.GetPortPreviewUrl(h.ctx, sb.Id, 3000).Execute()
	require.NoError(t, err)
	assert.Equal(t, h.srv.URL+"/_preview/3000-"+sb.Id, link.Url)
	assert.Len(t, link.Token, 32)

	deleted, _, err := api.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_DESTROYING, deleted.GetState())
	_, resp, err = api.GetSandbox(h.ctx, sb.Id).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "Sandbox with ID or name "+sb.Id+" not found", msg)
}

func TestLifecycleDaytonaProfileOnFakeClock(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = DaytonaProfile() })
	api := h.api.SandboxAPI

	res := <-func() <-chan createResult {
		ch := h.createAsync(apiclient.CreateSandbox{Name: ptr("slow")})
		h.clk.Advance(1700 * time.Millisecond)
		return ch
	}()
	require.NoError(t, res.err)
	sb := res.sb
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), "create holds until started")

	stopped, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPING, stopped.GetState())
	h.clk.Advance(300 * time.Millisecond)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPING, h.get(sb.Id).GetState(), "still stopping before the stop delay")
	h.clk.Advance(time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPED, h.get(sb.Id).GetState())

	archived, _, err := api.ArchiveSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_ARCHIVING, archived.GetState())
	h.clk.Advance(20 * time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_ARCHIVED, h.get(sb.Id).GetState())

	// Start from archived answers at once with "archived" (GET), while the
	// list says "restoring".
	restoring, _, err := api.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_ARCHIVED, restoring.GetState())
	assert.Equal(t, apiclient.SANDBOXSTATE_RESTORING, h.get(sb.Id).GetState(), "the raw state moved to restoring")
	h.clk.Advance(32 * time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_RESTORING, h.get(sb.Id).GetState(), "restore takes at least 33 s")
	h.clk.Advance(34 * time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(sb.Id).GetState())

	_, _, err = api.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_DESTROYING, h.get(sb.Id).GetState())
	h.clk.Advance(time.Second)
	_, resp, err := api.GetSandbox(h.ctx, sb.Id).Execute()
	code, _ := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code)
}

func TestStartFromStoppedTakesMeasuredTime(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Profile = InstantProfile()
		c.Profile.Start = DaytonaProfile().Start
	})
	sb := h.create(apiclient.CreateSandbox{})
	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)

	waiters := h.clk.Waiters()
	done := make(chan *apiclient.Sandbox, 1)
	go func() {
		s, _, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
		assert.NoError(t, err)
		done <- s
	}()
	require.NoError(t, h.clk.BlockUntilWaiters(t.Context(), waiters+2))
	h.clk.Advance(699 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("start answered before 0.7 s")
	default:
	}
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTING, h.get(sb.Id).GetState())
	h.clk.Advance(101 * time.Millisecond)
	started := <-done
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState())
}

func TestCreateHoldsAtMost30Seconds(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Profile = InstantProfile()
		c.Profile.Create = Range{Min: 45 * time.Second, Max: 45 * time.Second}
	})
	ch := h.createAsync(apiclient.CreateSandbox{})
	h.clk.Advance(30 * time.Second)
	res := <-ch
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusOK, res.resp.StatusCode)
	assert.Equal(t, apiclient.SANDBOXSTATE_CREATING, res.sb.GetState(), "after 30 s the latest derived state comes back")
	h.clk.Advance(15 * time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(res.sb.Id).GetState())
}

func TestCreateResponseOmitsNullsThatGetShows(t *testing.T) {
	h := newHarness(t)
	code, body, _ := h.raw("POST", "/api/sandbox", map[string]any{})
	require.Equal(t, http.StatusOK, code)
	var created map[string]any
	require.NoError(t, json.Unmarshal(body, &created))
	assert.NotContains(t, created, "errorReason")
	assert.NotContains(t, created, "networkAllowList")

	code, body, _ = h.raw("GET", "/api/sandbox/"+created["id"].(string), nil)
	require.Equal(t, http.StatusOK, code)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Contains(t, got, "errorReason")
	assert.Nil(t, got["errorReason"])
	for _, k := range []string{"id", "organizationId", "name", "user", "env", "labels", "public", "networkBlockAll",
		"target", "cpu", "gpu", "memory", "disk", "toolboxProxyUrl", "state", "desiredState", "autoStopInterval",
		"autoArchiveInterval", "autoDeleteInterval", "createdAt", "updatedAt", "lastActivityAt", "backupState",
		"recoverable", "sandboxClass", "snapshot", "volumes"} {
		assert.Contains(t, got, k)
	}
	assert.Equal(t, map[string]any{}, got["labels"], "labels are never null")
	assert.Equal(t, map[string]any{}, got["env"], "env is never null")
}

func TestHealthIsPublic(t *testing.T) {
	h := newHarness(t)
	code, body, _ := h.rawAs("", "GET", "/api/health", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"status":"ok"}`, string(body))
}

func TestMinuteShrinksIntervalsAndJobs(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Minute = time.Second })
	sb := h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](1)})
	// One interval minute is a second; the 10 s job runs every 10/60 s.
	h.clk.Advance(time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(sb.Id).GetState())
	h.clk.Advance(200 * time.Millisecond)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPED, h.get(sb.Id).GetState())
}

func TestDeprecatedPaginatedList(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, h.create(apiclient.CreateSandbox{Labels: &map[string]string{"n": "x"}}).Id)
		h.clk.Advance(time.Second)
	}
	page, _, err := h.api.SandboxAPI.ListSandboxesPaginatedDeprecated(h.ctx).Page(2).Limit(2).Execute()
	require.NoError(t, err)
	assert.EqualValues(t, 5, page.Total)
	assert.EqualValues(t, 2, page.Page)
	assert.EqualValues(t, 3, page.TotalPages)
	require.Len(t, page.Items, 2)
	// createdAt descending by default: the third and second newest.
	assert.Equal(t, ids[2], page.Items[0].Id)
	assert.Equal(t, ids[1], page.Items[1].Id)
	assert.NotNil(t, page.Items[0].Env, "items are full Sandboxes")
}

func TestListFilters(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Profile = InstantProfile()
		c.Profile.Destroy = Range{Min: time.Second, Max: time.Second}
	})
	api := h.api.SandboxAPI
	a := h.create(apiclient.CreateSandbox{Name: ptr("alpha-1")})
	h.clk.Advance(time.Second)
	b := h.create(apiclient.CreateSandbox{Name: ptr("beta-1"), Public: ptr(true)})
	_, _, err := api.StopSandbox(h.ctx, b.Id).Execute()
	require.NoError(t, err)
	h.sim.AddFault(Fault{Op: "startSandbox", FailStart: "boom", Times: 1})
	_, _, err = api.StartSandbox(h.ctx, b.Id).Execute()
	require.Error(t, err)
	_, _, err = api.DeleteSandbox(h.ctx, b.Id).Execute()
	require.NoError(t, err)

	names := func(req apiclient.SandboxAPIListSandboxesRequest) []string {
		t.Helper()
		list, _, err := req.Execute()
		require.NoError(t, err)
		var out []string
		for _, it := range list.Items {
			out = append(out, it.Name)
		}
		return out
	}
	assert.Equal(t, []string{"alpha-1"}, names(api.ListSandboxes(h.ctx).Name("ALPHA")), "name is a case-insensitive prefix")
	assert.Equal(t, []string{"alpha-1"}, names(api.ListSandboxes(h.ctx).Id(a.Id[:8])))
	assert.Equal(t, []string{"alpha-1"}, names(api.ListSandboxes(h.ctx)), "errored sandboxes being deleted are hidden")
	assert.Len(t, names(api.ListSandboxes(h.ctx).IncludeErroredDeleted(true)), 2)
	assert.Len(t, names(api.ListSandboxes(h.ctx).IncludeErroredDeleted(true).IsPublic(true)), 1)
	assert.Equal(t, []string{"alpha-1"}, names(api.ListSandboxes(h.ctx).Sort(apiclient.SANDBOXLISTSORTFIELD_NAME).Order(apiclient.SANDBOXLISTSORTDIRECTION_ASC).MinCpu(1).MaxCpu(1)))
	assert.Empty(t, names(api.ListSandboxes(h.ctx).MinCpu(2)))

	h.clk.Advance(time.Second)
	assert.Len(t, names(api.ListSandboxes(h.ctx).IncludeErroredDeleted(true)), 1, "destroyed rows are never listed")
}

// The auto-pause lifecycle as a conformance scenario would run it, through
// the API only and on the fake clock: an idle sandbox with a one-minute
// auto-pause is paused within the interval and one cron period, reads do
// not postpone it, the pause keeps it (not stopped, not archived), and a
// start resumes it, its interval kept.
func TestScenarioIdleAutoPauses(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = InstantProfile() })
	sb := h.createRaw(map[string]any{"name": "idle-pause", "autoPauseInterval": 1})
	require.Equal(t, "started", sb.State)
	for range 6 { // reads every 10 s for a minute: none is activity
		assert.Equal(t, "started", h.intervalsOf(sb.ID).State)
		code, _, _ := h.raw("GET", "/api/sandbox", nil)
		require.Equal(t, http.StatusOK, code)
		h.clk.Advance(10 * time.Second)
	}
	h.clk.Advance(10 * time.Second) // the cron period after the interval
	got := h.get(sb.ID)
	assert.Equal(t, apiclient.SANDBOXSTATE_PAUSED, got.GetState(), "auto-paused within its interval and a cron period")
	assert.Equal(t, apiclient.SANDBOXDESIREDSTATE_PAUSED, got.GetDesiredState())
	advanceBy(h, 24*time.Hour)
	assert.Equal(t, "paused", h.intervalsOf(sb.ID).State, "a paused sandbox is neither auto-stopped nor archived")

	started, _, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.ID).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState())
	assert.Equal(t, 1, h.intervalsOf(sb.ID).AutoPauseInterval, "the resume keeps the interval")
	advanceBy(h, time.Minute+engine.JobPeriod+time.Second)
	assert.Equal(t, "paused", h.intervalsOf(sb.ID).State, "and it pauses again once idle")
}

// The TTL lifecycle as a conformance scenario would run it: a sandbox with
// a two-minute TTL and a one-minute auto-stop auto-stops first, and the
// TTL still destroys it, stopped, at its deadline: gone from get and list.
func TestScenarioTTLOutlivesAutoStop(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = InstantProfile() })
	sb := h.createRaw(map[string]any{"name": "ttl-stop", "ttlMinutes": 2, "autoStopInterval": 1})
	advanceBy(h, time.Minute+engine.JobPeriod+time.Second)
	assert.Equal(t, "stopped", h.intervalsOf(sb.ID).State, "auto-stopped before its TTL")
	advanceBy(h, time.Minute+engine.JobPeriod)
	code, body, _ := h.raw("GET", "/api/sandbox/"+sb.ID, nil)
	assert.Equal(t, http.StatusNotFound, code, "destroyed at its TTL though stopped: %s", body)
	code, body, _ = h.raw("GET", "/api/sandbox", nil)
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, string(body), sb.ID, "the list no longer shows it")
}
