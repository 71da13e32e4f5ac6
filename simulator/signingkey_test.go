package simulator

import (
	"net/http"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signingKey asks the API for the sandbox's signing key with key.
func (h *harness) signingKey(apiKey, method, id string) (int, string, http.Header) {
	h.t.Helper()
	path := "/api/sandbox/" + id + "/signing-key"
	if method == http.MethodPost {
		path += "/rotate"
	}
	code, b, hdr := h.rawAs(apiKey, method, path, nil)
	return code, string(b), hdr
}

// The signing key: per sandbox, random, stable across reads and across
// stop and start, replaced by rotate; its owner's API key only.
func TestSigningKeyEndpoints(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{Name: ptr("keyed")})
	other := h.create(apiclient.CreateSandbox{})

	code, key, hdr := h.signingKey(testKey, http.MethodGet, sb.Id)
	require.Equal(t, http.StatusOK, code, key)
	assert.Len(t, key, 43, "32 random bytes, unpadded base64url")
	assert.True(t, strings.HasPrefix(hdr.Get("Content-Type"), "text/plain"), hdr.Get("Content-Type"))
	assert.Equal(t, "no-store", hdr.Get("Cache-Control"))
	_, again, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
	assert.Equal(t, key, again, "the key is kept")
	_, byName, _ := h.signingKey(testKey, http.MethodGet, "keyed")
	assert.Equal(t, key, byName, "the sandbox's name finds it too")
	_, otherKey, _ := h.signingKey(testKey, http.MethodGet, other.Id)
	assert.NotEqual(t, key, otherKey, "each sandbox has its own key")

	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.get(sb.Id).GetState() == apiclient.SANDBOXSTATE_STOPPED }, 10*time.Second, time.Millisecond)
	_, stopped, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
	assert.Equal(t, key, stopped, "a stopped sandbox keeps its key")
	_, _, err = h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	_, started, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
	assert.Equal(t, key, started, "a start does not rotate the key (the preview token it does)")

	code, rotated, _ := h.signingKey(testKey, http.MethodPost, sb.Id)
	require.Equal(t, http.StatusOK, code, rotated)
	assert.Len(t, rotated, 43)
	assert.NotEqual(t, key, rotated, "rotate makes a new key")
	_, now, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
	assert.Equal(t, rotated, now, "and keeps it")

	for _, tt := range []struct {
		name, apiKey, method, id string
		status                   int
		message                  string
	}{
		{"another organization's get", "other-org-key", http.MethodGet, sb.Id, http.StatusNotFound, "Sandbox with ID or name " + sb.Id + " not found"},
		{"another organization's rotate", "other-org-key", http.MethodPost, sb.Id, http.StatusNotFound, "Sandbox with ID or name " + sb.Id + " not found"},
		{"no API key", "", http.MethodGet, sb.Id, http.StatusUnauthorized, msgInvalidCredentials},
		{"no API key to rotate", "", http.MethodPost, sb.Id, http.StatusUnauthorized, msgInvalidCredentials},
		{"a sandbox that does not exist", testKey, http.MethodGet, "nope", http.StatusNotFound, "Sandbox with ID or name nope not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := h.signingKey(tt.apiKey, tt.method, tt.id)
			assert.Equal(t, tt.status, code, body)
			assert.Equal(t, tt.message, h.nestError([]byte(body)).Message)
		})
	}
	_, after, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
	assert.Equal(t, rotated, after, "another organization's rotate changed nothing")

	_, _, err = h.api.SandboxAPI.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		code, _, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
		return code == http.StatusNotFound
	}, 10*time.Second, time.Millisecond, "the key goes with its sandbox")
}
