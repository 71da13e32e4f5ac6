package simulator

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decode reads a JSON body into a map.
func decode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	return m
}

func TestSnapshotLifecycle(t *testing.T) {
	h := newHarness(t)
	code, body, hdr := h.raw("POST", "/api/snapshots", map[string]any{"name": "py", "imageName": "python:3.12-slim", "cpu": 2})
	require.Equal(t, http.StatusOK, code, string(body))
	sn := decode(t, body)
	assert.Equal(t, snapPending, sn["state"], "Daytona answers a create with pending")
	assert.Contains(t, hdr.Get(warningHeader), "records", "the none backend says snapshots are records")
	id := sn["id"].(string)
	active := h.waitJSON("/api/snapshots/py", stateIs(snapActive))
	assert.Equal(t, id, active["id"])
	assert.EqualValues(t, 2, active["cpu"])
	byID := h.waitJSON("/api/snapshots/"+id, stateIs(snapActive))
	assert.Equal(t, "py", byID["name"])

	tests := []struct {
		name, method, path string
		body               any
		status             int
		message            string
	}{
		{"a name twice", "POST", "/api/snapshots", map[string]any{"name": "py", "imageName": "x:1"}, 409, "Snapshot with name py already exists"},
		{"neither image nor build", "POST", "/api/snapshots", map[string]any{"name": "none"}, 400, "Must specify either an image name or a build info entry"},
		{"both", "POST", "/api/snapshots", map[string]any{"name": "both", "imageName": "x:1", "buildInfo": map[string]any{"dockerfileContent": "FROM x"}}, 400,
			"Cannot specify an image name when using a build info entry"},
		{"unknown", "GET", "/api/snapshots/nope", nil, 404, "Snapshot nope not found"},
		{"the default is general", "DELETE", "/api/snapshots/" + url.PathEscape(defaultSnapshot), nil, 403, ""},
		{"activate an active one", "POST", "/api/snapshots/py/activate", nil, 400, "Snapshot py is already active"},
		{"a sandbox from it", "POST", "/api/sandbox", map[string]any{"snapshot": "py"}, 200, ""},
		{"deactivate", "POST", "/api/snapshots/py/deactivate", nil, 204, ""},
		{"a sandbox from an inactive one", "POST", "/api/sandbox", map[string]any{"snapshot": "py"}, 400, "Snapshot py is inactive"},
		{"activate again", "POST", "/api/snapshots/py/activate", nil, 200, ""},
		{"page size above 200", "GET", "/api/snapshots?limit=500", nil, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := h.raw(tt.method, tt.path, tt.body)
			assert.Equal(t, tt.status, code, string(body))
			if tt.message != "" {
				assert.Equal(t, tt.message, h.nestError(body).Message)
			}
		})
	}

	t.Run("list pages and filters", func(t *testing.T) {
		code, body, _ := h.raw("POST", "/api/snapshots", map[string]any{"name": "node", "imageName": "node:22"})
		require.Equal(t, http.StatusOK, code, string(body))
		page := decode(t, mustGet(t, h, "/api/snapshots?limit=1&page=2&sort=name&order=asc"))
		assert.EqualValues(t, 3, page["total"], "the default snapshot and the two of this organization")
		assert.EqualValues(t, 3, page["totalPages"])
		items := page["items"].([]any)
		require.Len(t, items, 1)
		assert.Equal(t, "node", items[0].(map[string]any)["name"], "sorted by name: daytonaio/..., node, py")
		filtered := decode(t, mustGet(t, h, "/api/snapshots?name=NOD"))
		assert.EqualValues(t, 1, filtered["total"], "a partial, case-insensitive name match")
		other := decode(t, mustGetAs(t, h, "other-key", "/api/snapshots"))
		assert.EqualValues(t, 1, other["total"], "another organization sees only the general snapshot")
	})

	t.Run("delete", func(t *testing.T) {
		code, body, _ := h.raw("DELETE", "/api/snapshots/"+id, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		code, _, _ = h.raw("GET", "/api/snapshots/py", nil)
		assert.Equal(t, http.StatusNotFound, code)
		code, body, _ = h.raw("POST", "/api/sandbox", map[string]any{"snapshot": "py"})
		assert.Equal(t, http.StatusBadRequest, code, string(body))
	})

	t.Run("createSnapshot from a sandbox", func(t *testing.T) {
		sb := h.create(apiclient.CreateSandbox{})
		code, body, hdr := h.raw("POST", "/api/sandbox/"+sb.Id+"/snapshot", map[string]any{"name": "saved"})
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Contains(t, hdr.Get(warningHeader), "default workload")
		h.waitJSON("/api/snapshots/saved", stateIs(snapActive))
		h.waitState(sb.Id, apiclient.SANDBOXSTATE_STARTED)
	})
}

func mustGet(t *testing.T, h *harness, path string) []byte {
	t.Helper()
	return mustGetAs(t, h, testKey, path)
}

func mustGetAs(t *testing.T, h *harness, key, path string) []byte {
	t.Helper()
	code, body, _ := h.rawAs(key, "GET", path, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	return body
}

func TestNativeVolumesAreSharedThroughTheHome(t *testing.T) {
	h := nativeHarness(t)
	code, body, _ := h.raw("POST", "/api/volumes", map[string]any{"name": "data"})
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, volPendingCreate, decode(t, body)["state"])
	vol := h.waitJSON("/api/volumes/by-name/data", stateIs(volReady))
	// By name, as the SDKs may pass it.
	mount := []apiclient.SandboxVolume{{VolumeId: "data", MountPath: "/home/daytona/shared"}}
	a := h.create(apiclient.CreateSandbox{Volumes: mount})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, a.GetState(), a.GetErrorReason())
	assert.Equal(t, vol["id"], a.Volumes[0].VolumeId, "the name resolves to the id")
	b := h.create(apiclient.CreateSandbox{Volumes: mount})
	h.shell(a.Id, "echo from-a > shared/note")
	assert.Equal(t, "from-a\n", h.shell(b.Id, "cat $HOME/shared/note"))

	code, body, _ = h.raw("POST", "/api/volumes", map[string]any{"name": "data"})
	assert.Equal(t, http.StatusConflict, code, string(body))
	code, body, _ = h.raw("DELETE", "/api/volumes/"+vol["id"].(string), nil)
	assert.Equal(t, http.StatusConflict, code, string(body))
	code, body, _ = h.raw("POST", "/api/sandbox", map[string]any{"volumes": []map[string]any{{"volumeId": "data", "mountPath": "relative"}}})
	assert.Equal(t, http.StatusBadRequest, code, string(body))
	code, body, _ = h.raw("POST", "/api/sandbox", map[string]any{"volumes": []map[string]any{{"volumeId": "nope", "mountPath": "/x"}}})
	assert.Equal(t, http.StatusNotFound, code, string(body))

	for _, id := range []string{a.Id, b.Id} {
		_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, id).Execute()
		require.NoError(t, err)
		h.waitGone(id)
	}
	c := h.create(apiclient.CreateSandbox{Volumes: mount})
	assert.Equal(t, "from-a\n", h.shell(c.Id, "cat shared/note"), "the files outlive the sandboxes")
	_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, c.Id).Execute()
	require.NoError(t, err)
	h.waitGone(c.Id)
	code, body, _ = h.raw("DELETE", "/api/volumes/"+vol["id"].(string), nil)
	require.Equal(t, http.StatusOK, code, string(body))
	require.Eventually(t, func() bool {
		code, _, _ := h.raw("GET", "/api/volumes/by-name/data", nil)
		return code == http.StatusNotFound
	}, 10*time.Second, 10*time.Millisecond)
	list := mustGet(t, h, "/api/volumes?includeDeleted=true")
	assert.Contains(t, string(list), `"state":"deleted"`)
}

func TestLinkedSandboxes(t *testing.T) {
	h := newHarness(t)
	owner := h.create(apiclient.CreateSandbox{Name: apiclient.PtrString("owner")})
	follower := h.create(apiclient.CreateSandbox{LinkedSandbox: apiclient.PtrString("owner")})
	assert.Equal(t, owner.Id, follower.GetLinkedSandboxId())
	assert.Equal(t, owner.Id, h.get(follower.Id).GetLinkedSandboxId())
	_, hasLink := h.get(owner.Id).GetLinkedSandboxIdOk()
	assert.False(t, hasLink, "an owner has no linkedSandboxId")

	code, body, _ := h.raw("POST", "/api/sandbox", map[string]any{"linkedSandbox": "nope"})
	assert.Equal(t, http.StatusBadRequest, code, string(body))
	code, body, _ = h.raw("POST", "/api/sandbox", map[string]any{"linkedSandbox": follower.Id})
	assert.Equal(t, http.StatusBadRequest, code, "no chains: %s", body)

	_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, owner.Id).Execute()
	require.NoError(t, err)
	h.waitGone(owner.Id)
	h.waitGone(follower.Id)
}

func TestSandboxExtras(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})

	t.Run("network settings are stored and said not to be enforced", func(t *testing.T) {
		code, body, hdr := h.raw("POST", "/api/sandbox/"+sb.Id+"/network-settings", map[string]any{"networkBlockAll": true, "networkAllowList": "10.0.0.0/8"})
		require.Equal(t, http.StatusOK, code, string(body))
		m := decode(t, body)
		assert.Equal(t, true, m["networkBlockAll"])
		assert.Equal(t, "10.0.0.0/8", m["networkAllowList"])
		assert.Contains(t, hdr.Get(warningHeader), "not enforced")
		code, body, _ = h.raw("POST", "/api/sandbox/"+sb.Id+"/network-settings", map[string]any{"networkAllowList": "not-a-cidr"})
		assert.Equal(t, http.StatusBadRequest, code, string(body))
		code, body, hdr = h.raw("POST", "/api/sandbox/"+sb.Id+"/network-settings", map[string]any{"domainAllowList": "example.com"})
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Equal(t, "example.com", decode(t, body)["domainAllowList"])
		assert.Contains(t, hdr.Values(warningHeader), "domainAllowList is recorded but not enforced: the simulator does not filter by domain")
		code, body, hdr = h.raw("POST", "/api/sandbox", map[string]any{"domainAllowList": "example.com"})
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Contains(t, hdr.Values(warningHeader), "domainAllowList is recorded but not enforced: the simulator does not filter by domain", "at create too")
	})
	t.Run("fork makes a new sandbox", func(t *testing.T) {
		assert.Equal(t, "[]", string(mustGet(t, h, "/api/sandbox/"+sb.Id+"/forks")))
		code, body, _ := h.raw("POST", "/api/sandbox/"+sb.Id+"/fork", map[string]any{})
		require.Equal(t, http.StatusOK, code, string(body))
		fork := decode(t, body)
		assert.NotEqual(t, sb.Id, fork["id"])
		assert.Equal(t, "started", fork["state"])
		var forks []map[string]any
		require.NoError(t, json.Unmarshal(mustGet(t, h, "/api/sandbox/"+sb.Id+"/forks"), &forks))
		require.Len(t, forks, 1)
		assert.Equal(t, fork["id"], forks[0]["id"])
		assert.Equal(t, sb.Id, decode(t, mustGet(t, h, "/api/sandbox/"+fork["id"].(string)+"/parent"))["id"])
	})
	t.Run("SSH access tokens", func(t *testing.T) {
		code, body, hdr := h.raw("POST", "/api/sandbox/"+sb.Id+"/ssh-access?expiresInMinutes=5", nil)
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Contains(t, hdr.Get(warningHeader), "no SSH gateway")
		access := decode(t, body)
		token := access["token"].(string)
		assert.Contains(t, access["sshCommand"], token+"@")
		valid := decode(t, mustGet(t, h, "/api/sandbox/ssh-access/validate?token="+token))
		assert.Equal(t, true, valid["valid"])
		assert.Equal(t, sb.Id, valid["sandboxId"])
		other := decode(t, mustGetAs(t, h, "other-key", "/api/sandbox/ssh-access/validate?token="+token))
		assert.Equal(t, false, other["valid"], "another organization's token")
		code, body, _ = h.raw("DELETE", "/api/sandbox/"+sb.Id+"/ssh-access?token="+token, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Equal(t, false, decode(t, mustGet(t, h, "/api/sandbox/ssh-access/validate?token="+token))["valid"])

		code, body, _ = h.raw("POST", "/api/sandbox/"+sb.Id+"/ssh-access?expiresInMinutes=1", nil)
		require.Equal(t, http.StatusOK, code, string(body))
		token = decode(t, body)["token"].(string)
		h.clk.Advance(2 * time.Minute)
		assert.Equal(t, false, decode(t, mustGet(t, h, "/api/sandbox/ssh-access/validate?token="+token))["valid"], "expired")
	})
	t.Run("telemetry answers as for a quiet sandbox", func(t *testing.T) {
		q := "?from=2025-01-01T00:00:00Z&to=2025-01-02T00:00:00Z"
		assert.JSONEq(t, `{"items":[],"total":0,"page":1,"totalPages":0}`, string(mustGet(t, h, "/api/sandbox/"+sb.Id+"/telemetry/logs"+q)))
		assert.JSONEq(t, `{"series":[]}`, string(mustGet(t, h, "/api/sandbox/"+sb.Id+"/telemetry/metrics"+q)))
		assert.JSONEq(t, `[]`, string(mustGet(t, h, "/api/sandbox/"+sb.Id+"/telemetry/traces/abc")))
		code, _, _ := h.raw("GET", "/api/sandbox/"+sb.Id+"/telemetry/logs", nil)
		assert.Equal(t, http.StatusBadRequest, code, "from and to are required")
	})
	t.Run("health/ready needs no key", func(t *testing.T) {
		code, body, _ := h.rawAs("", "GET", "/api/health/ready", nil)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "ok", decode(t, body)["status"])
	})
}
