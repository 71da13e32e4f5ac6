package wire_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestErrorCode(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{400, "BAD_REQUEST"},
		{401, "UNAUTHORIZED"},
		{403, "FORBIDDEN"},
		{404, "NOT_FOUND"},
		{408, "REQUEST_TIMEOUT"},
		{409, "CONFLICT"},
		{410, "GONE"},
		{413, "PAYLOAD_TOO_LARGE"},
		{415, "UNSUPPORTED_MEDIA_TYPE"},
		{422, "UNPROCESSABLE_ENTITY"},
		{429, "TOO_MANY_REQUESTS"},
		{500, "INTERNAL_SERVER_ERROR"},
		{503, "INTERNAL_SERVER_ERROR"},
		{0, "INTERNAL_SERVER_ERROR"},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			assert.Equal(t, tt.want, wire.ErrorCode(tt.status))
		})
	}
}

func TestNewErrorResponseJSON(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/process/execute?x=1", nil)
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))
	b, err := json.Marshal(wire.NewErrorResponse(r, now, 400, "BAD_REQUEST", "command cannot be empty"))
	require.NoError(t, err)
	// The daemon's field order and spelling; the time in UTC; the path
	// without its query.
	assert.JSONEq(t, `{"statusCode":400,"message":"command cannot be empty","code":"BAD_REQUEST",
		"source":"DAYTONA_DAEMON","timestamp":"2026-01-02T02:04:05.000000006Z","path":"/process/execute","method":"POST"}`, string(b))
}
