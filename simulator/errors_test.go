package simulator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// The status → body table of the API's errors, with the class SDK 0.218
// makes of each (errorClassFromStatusCode: the API's source names no
// domain code, so the status decides). Older SDKs read statusCode, error
// and message, which stay.
func TestAPIErrorBodies(t *testing.T) {
	tests := []struct {
		status          int
		code, errorText string
		sdkClass        string
	}{
		{400, "BAD_REQUEST", "Bad Request", "DaytonaValidationError"},
		{401, "UNAUTHORIZED", "Unauthorized", "DaytonaAuthenticationError"},
		{403, "FORBIDDEN", "Forbidden", "DaytonaAuthorizationError"},
		{404, "NOT_FOUND", "Not Found", "DaytonaNotFoundError"},
		{408, "REQUEST_TIMEOUT", "Request Timeout", "DaytonaTimeoutError"},
		{409, "CONFLICT", "Conflict", "DaytonaConflictError"},
		{410, "GONE", "Gone", "DaytonaGoneError"},
		{422, "UNPROCESSABLE_ENTITY", "Unprocessable Entity", "DaytonaUnprocessableEntityError"},
		{429, "TOO_MANY_REQUESTS", "Too Many Requests", "DaytonaRateLimitError"},
		{500, "INTERNAL_SERVER_ERROR", "Internal Server Error", "DaytonaInternalServerError"},
		{502, "BAD_GATEWAY", "Bad Gateway", "DaytonaBadGatewayError"},
		{503, "SERVICE_UNAVAILABLE", "Service Unavailable", "DaytonaServiceUnavailableError"},
		{504, "GATEWAY_TIMEOUT", "Gateway Timeout", "DaytonaTimeoutError"},
	}
	sim, err := New(Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	for _, tt := range tests {
		t.Run(tt.sdkClass+" "+tt.code, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/api/sandbox/x?y=1", nil)
			sim.writeAPIError(w, r, errorf(tt.status, "what went wrong"))
			require.Equal(t, tt.status, w.Code)
			var body map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
			assert.Equal(t, map[string]any{
				"path": "/api/sandbox/x?y=1", "timestamp": body["timestamp"], "statusCode": float64(tt.status),
				"error": tt.errorText, "message": "what went wrong", "code": tt.code, "source": wire.SourceAPI,
			}, body)
		})
	}
	t.Run("a code of its own wins over the status's", func(t *testing.T) {
		w := httptest.NewRecorder()
		e := &apiError{Status: http.StatusBadRequest, Code: "SANDBOX_INVALID", Message: "m"}
		sim.writeAPIError(w, httptest.NewRequest(http.MethodGet, "/api/x", nil), e)
		assert.Contains(t, w.Body.String(), `"code":"SANDBOX_INVALID"`)
	})
}

// The proxies' own error bodies (no toolbox answered): the daemon's shape
// and codes, with source DAYTONA_PROXY, which SDK 0.218 maps by status
// (it knows no DAYTONA_PROXY code); a toolbox's own body goes through as
// it is, with source DAYTONA_DAEMON.
func TestProxyErrorBodies(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		e    *apiError
		code string
	}{
		{errorf(http.StatusBadRequest, msgNotStarted), "BAD_REQUEST"},
		{errorf(http.StatusUnauthorized, msgInvalidCredentials), "UNAUTHORIZED"},
		{errorf(http.StatusNotFound, "Sandbox with ID or name x not found"), "NOT_FOUND"},
		{errorf(http.StatusTooManyRequests, msgThrottled), "TOO_MANY_REQUESTS"},
		{errorf(http.StatusBadGateway, "sandbox workload unreachable"), "INTERNAL_SERVER_ERROR"},
		{&apiError{Status: http.StatusRequestTimeout, Code: wire.CodeProcessExecutionTimeout, Message: "m"}, wire.CodeProcessExecutionTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			b := ginBody("/toolbox/x/process/execute", http.MethodPost, now, tt.e)
			assert.Equal(t, wire.ErrorResponse{StatusCode: tt.e.Status, Message: tt.e.Message, Code: tt.code,
				Source: wire.SourceProxy, Timestamp: now, Path: "/toolbox/x/process/execute", Method: http.MethodPost}, b)
		})
	}
}

// The bodies as the SDKs receive them, provoked through the API and the
// toolbox proxy: not found, conflict, validation, credentials, a
// rate-limit fault, and the proxy's own refusals.
func TestErrorBodiesOnTheWire(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{Name: apiclient.PtrString("taken")})
	code, body, _ := h.admin("POST", "/_sim/faults", Fault{Op: "getSandbox", Sandbox: sb.Id, Status: 429, RetryAfter: 5})
	require.Equal(t, http.StatusCreated, code, string(body))
	tests := []struct {
		name, key, method, path string
		body                    any
		status                  int
		code, source            string
	}{
		{"not found", testKey, "GET", "/api/sandbox/nope", nil, 404, "NOT_FOUND", wire.SourceAPI},
		{"conflict", testKey, "POST", "/api/sandbox", map[string]any{"name": "taken"}, 409, "CONFLICT", wire.SourceAPI},
		{"validation", testKey, "POST", "/api/sandbox/" + sb.Id + "/autostop/-1", nil, 400, "BAD_REQUEST", wire.SourceAPI},
		{"credentials", "", "GET", "/api/sandbox", nil, 401, "UNAUTHORIZED", wire.SourceAPI},
		{"rate limit", testKey, "GET", "/api/sandbox/" + sb.Id, nil, 429, "TOO_MANY_REQUESTS", wire.SourceAPI},
		{"toolbox of no sandbox", testKey, "POST", "/toolbox/nope/process/execute", map[string]any{"command": "true"}, 404, "NOT_FOUND", wire.SourceProxy},
		{"toolbox without credentials", "", "POST", "/toolbox/" + sb.Id + "/process/execute", map[string]any{"command": "true"}, 401, "UNAUTHORIZED", wire.SourceProxy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b, _ := h.rawAs(tt.key, tt.method, tt.path, tt.body)
			require.Equal(t, tt.status, code, string(b))
			var e struct {
				StatusCode   int
				Code, Source string
				Message      string
			}
			require.NoError(t, json.Unmarshal(b, &e), string(b))
			assert.Equal(t, tt.status, e.StatusCode)
			assert.Equal(t, tt.code, e.Code)
			assert.Equal(t, tt.source, e.Source)
			assert.NotEmpty(t, e.Message)
		})
	}
}
