package simulator

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// The tests below are the "Traps" of the Daytona fidelity notes, one each,
// numbered as there. Trap 19 (executeCommand) needs a workload and lives in
// runtime_test.go.

func slowProfile() Profile {
	p := InstantProfile()
	p.Name = "slow"
	p.Create = Range{Min: 2 * time.Second, Max: 2 * time.Second}
	p.Start = Range{Min: 2 * time.Second, Max: 2 * time.Second}
	p.Stop = Range{Min: 2 * time.Second, Max: 2 * time.Second}
	p.Destroy = Range{Min: 2 * time.Second, Max: 2 * time.Second}
	p.Archive = Range{Min: 2 * time.Second, Max: 2 * time.Second}
	p.Restore = Range{Min: 2 * time.Second, Max: 2 * time.Second}
	p.Build = Range{Min: 2 * time.Second, Max: 2 * time.Second}
	return p
}

func TestTrap01_StatusCodesDifferFromTheSpec(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	id := sb.Id
	tests := []struct {
		method, path string
		want         int
	}{
		{"POST", "/api/sandbox", http.StatusOK},
		{"GET", "/api/sandbox/" + id, http.StatusOK},
		{"POST", "/api/sandbox/" + id + "/autostop/30", http.StatusCreated},
		{"POST", "/api/sandbox/" + id + "/autoarchive/60", http.StatusCreated},
		{"POST", "/api/sandbox/" + id + "/autodelete/120", http.StatusCreated},
		{"POST", "/api/sandbox/" + id + "/public/true", http.StatusCreated},
		{"POST", "/api/sandbox/" + id + "/last-activity", http.StatusCreated},
		{"POST", "/api/sandbox/" + id + "/backup", http.StatusCreated},
		{"GET", "/api/sandbox/" + id + "/ports/3000/preview-url", http.StatusOK},
		{"GET", "/api/sandbox/" + id + "/ports/3000/signed-preview-url", http.StatusOK},
		{"POST", "/api/sandbox/" + id + "/ports/3000/signed-preview-url/abc/expire", http.StatusCreated},
		{"POST", "/api/sandbox/" + id + "/stop", http.StatusOK},
		{"POST", "/api/sandbox/" + id + "/archive", http.StatusOK},
		{"POST", "/api/sandbox/" + id + "/start", http.StatusOK},
		{"DELETE", "/api/sandbox/" + id, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+strings.ReplaceAll(tt.path, id, "{id}"), func(t *testing.T) {
			var body any
			if tt.method == "POST" && tt.path == "/api/sandbox" {
				body = map[string]any{}
			}
			code, b, _ := h.raw(tt.method, tt.path, body)
			assert.Equal(t, tt.want, code, string(b))
		})
	}
	// The api-client accepts the 201s as success.
	other := h.create(apiclient.CreateSandbox{})
	_, resp, err := h.api.SandboxAPI.SetAutoArchiveInterval(h.ctx, other.Id, 5).Execute()
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
}

func TestTrap02_CreateBlocksUpTo30sAndStartFailureIs400(t *testing.T) {
	t.Run("create waits for started", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
		ch := h.createAsync(apiclient.CreateSandbox{})
		h.clk.Advance(2 * time.Second)
		res := <-ch
		require.NoError(t, res.err)
		assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, res.sb.GetState())
	})
	t.Run("failure inside the window is 400", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
		h.sim.AddFault(Fault{Op: "createSandbox", FailStart: "no capacity on runner", Times: 1})
		ch := h.createAsync(apiclient.CreateSandbox{Name: ptr("doomed")})
		h.clk.Advance(2 * time.Second)
		res := <-ch
		code, msg := apiStatus(t, res.resp, res.err)
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Equal(t, "Sandbox failed to start: no capacity on runner", msg)
		got := h.get("doomed")
		assert.Equal(t, apiclient.SANDBOXSTATE_ERROR, got.GetState())
		assert.Equal(t, "no capacity on runner", got.GetErrorReason())
	})
	t.Run("image builds do not block", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Profile = DaytonaProfile() })
		sb := h.create(apiclient.CreateSandbox{BuildInfo: &apiclient.CreateBuildInfo{DockerfileContent: "FROM alpine"}})
		assert.Equal(t, apiclient.SANDBOXSTATE_PENDING_BUILD, sb.GetState())
		assert.Nil(t, sb.Snapshot)
		h.advanceUntil(time.Second, 2*time.Minute, func() bool { return h.get(sb.Id).GetState() == apiclient.SANDBOXSTATE_STARTED })
	})
}

func TestTrap03_ResponseStateIsDerived(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	api := h.api.SandboxAPI
	ch := h.createAsync(apiclient.CreateSandbox{})
	h.clk.Advance(2 * time.Second)
	sb := (<-ch).sb

	stopping, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPING, stopping.GetState())

	// List filters use raw states: the raw state is "stopping" now, not
	// "started".
	list, _, err := api.ListSandboxes(h.ctx).States([]apiclient.SandboxState{apiclient.SANDBOXSTATE_STOPPING}).Execute()
	require.NoError(t, err)
	assert.Len(t, list.Items, 1)
	h.clk.Advance(2 * time.Second)

	_, _, err = api.ArchiveSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.clk.Advance(2 * time.Second)
	archived, _, err := api.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_ARCHIVED, archived.GetState(), "start on archived answers archived")

	restoring := h.get(sb.Id)
	assert.Equal(t, apiclient.SANDBOXSTATE_RESTORING, restoring.GetState())

	ch = h.createAsync(apiclient.CreateSandbox{})
	h.clk.Advance(2 * time.Second)
	deleting := (<-ch).sb
	deleted, _, err := api.DeleteSandbox(h.ctx, deleting.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_DESTROYING, deleted.GetState())
}

// The derived-state table of Daytona's DTO, including the one row where the
// list item differs from the Sandbox.
func TestTrap03_DerivedStateTable(t *testing.T) {
	tests := []struct{ state, desired, get, list string }{
		{stStarted, dsStopped, stStopping, stStopping},
		{stStarted, dsDestroyed, stDestroying, stDestroying},
		{stStopped, dsStarted, stStarting, stStarting},
		{stStopped, dsDestroyed, stDestroying, stDestroying},
		{stStopped, dsArchived, stArchiving, stArchiving},
		{stUnknown, dsStarted, stCreating, stCreating},
		{stArchived, dsStarted, stArchived, stRestoring},
		{stStarted, dsStarted, stStarted, stStarted},
		{stError, dsStarted, stError, stError},
	}
	for _, tt := range tests {
		t.Run(tt.state+"/"+tt.desired, func(t *testing.T) {
			sb := &sandbox{State: tt.state, Desired: tt.desired}
			assert.Equal(t, tt.get, sb.displayState(false))
			assert.Equal(t, tt.list, sb.displayState(true))
		})
	}
}

func TestTrap04_StartOnStartedIsNoopStopOnStoppedIs400(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	api := h.api.SandboxAPI
	ch := h.createAsync(apiclient.CreateSandbox{})

	// DELETE while creating is 409.
	h.sim.mu.Lock()
	var id string
	for sb := range h.sim.rows.All() {
		id = sb.ID
	}
	h.sim.mu.Unlock()
	_, resp, err := api.DeleteSandbox(h.ctx, id).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, msgInProgress, msg)

	h.clk.Advance(2 * time.Second)
	sb := (<-ch).sb

	before := h.get(sb.Id)
	again, resp, err := api.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, again.GetState())
	assert.Equal(t, before.GetUpdatedAt(), again.GetUpdatedAt(), "start on started changes nothing")

	_, _, err = api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	for _, op := range []struct {
		name string
		do   func() (*http.Response, error)
	}{
		{"stop while stopping", func() (*http.Response, error) {
			_, r, e := api.StopSandbox(h.ctx, sb.Id).Execute()
			return r, e
		}},
		{"start while stopping", func() (*http.Response, error) {
			_, r, e := api.StartSandbox(h.ctx, sb.Id).Execute()
			return r, e
		}},
		{"delete while stopping", func() (*http.Response, error) {
			_, r, e := api.DeleteSandbox(h.ctx, sb.Id).Execute()
			return r, e
		}},
	} {
		t.Run(op.name, func(t *testing.T) {
			resp, err := op.do()
			code, msg := apiStatus(t, resp, err)
			assert.Equal(t, http.StatusConflict, code)
			assert.Equal(t, msgInProgress, msg)
		})
	}
	h.clk.Advance(2 * time.Second)

	_, resp, err = api.StopSandbox(h.ctx, sb.Id).Execute()
	code, msg = apiStatus(t, resp, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, msgNotStoppable, msg)

	// A second DELETE before the first one finishes is 409.
	_, _, err = api.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	_, resp, err = api.DeleteSandbox(h.ctx, sb.Id).Execute()
	code, msg = apiStatus(t, resp, err)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, msgInProgress, msg)
}

func TestTrap05_DeleteRenamesTheSandbox(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	api := h.api.SandboxAPI
	ch := h.createAsync(apiclient.CreateSandbox{Name: ptr("reuse-me")})
	h.clk.Advance(2 * time.Second)
	sb := (<-ch).sb

	deleted, _, err := api.DeleteSandbox(h.ctx, "reuse-me").Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_DESTROYING, deleted.GetState())
	assert.Equal(t, "DESTROYED_reuse-me_"+itoa(h.clk.Now().UnixMilli()), deleted.Name)

	_, resp, err := api.GetSandbox(h.ctx, "reuse-me").Execute()
	code, _ := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code, "the old name is gone at once")
	assert.Equal(t, apiclient.SANDBOXSTATE_DESTROYING, h.get(sb.Id).GetState(), "the id still answers")

	list, _, err := api.ListSandboxes(h.ctx).Execute()
	require.NoError(t, err)
	assert.Len(t, list.Items, 1, "the list keeps it until destroyed")

	ch = h.createAsync(apiclient.CreateSandbox{Name: ptr("reuse-me")})
	h.clk.Advance(2 * time.Second)
	res := <-ch
	require.NoError(t, res.err, "the name can be reused at once")
	assert.NotEqual(t, sb.Id, res.sb.Id)

	_, resp, err = api.GetSandbox(h.ctx, sb.Id).Execute()
	code, _ = apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code, "404 once destroyed")
	list, _, err = api.ListSandboxes(h.ctx).Execute()
	require.NoError(t, err)
	assert.Len(t, list.Items, 1)
}

func itoa(n int64) string { return json.Number(strings.TrimSpace(string(mustJSON(n)))).String() }

func TestTrap06_EphemeralStopMeansDelete(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	api := h.api.SandboxAPI
	ch := h.createAsync(apiclient.CreateSandbox{AutoDeleteInterval: ptr[int32](0)})
	h.clk.Advance(2 * time.Second)
	sb := (<-ch).sb

	stopped, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_DESTROYING, stopped.GetState())
	assert.Equal(t, apiclient.SANDBOXDESIREDSTATE_DESTROYED, stopped.GetDesiredState())
	h.clk.Advance(2 * time.Second)
	_, resp, err := api.GetSandbox(h.ctx, sb.Id).Execute()
	code, _ := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code)

	t.Run("archive is 400", func(t *testing.T) {
		ch := h.createAsync(apiclient.CreateSandbox{})
		h.clk.Advance(2 * time.Second)
		sb := (<-ch).sb
		_, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
		require.NoError(t, err)
		h.clk.Advance(2 * time.Second)
		_, _, err = api.SetAutoDeleteInterval(h.ctx, sb.Id, 0).Execute()
		require.NoError(t, err)
		_, resp, err := api.ArchiveSandbox(h.ctx, sb.Id).Execute()
		code, msg := apiStatus(t, resp, err)
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Equal(t, msgEphemeralArchive, msg)
	})
	t.Run("auto-stop deletes", func(t *testing.T) {
		ch := h.createAsync(apiclient.CreateSandbox{AutoDeleteInterval: ptr[int32](0), AutoStopInterval: ptr[int32](1)})
		h.clk.Advance(2 * time.Second)
		sb := (<-ch).sb
		h.clk.Advance(70 * time.Second)
		got, _, err := api.GetSandbox(h.ctx, sb.Id).Execute()
		if err == nil {
			assert.Equal(t, apiclient.SANDBOXSTATE_DESTROYING, got.GetState())
		}
		h.clk.Advance(2 * time.Second)
		_, resp, err := api.GetSandbox(h.ctx, sb.Id).Execute()
		code, _ := apiStatus(t, resp, err)
		assert.Equal(t, http.StatusNotFound, code)
	})
}

func TestTrap07_ReplaceLabelsReturnsTheWholeSandbox(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{Labels: &map[string]string{"a": "1"}})
	code, body, _ := h.raw("PUT", "/api/sandbox/"+sb.Id+"/labels", map[string]any{"labels": map[string]string{"b": "2"}})
	require.Equal(t, http.StatusOK, code)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, sb.Id, got["id"])
	assert.Equal(t, "started", got["state"])
	assert.Equal(t, map[string]any{"b": "2"}, got["labels"], "labels are replaced, not merged")

	// The api-client, expecting SandboxLabels, still decodes it.
	labels, _, err := h.api.SandboxAPI.ReplaceLabels(h.ctx, sb.Id).SandboxLabels(apiclient.SandboxLabels{Labels: map[string]string{"c": "3"}}).Execute()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"c": "3"}, labels.Labels)
}

func TestTrap08_LabelFilterIsContainment(t *testing.T) {
	h := newHarness(t)
	a := h.create(apiclient.CreateSandbox{Labels: &map[string]string{"code-toolbox-language": "python", "team": "a", "env": "ci"}})
	b := h.create(apiclient.CreateSandbox{Labels: &map[string]string{"code-toolbox-language": "typescript", "team": "a"}})
	h.create(apiclient.CreateSandbox{Labels: &map[string]string{"code-toolbox-language": "python", "team": "b"}})
	tests := []struct {
		filter string
		want   []string
	}{
		{`{"team":"a"}`, []string{a.Id, b.Id}},
		{`{"team":"a","env":"ci"}`, []string{a.Id}},
		{`{"team":"a","env":"prod"}`, nil},
		{`{"code-toolbox-language":"typescript"}`, []string{b.Id}},
		{`{}`, nil}, // everything: checked by count below
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			list, _, err := h.api.SandboxAPI.ListSandboxes(h.ctx).Labels(tt.filter).Execute()
			require.NoError(t, err)
			if tt.filter == `{}` {
				assert.Len(t, list.Items, 3)
				return
			}
			var ids []string
			for _, it := range list.Items {
				ids = append(ids, it.Id)
			}
			assert.ElementsMatch(t, tt.want, ids)
		})
	}
	code, body, _ := h.raw("GET", "/api/sandbox?labels=%7Bnot-json", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "Invalid labels JSON format", h.nestError(body).Message)
}

func TestTrap09_OnlyRealActivityResetsTheAutoStopClock(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{})
	created := sb.GetLastActivityAt()

	h.clk.Advance(time.Minute)
	h.get(sb.Id)
	_, _, err := api.ListSandboxes(h.ctx).Execute()
	require.NoError(t, err)
	_, _, err = api.SetAutoArchiveInterval(h.ctx, sb.Id, 100).Execute()
	require.NoError(t, err)
	_, _, err = api.UpdatePublicStatus(h.ctx, sb.Id, true).Execute()
	require.NoError(t, err)
	_, _, err = api.GetPortPreviewUrl(h.ctx, sb.Id, 8080).Execute()
	require.NoError(t, err)
	assert.Equal(t, created, h.get(sb.Id).GetLastActivityAt(), "reads and setters are not activity")

	// Shortening the interval does not reset the clock: the idle sandbox
	// stops at the next 10 s tick.
	h.clk.Advance(time.Minute)
	_, _, err = api.SetAutostopInterval(h.ctx, sb.Id, 1).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(sb.Id).GetState())
	h.clk.Advance(10 * time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPED, h.get(sb.Id).GetState())

	// The state changes themselves are activity.
	assert.NotEqual(t, created, h.get(sb.Id).GetLastActivityAt())
}

func TestTrap10_ActivityUpdatesAreThrottled(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{})

	h.clk.Advance(time.Minute)
	_, err := api.UpdateLastActivity(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	first := h.get(sb.Id).GetLastActivityAt()
	assert.Equal(t, iso(h.clk.Now()), first)

	h.clk.Advance(3 * time.Second)
	_, err = api.UpdateLastActivity(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, first, h.get(sb.Id).GetLastActivityAt(), "a refresh within 5 s of the last one is dropped")

	h.clk.Advance(3 * time.Second)
	_, err = api.UpdateLastActivity(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, iso(h.clk.Now()), h.get(sb.Id).GetLastActivityAt())
}

func TestTrap11_AutoArchiveAndDeleteCountFromLastActivity(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{AutoArchiveInterval: ptr[int32](5), AutoStopInterval: ptr[int32](0)})
	h.clk.Advance(30 * time.Minute)
	_, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	stoppedAt := h.clk.Now()
	assert.Equal(t, iso(stoppedAt), h.get(sb.Id).GetLastActivityAt(), "reaching stopped is activity")

	// Four minutes later a refresh on the stopped sandbox postpones the
	// archive by another five.
	h.clk.Advance(4 * time.Minute)
	_, err = api.UpdateLastActivity(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.clk.Advance(2 * time.Minute)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPED, h.get(sb.Id).GetState(), "not archived 6 min after the stop")
	h.clk.Advance(3*time.Minute + 10*time.Second)
	assert.Equal(t, apiclient.SANDBOXSTATE_ARCHIVED, h.get(sb.Id).GetState())

	// Archived sandboxes are never auto-deleted.
	_, _, err = api.SetAutoDeleteInterval(h.ctx, sb.Id, 1).Execute()
	require.NoError(t, err)
	h.clk.Advance(10 * time.Minute)
	assert.Equal(t, apiclient.SANDBOXSTATE_ARCHIVED, h.get(sb.Id).GetState())

	t.Run("auto-delete", func(t *testing.T) {
		sb := h.create(apiclient.CreateSandbox{AutoDeleteInterval: ptr[int32](3), AutoStopInterval: ptr[int32](0)})
		_, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
		require.NoError(t, err)
		h.clk.Advance(2 * time.Minute)
		assert.Equal(t, apiclient.SANDBOXSTATE_STOPPED, h.get(sb.Id).GetState())
		h.clk.Advance(1*time.Minute + 10*time.Second)
		_, resp, err := api.GetSandbox(h.ctx, sb.Id).Execute()
		code, _ := apiStatus(t, resp, err)
		assert.Equal(t, http.StatusNotFound, code)
	})
}

func TestTrap12_AutoArchiveZeroMeansTheMaximum(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{AutoArchiveInterval: ptr[int32](0)})
	assert.EqualValues(t, 43200, sb.GetAutoArchiveInterval())
	for _, tt := range []struct{ set, want float32 }{{0, 43200}, {50000, 43200}, {60, 60}} {
		got, _, err := api.SetAutoArchiveInterval(h.ctx, sb.Id, tt.set).Execute()
		require.NoError(t, err)
		assert.EqualValues(t, tt.want, got.GetAutoArchiveInterval(), "set %v", tt.set)
	}
	_, resp, err := api.SetAutoArchiveInterval(h.ctx, sb.Id, -1).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "Auto-archive interval must be non-negative", msg)
}

// previewStatus calls a preview URL and returns the status. With the none
// backend an authorised request gets as far as the missing workload (503);
// an unauthorised one stops at 401 or 404.
func (h *harness) previewStatus(url, token string) int {
	h.t.Helper()
	req, err := http.NewRequest("GET", url+"/", nil)
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set(previewTokenHeader, token)
	}
	resp, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestTrap13_PreviewTokenRotatesOnStartSignedTokensDoNot(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{})
	link, _, err := api.GetPortPreviewUrl(h.ctx, sb.Id, 3000).Execute()
	require.NoError(t, err)
	signed, _, err := api.GetSignedPortPreviewUrl(h.ctx, sb.Id, 3000).Execute()
	require.NoError(t, err)
	assert.Len(t, signed.Token, 16)
	assert.EqualValues(t, 3000, signed.Port)

	assert.Equal(t, http.StatusServiceUnavailable, h.previewStatus(link.Url, link.Token), "the token opens the link")
	assert.Equal(t, http.StatusUnauthorized, h.previewStatus(link.Url, ""), "a private sandbox needs the token")
	assert.Equal(t, http.StatusUnauthorized, h.previewStatus(link.Url, signed.Token), "a signed token is not a preview token")
	assert.Equal(t, http.StatusServiceUnavailable, h.previewStatus(signed.Url, ""))
	forged := strings.Replace(signed.Url, signed.Token, link.Token, 1)
	assert.Equal(t, http.StatusNotFound, h.previewStatus(forged, ""), "a preview token is not a signed token")

	_, _, err = api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	_, _, err = api.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	link2, _, err := api.GetPortPreviewUrl(h.ctx, sb.Id, 3000).Execute()
	require.NoError(t, err)
	assert.NotEqual(t, link.Token, link2.Token, "the token rotates on start")
	assert.Equal(t, http.StatusUnauthorized, h.previewStatus(link2.Url, link.Token))
	assert.Equal(t, http.StatusServiceUnavailable, h.previewStatus(signed.Url, ""), "signed URLs survive the restart")

	h.clk.Advance(61 * time.Second)
	assert.Equal(t, http.StatusNotFound, h.previewStatus(signed.Url, ""), "signed URLs expire after 60 s by default")

	signed2, _, err := api.GetSignedPortPreviewUrl(h.ctx, sb.Id, 3000).ExpiresInSeconds(3600).Execute()
	require.NoError(t, err)
	_, err = api.ExpireSignedPortPreviewUrl(h.ctx, sb.Id, 3000, signed2.Token).Execute()
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, h.previewStatus(signed2.Url, ""))

	code, body, _ := h.raw("GET", "/api/sandbox/"+sb.Id+"/ports/70000/preview-url", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "Invalid port", h.nestError(body).Message)
	code, body, _ = h.raw("GET", "/api/sandbox/"+sb.Id+"/ports/3000/signed-preview-url?expiresInSeconds=90000", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "expiresInSeconds must be between 1 second and 24 hours", h.nestError(body).Message)
}

func TestTrap14_ToolboxProxyURLIsEverywhere(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	assert.Equal(t, h.srv.URL+"/toolbox", sb.ToolboxProxyUrl)
	assert.False(t, strings.HasSuffix(sb.ToolboxProxyUrl, "/"))
	list, _, err := h.api.SandboxAPI.ListSandboxes(h.ctx).Execute()
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, sb.ToolboxProxyUrl, list.Items[0].ToolboxProxyUrl)
	page, _, err := h.api.SandboxAPI.ListSandboxesPaginatedDeprecated(h.ctx).Execute()
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, sb.ToolboxProxyUrl, page.Items[0].ToolboxProxyUrl)
	tp, _, err := h.api.SandboxAPI.GetToolboxProxyUrl(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, sb.ToolboxProxyUrl, tp.Url)

	// The toolbox lives at {toolboxProxyUrl}/{id}/..., authenticated with the
	// API key. Without a workload (backend none) it answers 503.
	code, body, _ := h.raw("POST", "/toolbox/"+sb.Id+"/process/execute", map[string]any{"command": "true"})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	var gin wire.ErrorResponse
	require.NoError(t, json.Unmarshal(body, &gin))
	assert.Equal(t, "/toolbox/"+sb.Id+"/process/execute", gin.Path)
	assert.Equal(t, "POST", gin.Method)
}

func TestTrap15_NextCursorIsNullOnTheLastPage(t *testing.T) {
	h := newHarness(t)
	var want []string
	for i := 0; i < 5; i++ {
		want = append(want, h.create(apiclient.CreateSandbox{}).Id)
		h.clk.Advance(time.Second)
	}
	code, body, _ := h.raw("GET", "/api/sandbox?limit=10", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), `"nextCursor":null`)

	var got []string
	req := h.api.SandboxAPI.ListSandboxes(h.ctx).Limit(2)
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		list, _, err := req.Execute()
		require.NoError(t, err, "the Go client decodes every page, the last one too")
		for _, it := range list.Items {
			got = append(got, it.Id)
		}
		next := list.GetNextCursor()
		if next == "" {
			break
		}
		req = h.api.SandboxAPI.ListSandboxes(h.ctx).Limit(2).Cursor(next)
	}
	// Newest activity first.
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i]
	}
	assert.Equal(t, want, got)
}

func TestTrap16_AnotherOrgsSandboxIs404(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{Name: ptr("mine")})
	other := h.as("another-key")
	for _, ref := range []string{sb.Id, "mine"} {
		_, resp, err := h.api.SandboxAPI.GetSandbox(other, ref).Execute()
		code, msg := apiStatus(t, resp, err)
		assert.Equal(t, http.StatusNotFound, code)
		assert.Equal(t, "Sandbox with ID or name "+ref+" not found", msg)
	}
	_, resp, err := h.api.SandboxAPI.DeleteSandbox(other, sb.Id).Execute()
	code, _ := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code)
	list, _, err := h.api.SandboxAPI.ListSandboxes(other).Execute()
	require.NoError(t, err)
	assert.Empty(t, list.Items)
	// The other org may use the same name.
	_, _, err = h.api.SandboxAPI.CreateSandbox(other).CreateSandbox(apiclient.CreateSandbox{Name: ptr("mine")}).Execute()
	require.NoError(t, err)
}

func TestTrap17_401IsAlwaysInvalidCredentials(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.APIKeys = []string{testKey} })
	for _, tt := range []struct{ name, auth string }{
		{"missing", ""},
		{"malformed", "Token abc"},
		{"unknown key", "Bearer nope"},
		{"empty bearer", "Bearer "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", h.srv.URL+"/api/sandbox", nil)
			require.NoError(t, err)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := h.srv.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			var e nestBody
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			assert.Equal(t, "Invalid credentials", e.Message)
			assert.Equal(t, "Unauthorized", e.Error)
			assert.Equal(t, "/api/sandbox", e.Path)
		})
	}
	_, _, err := h.api.SandboxAPI.ListSandboxes(h.ctx).Execute()
	assert.NoError(t, err, "the configured key works")
}

func TestTrap18_RacingWritesCanConflict(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	h.sim.AddFault(Fault{Op: "replaceLabels", Status: http.StatusConflict, Message: msgModified, Times: 1})
	_, resp, err := h.api.SandboxAPI.ReplaceLabels(h.ctx, sb.Id).SandboxLabels(apiclient.SandboxLabels{Labels: map[string]string{"a": "b"}}).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "Sandbox was modified by another operation", msg)
	_, _, err = h.api.SandboxAPI.ReplaceLabels(h.ctx, sb.Id).SandboxLabels(apiclient.SandboxLabels{Labels: map[string]string{"a": "b"}}).Execute()
	assert.NoError(t, err, "a retry wins")
}

func TestTrap20_StopAcceptsForceFalse(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	code, body, _ := h.raw("POST", "/api/sandbox/"+sb.Id+"/stop?force=yes", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "Validation failed (boolean string is expected)", h.nestError(body).Message)
	code, body, _ = h.raw("POST", "/api/sandbox/"+sb.Id+"/stop?force=false", nil)
	assert.Equal(t, http.StatusOK, code, string(body))
}

func TestTrap21_BuildFailedIsAnErrorState(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	h.sim.AddFault(Fault{Op: "createSandbox", FailStart: "dockerfile: unknown instruction FRM", Times: 1})
	sb := h.create(apiclient.CreateSandbox{BuildInfo: &apiclient.CreateBuildInfo{DockerfileContent: "FRM alpine"}})
	assert.Equal(t, apiclient.SANDBOXSTATE_PENDING_BUILD, sb.GetState())
	h.clk.Advance(2 * time.Second)
	got := h.get(sb.Id)
	assert.Equal(t, apiclient.SANDBOXSTATE_BUILD_FAILED, got.GetState())
	assert.Equal(t, "dockerfile: unknown instruction FRM", got.GetErrorReason())
	_, resp, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, msgErrored, msg)

	// Errored sandboxes being deleted vanish from GET and from the list.
	_, _, err = h.api.SandboxAPI.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	_, resp, err = h.api.SandboxAPI.GetSandbox(h.ctx, sb.Id).Execute()
	code, _ = apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code)
}

func TestTrap22_WarmPoolCreateIsInstant(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Profile = slowProfile()
		c.WarmPool = 1
	})
	h.clk.Advance(time.Hour) // the pool sandbox starts and idles
	sb := h.create(apiclient.CreateSandbox{Name: ptr("warm")})
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), "no clock advance was needed")
	assert.Equal(t, iso(h.clk.Now()), sb.GetCreatedAt(), "createdAt is reset on takeover")
	assert.Equal(t, iso(h.clk.Now()), sb.GetLastActivityAt())

	// The pool refills; a create that does not fit the pool takes the slow path.
	ch := h.createAsync(apiclient.CreateSandbox{Env: &map[string]string{"X": "1"}})
	h.clk.Advance(2 * time.Second)
	res := <-ch
	require.NoError(t, res.err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, res.sb.GetState())
	list, _, err := h.api.SandboxAPI.ListSandboxes(h.ctx).Execute()
	require.NoError(t, err)
	assert.Len(t, list.Items, 2, "pool sandboxes are not listed")
}

func TestTrap23_CursorsAreOpaqueBase64JSON(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 3; i++ {
		h.create(apiclient.CreateSandbox{})
	}
	list, _, err := h.api.SandboxAPI.ListSandboxes(h.ctx).Limit(1).Sort(apiclient.SANDBOXLISTSORTFIELD_CREATED_AT).Execute()
	require.NoError(t, err)
	raw, err := base64.StdEncoding.DecodeString(list.GetNextCursor())
	require.NoError(t, err)
	var cur map[string]any
	require.NoError(t, json.Unmarshal(raw, &cur))
	assert.Contains(t, cur, "id")

	code, body, _ := h.raw("GET", "/api/sandbox?cursor=garbage", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "Invalid cursor provided: garbage", h.nestError(body).Message)
}

func TestTrap24_LastActivityByNameIsANoop(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{Name: ptr("named")})
	before := h.get(sb.Id).GetLastActivityAt()
	h.clk.Advance(time.Minute)
	resp, err := h.api.SandboxAPI.UpdateLastActivity(h.ctx, "named").Execute()
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, before, h.get(sb.Id).GetLastActivityAt(), "by name: 201 but nothing recorded")

	_, resp, err = h.api.SandboxAPI.GetToolboxProxyUrl(h.ctx, "named").Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "Sandbox with ID named not found", msg)
}

func TestTrap25_UnknownRoutesAndTheDashboard(t *testing.T) {
	h := newHarness(t)
	code, body, _ := h.raw("GET", "/api/nope", nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "Cannot GET /api/nope", h.nestError(body).Message)
	code, body, hdr := h.raw("GET", "/sandbox", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, hdr.Get("Content-Type"), "text/html")
	assert.Contains(t, string(body), "<html")
}
