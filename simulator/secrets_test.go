package simulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/backend"
)

func TestSecretCRUDValidates(t *testing.T) {
	h := newHarness(t)
	code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": "taken", "value": "v"})
	require.Equal(t, http.StatusCreated, code, string(b))
	var sec secretDTO
	require.NoError(t, json.Unmarshal(b, &sec))
	tests := []struct {
		name, method, path string
		body               any
		status             int
		message            string
	}{
		{"no value", "POST", "/api/secret", map[string]any{"name": "a"}, 400, "value"},
		{"empty value", "POST", "/api/secret", map[string]any{"name": "a", "value": ""}, 400, "value must be 1 to"},
		{"value not a string", "POST", "/api/secret", map[string]any{"name": "a", "value": 7}, 400, "value must be a string"},
		{"bad name", "POST", "/api/secret", map[string]any{"name": "1a", "value": "v"}, 400, "name must match"},
		{"host with a port", "POST", "/api/secret", map[string]any{"name": "a", "value": "v", "hosts": []string{"x.test:443"}}, 400, "ports are not supported"},
		{"taken name", "POST", "/api/secret", map[string]any{"name": "taken", "value": "v"}, 409, "already exists"},
		{"get a missing one", "GET", "/api/secret/nope", nil, 404, "Secret nope not found"},
		{"update a missing one", "PATCH", "/api/secret/nope", map[string]any{"value": "v"}, 404, "not found"},
		{"update with a bad host", "PATCH", "/api/secret/" + sec.ID, map[string]any{"hosts": []string{"*"}}, 400, "not a hostname"},
		{"delete a missing one", "DELETE", "/api/secret/nope", nil, 404, "not found"},
		{"mount a missing one", "POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"K": "nope"}}}, 404, "create it (POST /secret)"},
		{"mount under a bad env name", "POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"A-B": "taken"}}}, 400, "env var name"},
		{"one env twice", "POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"K": "taken"}, {"K": "taken"}}}, 400, "more than once"},
		{"a bad cursor", "GET", "/api/secret/paginated?cursor=zz", nil, 400, "Invalid cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b, _ := h.raw(tt.method, tt.path, tt.body)
			require.Equal(t, tt.status, code, string(b))
			assert.Contains(t, h.nestError(b).Message, tt.message)
		})
	}
	code, b, _ = h.raw("GET", "/api/sandbox", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(b), `"items":[]`, "a refused create makes no sandbox")
}

func TestSecretsListPages(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"b-key", "a-key", "c-other"} {
		code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": n, "value": "value-of-" + n})
		require.Equal(t, http.StatusCreated, code, string(b))
		h.clk.Advance(1e9)
	}
	tests := []struct {
		query string
		pages [][]string
	}{
		{"", [][]string{{"c-other", "a-key", "b-key"}}},
		{"?order=asc&limit=2", [][]string{{"b-key", "a-key"}, {"c-other"}}},
		{"?sort=name&order=asc&limit=1", [][]string{{"a-key"}, {"b-key"}, {"c-other"}}},
		{"?name=KEY&sort=name", [][]string{{"b-key", "a-key"}}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			var got [][]string
			path := "/api/secret/paginated" + tt.query
			for {
				code, b, _ := h.raw("GET", path, nil)
				require.Equal(t, http.StatusOK, code, string(b))
				assert.NotContains(t, string(b), "value-of-")
				var page struct {
					Items []secretDTO
					Total int
					Next  *string `json:"nextCursor"`
				}
				require.NoError(t, json.Unmarshal(b, &page))
				var names []string
				for _, it := range page.Items {
					names = append(names, it.Name)
				}
				got = append(got, names)
				if page.Next == nil {
					break
				}
				sep := "?"
				if tt.query != "" {
					sep = tt.query + "&"
				}
				path = "/api/secret/paginated" + sep + "cursor=" + *page.Next
			}
			assert.Equal(t, tt.pages, got)
		})
	}
	code, b, _ := h.raw("GET", "/api/secret", nil)
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, string(b), "value-of-")
	assert.Equal(t, 3, strings.Count(string(b), `"placeholder":"dtn_secret_`))
}

// On the none backend mounts are records: the create and PUT take them,
// GET …/secrets answers each variable's placeholder and hosts, and no
// answer carries a value; another organization sees none of it.
func TestSandboxSecretsResolveWithoutValues(t *testing.T) {
	h := newHarness(t)
	code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": "k", "value": "the-value-itself", "hosts": []string{"api.example.com"}})
	require.Equal(t, http.StatusCreated, code, string(b))
	var sec secretDTO
	require.NoError(t, json.Unmarshal(b, &sec))
	code, b, _ = h.raw("POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"API_KEY": "k"}}})
	require.Equal(t, http.StatusOK, code, string(b))
	var sb struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &sb))

	code, b, _ = h.raw("GET", "/api/sandbox/"+sb.ID+"/secrets", nil)
	require.Equal(t, http.StatusOK, code, string(b))
	assert.JSONEq(t, `[{"env":"API_KEY","placeholder":"`+sec.Placeholder+`","hosts":["api.example.com"]}]`, string(b))

	code, _, _ = h.rawAs("other-key", "GET", "/api/sandbox/"+sb.ID+"/secrets", nil)
	assert.Equal(t, http.StatusNotFound, code, "another organization's sandbox")
	code, b, _ = h.rawAs("other-key", "PUT", "/api/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{{"X": "k"}}})
	assert.Equal(t, http.StatusNotFound, code, string(b))

	code, b, _ = h.raw("PUT", "/api/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{}})
	require.Equal(t, http.StatusOK, code, string(b))
	assert.NotContains(t, string(b), "the-value-itself")
	code, b, _ = h.raw("GET", "/api/sandbox/"+sb.ID+"/secrets", nil)
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `[]`, string(b))
}

// noEgress is a runtime-like backend whose workloads cannot reach the
// proxy, as docker's cannot.
type noEgress struct{ backend.None }

func (noEgress) Name() string { return "docker" }

func TestSecretsRefusedWhereTheProxyIsUnreachable(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Backend = noEgress{} })
	code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": "k", "value": "v"})
	require.Equal(t, http.StatusCreated, code, string(b))
	code, b, _ = h.raw("POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"K": "k"}}})
	require.Equal(t, http.StatusBadRequest, code, string(b))
	assert.Contains(t, h.nestError(b).Message, "--backend native")
}

// The docker backend's containers cannot reach the proxy on the host's
// loopback: a create or PUT with secrets is refused, naming the way out,
// and one without is served as ever.
func TestDockerRefusesSecrets(t *testing.T) {
	h, _, _ := dockerHarness(t)
	code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": "k", "value": "v"})
	require.Equal(t, http.StatusCreated, code, string(b))
	code, b, _ = h.raw("POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"K": "k"}}})
	require.Equal(t, http.StatusBadRequest, code, string(b))
	assert.Contains(t, h.nestError(b).Message, "Secrets are not supported on the docker backend")
	assert.Contains(t, h.nestError(b).Message, "--backend native")

	code, b, _ = h.raw("POST", "/api/sandbox", map[string]any{})
	require.Equal(t, http.StatusOK, code, string(b))
	var sb struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &sb))
	code, b, _ = h.raw("PUT", "/api/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{{"K": "k"}}})
	require.Equal(t, http.StatusBadRequest, code, string(b))
	assert.Contains(t, h.nestError(b).Message, "--backend native")
	code, b, _ = h.raw("PUT", "/api/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{}})
	assert.Equal(t, http.StatusOK, code, "detaching nothing needs no proxy: %s", b)
}
