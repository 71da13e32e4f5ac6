package simulator

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The toolbox proxy passes WebSocket upgrades through, as the SDKs follow
// session logs (and drive PTYs and the interpreter) over them, and streams
// what the toolbox sends as it comes: a followed command's first line
// arrives while the command still runs. The call log notes the upgrade.
func TestToolboxProxyWebSocket(t *testing.T) {
	h := nativeHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	base := "/toolbox/" + sb.GetId() + "/process/session"
	code, body, _ := h.raw("POST", base, map[string]any{"sessionId": "ws"})
	require.Equal(t, http.StatusCreated, code, string(body))
	code, body, _ = h.raw("POST", base+"/ws/exec", map[string]any{"command": "echo first-line; sleep 30", "runAsync": true})
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, code, string(body))
	var exec struct {
		CmdID string `json:"cmdId"`
	}
	require.NoError(t, json.Unmarshal(body, &exec))
	require.NotEmpty(t, exec.CmdID)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	path := base + "/ws/command/" + exec.CmdID + "/logs?follow=true"
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(h.srv.URL, "http")+path,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testKey}}})
	require.NoError(t, err)
	if resp.Body != nil {
		resp.Body.Close()
	}
	defer conn.CloseNow()
	var got strings.Builder
	for !strings.Contains(got.String(), "first-line") {
		_, msg, err := conn.Read(ctx)
		require.NoError(t, err, "read so far: %q", got.String())
		got.Write(msg)
	}
	require.NoError(t, conn.Close(websocket.StatusNormalClosure, ""))

	assert.Eventually(t, func() bool {
		for _, c := range h.sim.Calls() {
			if c.Operation == "toolbox" && strings.HasSuffix(c.Path, "/logs") {
				return c.Status == http.StatusSwitchingProtocols
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the call log notes the upgrade")
}
