package simulator

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/sandplane/sandplane/simulator/internal/webhooks"
)

// hookReceiver is a host's webhook handler: it verifies each delivery
// with Svix's own library and keeps the first of each svix-id, as an
// idempotent receiver does.
type hookReceiver struct {
	srv    *httptest.Server
	secret string

	mu       sync.Mutex
	received int
	bad      []string
	seen     map[string]bool
	events   []map[string]any
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{seen: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.received++
		wh, err := svix.NewWebhook(r.secret)
		if err == nil {
			// The harness's clock is fake; Verify's tolerance is about
			// the real one.
			err = wh.VerifyIgnoringTimestamp(body, req.Header)
		}
		if err != nil {
			r.bad = append(r.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id := req.Header.Get("svix-id")
		if !r.seen[id] {
			r.seen[id] = true
			var ev map[string]any
			_ = json.Unmarshal(body, &ev)
			r.events = append(r.events, ev)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// sandboxStates are the (old, new) pairs of sb's sandbox.state.updated
// webhooks, deduplicated.
func (r *hookReceiver) sandboxStates(id string) [][2]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][2]string
	for _, ev := range r.events {
		if ev["event"] == EventSandboxStateUpdated && ev["id"] == id {
			out = append(out, [2]string{ev["oldState"].(string), ev["newState"].(string)})
		}
	}
	return out
}

func (r *hookReceiver) count(event string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev["event"] == event {
			n++
		}
	}
	return n
}

func webhookHarness(t *testing.T) (*harness, *hookReceiver) {
	r := newHookReceiver(t)
	h := newHarness(t, func(c *Config) { c.Webhooks = []string{r.srv.URL + "/daytona"} })
	r.secret = h.sim.webhooks.Secret()
	return h, r
}

// A host's handler sees every state change of a sandbox exactly once after
// deduplication, each with a valid signature, in Daytona's payloads, even
// when deliveries are dropped (and retried) or duplicated.
func TestWebhooksReachAnIdempotentReceiver(t *testing.T) {
	h, r := webhookHarness(t)
	for _, ft := range []Fault{{Op: "webhook", Drop: true, Times: 2}, {Op: "webhook", Duplicate: true, After: 2, Times: 2}} {
		code, body, _ := h.admin("POST", "/_sim/faults", ft)
		require.Equal(t, http.StatusCreated, code, string(body))
	}
	sb := h.create(apiclient.CreateSandbox{})
	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	_, _, err = h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	_, _, err = h.api.SandboxAPI.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)

	want := [][2]string{{"unknown", "creating"}, {"creating", "started"}, {"started", "stopping"}, {"stopping", "stopped"},
		{"stopped", "starting"}, {"starting", "started"}, {"started", "destroying"}, {"destroying", "destroyed"}}
	require.Eventually(t, func() bool {
		h.clk.Advance(webhooks.Schedule[0]) // the dropped ones come again on the first retry
		return len(r.sandboxStates(sb.Id)) >= len(want)
	}, 10*time.Second, 10*time.Millisecond, "states so far: %v", r.sandboxStates(sb.Id))
	states := r.sandboxStates(sb.Id)
	assert.ElementsMatch(t, want, states, "every change of state, once after deduplication")
	assert.Equal(t, 1, r.count(EventSandboxCreated))
	r.mu.Lock()
	assert.Empty(t, r.bad, "every signature verifies")
	assert.Greater(t, r.received, len(r.events), "the duplicates arrived, with one svix-id each")
	r.mu.Unlock()

	code, body, _ := h.admin("GET", "/_sim/webhooks", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var st webhookStatus
	require.NoError(t, json.Unmarshal(body, &st))
	assert.Equal(t, []string{r.srv.URL + "/daytona"}, st.Endpoints)
	dropped := 0
	for _, a := range st.Attempts {
		if a.Status == "dropped" {
			dropped++
		}
	}
	assert.Equal(t, 2, dropped, "the log shows the dropped attempts")
	assert.NotContains(t, string(body), h.sim.webhooks.Secret(), "the secret is not listed")
}

// The payloads are Daytona's, field for field.
func TestWebhookPayloads(t *testing.T) {
	h, r := webhookHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	code, body, _ := h.raw("POST", "/api/volumes", map[string]any{"name": "data"})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Eventually(t, func() bool { return r.count(EventVolumeCreated) == 1 && r.count(EventSandboxCreated) == 1 },
		10*time.Second, 10*time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		switch ev["event"] {
		case EventSandboxCreated:
			assert.ElementsMatch(t, []string{"event", "timestamp", "id", "organizationId", "state", "sandboxClass", "createdAt"}, keys(ev))
			assert.Equal(t, sb.Id, ev["id"])
			assert.Equal(t, sb.OrganizationId, ev["organizationId"])
		case EventSandboxStateUpdated:
			assert.ElementsMatch(t, []string{"event", "timestamp", "id", "organizationId", "oldState", "newState", "updatedAt"}, keys(ev))
		case EventVolumeCreated:
			assert.ElementsMatch(t, []string{"event", "timestamp", "id", "name", "organizationId", "state", "createdAt"}, keys(ev))
			assert.Equal(t, "data", ev["name"])
		case EventVolumeStateUpdated:
			assert.ElementsMatch(t, []string{"event", "timestamp", "id", "name", "organizationId", "oldState", "newState", "updatedAt"}, keys(ev))
		default:
			t.Errorf("an event that is no webhook of Daytona's: %v", ev["event"])
		}
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The endpoints and the secret change at run time through the admin API,
// for every organization only; the spec's webhook routes answer for the
// caller's organization.
func TestWebhookSettingsAndRoutes(t *testing.T) {
	h, r := webhookHarness(t)
	secret := webhooks.NewSecret()
	for _, tc := range []struct {
		name, path string
		body       any
		code       int
	}{
		{"one organization cannot change everyone's", "/_sim/webhooks", map[string]any{"secret": secret}, http.StatusBadRequest},
		{"a malformed secret", "/_sim/webhooks?org=all", map[string]any{"secret": "nope"}, http.StatusBadRequest},
		{"a field that is not a setting", "/_sim/webhooks?org=all", map[string]any{"endpoint": "x"}, http.StatusBadRequest},
		{"an endpoint that is no URL", "/_sim/webhooks?org=all", map[string]any{"endpoints": []string{"ftp://x"}}, http.StatusBadRequest},
		{"a new secret", "/_sim/webhooks?org=all", map[string]any{"secret": secret}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{"Authorization": {"Bearer " + testAdminKey}}
			if tc.path == "/_sim/webhooks" {
				header.Set(AdminAPIKeyHeader, testKey)
			}
			code, body, _ := h.rawWith(header, "PUT", tc.path, tc.body)
			assert.Equal(t, tc.code, code, string(body))
		})
	}
	r.mu.Lock()
	r.secret = secret
	r.mu.Unlock()
	h.create(apiclient.CreateSandbox{})
	require.Eventually(t, func() bool { return r.count(EventSandboxCreated) == 1 }, 10*time.Second, 10*time.Millisecond)
	r.mu.Lock()
	assert.Empty(t, r.bad, "signed with the new secret")
	r.mu.Unlock()

	org := h.create(apiclient.CreateSandbox{}).OrganizationId
	code, body, _ := h.raw("GET", "/api/webhooks/organizations/"+org+"/initialization-status", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Contains(t, string(body), `"svixApplicationId":"app_`)
	code, _, _ = h.raw("POST", "/api/webhooks/organizations/"+org+"/refresh-endpoints", nil)
	assert.Equal(t, http.StatusNoContent, code)
	code, body, _ = h.raw("GET", "/api/webhooks/organizations/another-org/initialization-status", nil)
	assert.Equal(t, http.StatusForbidden, code, string(body))
}
