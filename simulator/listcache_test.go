package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listedItem lists the test organization's sandboxes and returns the item
// of id, raw and decoded.
func (h *harness) listedItem(id string) (json.RawMessage, map[string]any) {
	h.t.Helper()
	code, body, _ := h.raw("GET", "/api/sandbox?limit=200", nil)
	require.Equal(h.t, http.StatusOK, code, string(body))
	var page struct{ Items []json.RawMessage }
	require.NoError(h.t, json.Unmarshal(body, &page))
	for _, raw := range page.Items {
		var item map[string]any
		require.NoError(h.t, json.Unmarshal(raw, &item))
		if item["id"] == id {
			return raw, item
		}
	}
	h.t.Fatalf("sandbox %s is not listed", id)
	return nil, nil
}

// freshListItem encodes the item of id from the row as it is now, without
// the cache.
func (h *harness) freshListItem(id, toolboxProxyURL string) string {
	h.t.Helper()
	h.sim.mu.RLock()
	defer h.sim.mu.RUnlock()
	sb := h.sim.rows.Get(id)
	require.NotNil(h.t, sb)
	return string(appendListItem(nil, sb, toolboxProxyURL))
}

// TestListItemCacheFollowsEveryUpdate lists a sandbox, so that its item is
// cached, then updates it through the API (or lets a job do it), lists it
// again and checks that the item shows the update and is byte for byte
// what the row encodes to afresh.
func TestListItemCacheFollowsEveryUpdate(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{Labels: &map[string]string{"team": "a"}})
	id := sb.Id
	post := func(path string, body any) func() {
		return func() {
			code, out, _ := h.raw("POST", "/api/sandbox/"+id+path, body)
			require.Less(t, code, 300, string(out))
		}
	}
	steps := []struct {
		name   string
		update func()
		field  string // the member of the item the update changes
		want   any    // its value after the update, nil for "any other than before"
	}{
		{"stop", post("/stop", nil), "state", "stopped"},
		{"resize", post("/resize", map[string]int{"cpu": 2, "memory": 2, "disk": 5}), "cpu", 2.0},
		{"archive", post("/archive", nil), "state", "archived"},
		{"start", post("/start", nil), "state", "started"},
		{"labels", func() {
			code, out, _ := h.raw("PUT", "/api/sandbox/"+id+"/labels", map[string]any{"labels": map[string]string{"team": "b", "x": "1"}})
			require.Equal(t, http.StatusOK, code, string(out))
		}, "labels", map[string]any{"team": "b", "x": "1"}},
		{"activity refresh", func() {
			h.clk.Advance(2 * time.Minute) // past the throttle
			post("/last-activity", nil)()
		}, "lastActivityAt", nil},
		{"auto-stop interval", post("/autostop/7", nil), "autoStopInterval", 7.0},
		{"auto-archive interval", post("/autoarchive/60", nil), "autoArchiveInterval", 60.0},
		{"auto-delete interval", post("/autodelete/120", nil), "autoDeleteInterval", 120.0},
		{"public", post("/public/true", nil), "public", true},
		{"auto-stop job", func() {
			h.advanceUntil(10*time.Second, 10*time.Minute, func() bool { return h.get(id).GetState() == apiclient.SANDBOXSTATE_STOPPED })
		}, "state", "stopped"},
		{"auto-archive job sets the desired state", func() {
			h.advanceUntil(10*time.Second, 2*time.Hour, func() bool { return h.get(id).GetDesiredState() == apiclient.SANDBOXDESIREDSTATE_ARCHIVED })
		}, "desiredState", "archived"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			_, before := h.listedItem(id) // fills the cache
			st.update()
			raw, after := h.listedItem(id)
			if st.want == nil {
				assert.NotEqual(t, before[st.field], after[st.field], "%s did not change", st.field)
			} else {
				require.NotEqual(t, st.want, before[st.field], "the step must change %s", st.field)
				assert.Equal(t, st.want, after[st.field])
			}
			tbx, _ := after["toolboxProxyUrl"].(string)
			assert.Equal(t, h.freshListItem(id, tbx), string(raw))
		})
	}
}

// TestListItemCacheSeesEveryShownValue changes each value a list item
// shows, as a writer does (under the lock, in place where the value is a
// map or behind a pointer), and checks that the cached item is encoded
// again. Every field of listFields must have a case here.
func TestListItemCacheSeesEveryShownValue(t *testing.T) {
	sim, err := New(Config{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	str := func(s string) *string { return &s }
	at := time.Date(2025, 3, 4, 5, 6, 7, 8e6, time.UTC)
	base := func() *sandbox {
		return &sandbox{ID: "id-1", OrgID: "org", Name: "web", Target: "us", State: stStarted, Desired: dsStarted,
			User: "daytona", CPU: 1, Memory: 1, Disk: 3, BackupState: "None", AutoStop: 15, AutoArchive: 10080,
			AutoDelete: -1, CreatedAt: at, UpdatedAt: at, LastActivity: at, Labels: map[string]string{"a": "1"},
			RunnerID: str("r"), Snapshot: str("s"), ErrorReason: str("e"), DaemonVersion: str("v"), GPUType: str("g")}
	}
	cases := []struct {
		field  string // the listFields field the change shows in; "" for labels
		change func(sb *sandbox)
	}{
		{"id", func(sb *sandbox) { sb.ID = "id-2" }},
		{"orgID", func(sb *sandbox) { sb.OrgID = "org-2" }},
		{"name", func(sb *sandbox) { sb.Name = "api" }},
		{"target", func(sb *sandbox) { sb.Target = "eu" }},
		{"runnerID", func(sb *sandbox) { *sb.RunnerID = "r2" }},
		{"runnerID", func(sb *sandbox) { sb.RunnerID = nil }},
		{"snapshot", func(sb *sandbox) { sb.Snapshot = str("s2") }},
		{"errorReason", func(sb *sandbox) { *sb.ErrorReason = "e2" }},
		{"daemonVersion", func(sb *sandbox) { sb.DaemonVersion = nil }},
		{"gpuType", func(sb *sandbox) { *sb.GPUType = "g2" }},
		{"state", func(sb *sandbox) { sb.State = stStopped }},
		{"state", func(sb *sandbox) { sb.Desired = dsStopped }}, // shown as stopping
		{"desired", func(sb *sandbox) { sb.Desired = dsDestroyed }},
		{"user", func(sb *sandbox) { sb.User = "root" }},
		{"backupState", func(sb *sandbox) { sb.BackupState = "Completed" }},
		{"recoverable", func(sb *sandbox) { sb.Recoverable = true }},
		{"public", func(sb *sandbox) { sb.Public = true }},
		{"networkBlockAll", func(sb *sandbox) { sb.NetworkBlockAll = true }},
		{"networkAllowList", func(sb *sandbox) { sb.NetworkAllowList = str("10.0.0.0/8") }},
		{"domainAllowList", func(sb *sandbox) { sb.DomainAllowList = str("example.com") }},
		{"cpu", func(sb *sandbox) { sb.CPU = 2 }},
		{"gpu", func(sb *sandbox) { sb.GPU = 1 }},
		{"memory", func(sb *sandbox) { sb.Memory = 4 }},
		{"disk", func(sb *sandbox) { sb.Disk = 10 }},
		{"autoStop", func(sb *sandbox) { sb.AutoStop = 0 }},
		{"autoArchive", func(sb *sandbox) { sb.AutoArchive = 60 }},
		{"autoDelete", func(sb *sandbox) { sb.AutoDelete = 0 }},
		{"autoPause", func(sb *sandbox) { sb.AutoPause = 30 }},
		{"createdAt", func(sb *sandbox) { sb.CreatedAt = sb.CreatedAt.Add(time.Millisecond) }},
		{"updatedAt", func(sb *sandbox) { sb.UpdatedAt = sb.UpdatedAt.Add(time.Second) }},
		{"lastActivity", func(sb *sandbox) { sb.LastActivity = sb.LastActivity.Add(time.Hour) }},
		{"autoDestroyAt", func(sb *sandbox) { sb.AutoDestroyAt = &at }},
		{"", func(sb *sandbox) { sb.Labels["a"] = "2" }},
		{"", func(sb *sandbox) { sb.Labels["b"] = "1" }},
		{"", func(sb *sandbox) { delete(sb.Labels, "a") }},
		{"", func(sb *sandbox) { sb.Labels = nil }},
	}
	covered := map[string]bool{}
	for i, tc := range cases {
		covered[tc.field] = true
		t.Run(fmt.Sprintf("%d-%s", i, tc.field), func(t *testing.T) {
			sb := base()
			sim.mu.RLock()
			cached := string(cachedListItemHead(sb, sim.mu.WriteCount()))
			sim.mu.RUnlock()
			before := sb.listFields()
			require.Equal(t, string(appendListItemHead(nil, &before, sb.Labels)), cached)

			sim.mu.Lock()
			tc.change(sb)
			sim.mu.Unlock()

			sim.mu.RLock()
			defer sim.mu.RUnlock()
			fresh := sb.listFields()
			want := string(appendListItemHead(nil, &fresh, sb.Labels))
			require.NotEqual(t, cached, want, "the change must show in the item")
			assert.Equal(t, want, string(cachedListItemHead(sb, sim.mu.WriteCount())))
			// Once current, the item is reused as it is.
			current := sb.listCache.Load()
			assert.Equal(t, want, string(cachedListItemHead(sb, sim.mu.WriteCount())))
			assert.Same(t, current, sb.listCache.Load())
		})
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[listFields]()) {
		assert.True(t, covered[f.Name], "no case changes listFields.%s", f.Name)
	}
}

// TestListItemCacheReusedUntilAWrite checks that a listed row is encoded
// once while nothing is written, and that a write elsewhere in the store
// costs a comparison, not an encoding.
func TestListItemCacheReusedUntilAWrite(t *testing.T) {
	h := newHarness(t)
	a := h.create(apiclient.CreateSandbox{})
	b := h.create(apiclient.CreateSandbox{})
	h.listedItem(a.Id)
	h.sim.mu.RLock()
	first := h.sim.rows.Get(a.Id).listCache.Load()
	h.sim.mu.RUnlock()
	require.NotNil(t, first)

	h.listedItem(a.Id)
	code, out, _ := h.raw("PUT", "/api/sandbox/"+b.Id+"/labels", map[string]any{"labels": map[string]string{"k": "v"}})
	require.Equal(t, http.StatusOK, code, string(out))
	h.listedItem(a.Id)

	h.sim.mu.RLock()
	defer h.sim.mu.RUnlock()
	assert.Same(t, first, h.sim.rows.Get(a.Id).listCache.Load(), "an unchanged row keeps its encoded item")
	assert.Equal(t, h.sim.mu.WriteCount(), first.current.Load(), "and is known current after the write")
}
