package daemon

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// A stop may say why; the reason is the sandbox's errorReason and reaches
// the sandbox.stopped event, and a stop that gives none says "stopped".
func TestStopReasonReachesTheStoppedEvent(t *testing.T) {
	ts, _ := newTestServer(t, "")
	require.Equal(t, 201, do(t, ts, "POST", "/v1/sandboxes", `{"name":"pooled"}`).status)
	ev := openEvents(t, ts, "", "")
	require.Equal(t, provider.EventSandboxesReplaced, ev.next().Type)

	tests := []struct {
		name, body, want string
	}{
		{"with a reason", `{"reason":"pool: evicted"}`, "pool: evicted"},
		{"without a body", "", provider.StopReasonManual},
		{"with an empty body", `{}`, provider.StopReasonManual},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, 200, do(t, ts, "POST", "/v1/sandboxes/pooled/start", "").status)
			a := do(t, ts, "POST", "/v1/sandboxes/pooled/stop", tt.body)
			require.Equal(t, 200, a.status, a.body)
			var s provider.Sandbox
			require.NoError(t, json.Unmarshal([]byte(a.body), &s))
			assert.Equal(t, tt.want, s.ErrorReason)
			got := ev.nextOf(provider.EventStopped)
			require.NotNil(t, got.Sandbox)
			assert.Equal(t, tt.want, got.Sandbox.ErrorReason)
		})
	}
}

func TestStopReasonIsValidated(t *testing.T) {
	ts, _ := newTestServer(t, "")
	require.Equal(t, 201, do(t, ts, "POST", "/v1/sandboxes", `{"name":"pooled"}`).status)
	tests := []struct {
		name, body string
	}{
		{"control characters", `{"reason":"pool\nevicted"}`},
		{"too long", `{"reason":"` + strings.Repeat("x", 65) + `"}`},
		{"not a string", `{"reason":7}`},
		{"unknown field", `{"why":"x"}`},
		{"reserved for deletes", `{"reason":"deleted"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, ts, "POST", "/v1/sandboxes/pooled/stop", tt.body)
			assert.Equal(t, 400, a.status, a.body)
			assert.Equal(t, provider.InvalidArgument, errorCode(t, a))
		})
	}
	a := do(t, ts, "GET", "/v1/sandboxes/pooled", "")
	assert.Contains(t, a.body, `"state":"started"`, "a refused stop stops nothing")
}
