package simulator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each exception must still patch something the upstream document says: if
// upstream fixes the document, the exception is stale and this fails.
func TestSpecExceptionsStillDisagreeWithUpstream(t *testing.T) {
	// One unpatched copy; the exceptions touch different parts, so applying
	// them in turn still shows each one's effect.
	doc, err := parseSpec("")
	require.NoError(t, err)
	ops := indexOps(doc)
	for _, ex := range SpecExceptions() {
		t.Run(ex.Operation+ex.Schema+": "+ex.What, func(t *testing.T) {
			part := func() string {
				var v any
				if ex.Operation != "" {
					require.Contains(t, ops, ex.Operation)
					v = ops[ex.Operation].op
				} else {
					require.Contains(t, doc.Components.Schemas, ex.Schema)
					v = doc.Components.Schemas[ex.Schema].Value
				}
				b, err := json.Marshal(v)
				require.NoError(t, err)
				return string(b)
			}
			before := part()
			require.NoError(t, ex.apply(doc, ops))
			assert.NotEqual(t, before, part(), "the upstream document already agrees with the server")
			assert.NotEmpty(t, ex.Why)
		})
	}
}

func TestResponseValidationCatchesDrift(t *testing.T) {
	sp, err := loadSpec("")
	require.NoError(t, err)
	r := httptest.NewRequest("GET", "/api/sandbox/x", nil)
	params := map[string]string{"sandboxIdOrName": "x"}
	tests := []struct {
		name   string
		status int
		body   string
		bad    bool
	}{
		{"missing toolboxProxyUrl", 200, `{"id":"x","organizationId":"o","name":"n","user":"u","env":{},"labels":{},"public":false,"networkBlockAll":false,"target":"us","cpu":1,"gpu":0,"memory":1,"disk":3}`, true},
		{"public as a string", 200, `{"id":"x","organizationId":"o","name":"n","user":"u","env":{},"labels":{},"public":"no","networkBlockAll":false,"target":"us","cpu":1,"gpu":0,"memory":1,"disk":3,"toolboxProxyUrl":"t"}`, true},
		{"undocumented status", 201, `{}`, true},
		{"valid, nulls allowed by exception", 200, `{"id":"x","organizationId":"o","name":"n","user":"u","env":{},"labels":{},"public":false,"networkBlockAll":false,"target":"us","cpu":1,"gpu":0,"memory":1,"disk":3,"toolboxProxyUrl":"t","errorReason":null,"runnerId":null}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp.violations = nil
			sp.validateResponse(r, "getSandbox", params, tt.status, http.Header{"Content-Type": {"application/json"}}, []byte(tt.body))
			if tt.bad {
				assert.Len(t, sp.violations, 1)
			} else {
				assert.Empty(t, sp.violations)
			}
		})
	}
}

func TestRequestsAreValidatedAgainstTheSpec(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	tests := []struct {
		name, method, path string
		body               any
		status             int
		message            string
	}{
		{"wrong types in the body", "POST", "/api/sandbox", map[string]any{"autoStopInterval": "x", "public": "yes"}, 400,
			"autoStopInterval must be a number conforming to the specified constraints, public must be a boolean value"},
		{"negative cpu", "POST", "/api/sandbox", map[string]any{"cpu": -1}, 400, "cpu must not be less than 0"},
		{"resources with a snapshot", "POST", "/api/sandbox", map[string]any{"cpu": 2}, 400, "Cannot specify Sandbox resources when using a snapshot"},
		{"snapshot and buildInfo", "POST", "/api/sandbox", map[string]any{"snapshot": "x", "buildInfo": map[string]any{"dockerfileContent": "FROM x"}}, 400,
			"Cannot specify a snapshot when using a build info entry"},
		{"unknown snapshot", "POST", "/api/sandbox", map[string]any{"snapshot": "nope"}, 400, "Snapshot nope not found. Did you add it through the Daytona Dashboard?"},
		{"unsafe name", "POST", "/api/sandbox", map[string]any{"name": "<b>x</b>"}, 400, "name must not contain HTML tags, URLs, or control characters"},
		{"unknown fields are ignored", "POST", "/api/sandbox", map[string]any{"whatever": 1}, 200, ""},
		{"limit above 200", "GET", "/api/sandbox?limit=500", nil, 400, ""},
		{"bad state filter", "GET", "/api/sandbox?states=sleeping", nil, 400, ""},
		{"states[] form", "GET", "/api/sandbox?states[]=started&states[]=stopped", nil, 200, ""},
		{"non-numeric interval is a 500", "POST", "/api/sandbox/" + sb.Id + "/autostop/abc", nil, 500, "An unexpected error occurred."},
		{"negative autostop", "POST", "/api/sandbox/" + sb.Id + "/autostop/-1", nil, 400, "Auto-stop interval must be non-negative"},
		{"public takes any string", "POST", "/api/sandbox/" + sb.Id + "/public/nope", nil, 201, ""},
		{"name conflict", "POST", "/api/sandbox", map[string]any{"name": sb.Name}, 409, "Sandbox with name " + sb.Name + " already exists"},
		{"resize, its feature flag on", "POST", "/api/sandbox/" + sb.Id + "/resize", map[string]any{"cpu": 2}, 200, ""},
		{"resize to nothing", "POST", "/api/sandbox/" + sb.Id + "/resize", map[string]any{}, 400, "At least one of cpu, memory or disk must be given"},
		{"shrink the disk", "POST", "/api/sandbox/" + sb.Id + "/resize", map[string]any{"disk": 1}, 400, "Disk size cannot be decreased"},
		{"build logs without a build", "GET", "/api/sandbox/" + sb.Id + "/build-logs-url", nil, 404, "Sandbox " + sb.Id + " has no build info"},
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

	t.Run("resize behind its feature flag, off", func(t *testing.T) {
		off := newHarness(t, func(c *Config) { c.DisableResize = true })
		sb := off.create(apiclient.CreateSandbox{})
		code, body, _ := off.raw("POST", "/api/sandbox/"+sb.Id+"/resize", map[string]any{"cpu": 2})
		assert.Equal(t, http.StatusNotFound, code, string(body))
	})
	t.Run("a JSON body without a content type", func(t *testing.T) {
		req, err := http.NewRequest("POST", h.srv.URL+"/api/sandbox", strings.NewReader(`{"name":"no-ct"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "no-ct", h.get("no-ct").Name)
	})
	t.Run("SDK headers are accepted and ignored", func(t *testing.T) {
		req, err := http.NewRequest("GET", h.srv.URL+"/api/sandbox/"+sb.Id, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("X-Daytona-Source", "sdk-typescript")
		req.Header.Set("X-Daytona-SDK-Version", "0.190.1")
		req.Header.Set("X-Daytona-Organization-ID", "someone-else")
		req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})
}
