package simulator

import (
	"encoding/json"
	"net/http"
	"testing"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The proxy's calls answer the proxy's credential (the admin key) only,
// and never tell a private sandbox from a missing one.
func TestPreviewRoutesAnswerTheProxy(t *testing.T) {
	h := newHarness(t)
	private := h.create(apiclient.CreateSandbox{})
	public := h.create(apiclient.CreateSandbox{Public: ptr(true)})
	code, body, _ := h.raw("GET", "/api/sandbox/"+private.Id+"/ports/3000/signed-preview-url?expiresInSeconds=60", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var signed struct{ Token string }
	require.NoError(t, json.Unmarshal(body, &signed))
	h.sim.mu.Lock()
	token := h.sim.rows.Get(private.Id).AuthToken
	h.sim.mu.Unlock()
	otherOrg := h.create(apiclient.CreateSandbox{}) // made by testKey; looked at below by another key

	for _, tc := range []struct {
		name, key, path string
		code            int
		body            string
	}{
		{"a public sandbox", testAdminKey, "/api/preview/" + public.Id + "/public", 200, "true"},
		{"a private one is not found", testAdminKey, "/api/preview/" + private.Id + "/public", 404, ""},
		{"a missing one likewise", testAdminKey, "/api/preview/no-such-sandbox/public", 404, ""},
		{"an API key is not the proxy", testKey, "/api/preview/" + public.Id + "/public", 403, ""},
		{"no key", "", "/api/preview/" + public.Id + "/public", 403, ""},
		{"its own token", testAdminKey, "/api/preview/" + private.Id + "/validate/" + token, 200, "true"},
		{"another token", testAdminKey, "/api/preview/" + private.Id + "/validate/not-" + token, 404, ""},
		{"a signed token's sandbox", testAdminKey, "/api/preview/" + signed.Token + "/3000/sandbox-id", 200, private.Id},
		{"on another port", testAdminKey, "/api/preview/" + signed.Token + "/3001/sandbox-id", 404, ""},
		{"a path beside it", testAdminKey, "/api/preview/" + signed.Token + "/3000/sandbox-name", 404, ""},
		{"the warning page is off", testAdminKey, "/api/preview/" + private.Id + "/preview-warning", 200, `{"enabled":false}`},
		{"the owner has access", testKey, "/api/preview/" + otherOrg.Id + "/access", 200, "true"},
		{"another organization has not", "another-key", "/api/preview/" + otherOrg.Id + "/access", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{}
			if tc.key != "" {
				header.Set("Authorization", "Bearer "+tc.key)
			}
			code, body, _ := h.rawWith(header, "GET", tc.path, nil)
			assert.Equal(t, tc.code, code, string(body))
			if tc.body != "" {
				assert.JSONEq(t, jsonOf(tc.body), jsonOf(string(body)))
			}
		})
	}

	// The proxy's signing key is the one the owner reads.
	code, owners, _ := h.raw("GET", "/api/sandbox/"+private.Id+"/signing-key", nil)
	require.Equal(t, http.StatusOK, code, string(owners))
	code, proxys, _ := h.rawWith(http.Header{"Authorization": {"Bearer " + testAdminKey}}, "GET", "/api/preview/"+private.Id+"/signing-key", nil)
	require.Equal(t, http.StatusOK, code, string(proxys))
	assert.Equal(t, string(owners), string(proxys))
}

// jsonOf makes a text body (a sandbox id) comparable as JSON.
func jsonOf(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}
