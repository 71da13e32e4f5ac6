package simulator

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	tb "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toolboxClient is the official Go toolbox client of sandbox sb, through
// the simulator's toolbox proxy, as the Go SDK makes it.
func (h *harness) toolboxClient(sb *apiclient.Sandbox) *tb.APIClient {
	cfg := tb.NewConfiguration()
	cfg.Servers = tb.ServerConfigurations{{URL: strings.TrimRight(sb.ToolboxProxyUrl, "/") + "/" + sb.Id}}
	cfg.HTTPClient = h.srv.Client()
	cfg.AddDefaultHeader("Authorization", "Bearer "+testKey)
	return tb.NewAPIClient(cfg)
}

// snapshotWith makes an active snapshot named name from body.
func (h *harness) snapshotWith(name string, body map[string]any) {
	h.t.Helper()
	body["name"] = name
	code, b, _ := h.raw("POST", "/api/snapshots", body)
	require.Equal(h.t, http.StatusOK, code, string(b))
	sn := h.waitJSON("/api/snapshots/"+name, func(m map[string]any) bool {
		return m["state"] == snapActive || m["state"] == snapError || m["state"] == snapBuildFailed
	})
	require.Equal(h.t, snapActive, sn["state"], "%v", sn)
}

// entrypointCase is a sandbox whose entrypoint session runs command and
// prints stdout (and stderr) once it ends, or runs on when stdout is "".
type entrypointCase struct {
	name           string
	snapshot       map[string]any // nil: the default snapshot
	command        string
	stdout, stderr string
}

// checkEntrypoints creates a sandbox of each case and checks its
// entrypoint session and logs with the official Go toolbox client, and
// the logs followed over the WebSocket the SDKs use.
func checkEntrypoints(t *testing.T, h *harness, cases []entrypointCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			create := apiclient.CreateSandbox{}
			if tt.snapshot != nil {
				h.snapshotWith(strings.ReplaceAll(tt.name, " ", "-"), tt.snapshot)
				create.Snapshot = apiclient.PtrString(strings.ReplaceAll(tt.name, " ", "-"))
			}
			sb := h.create(create)
			require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
			c := h.toolboxClient(sb)
			ctx := context.Background()
			sess, _, err := c.ProcessAPI.GetEntrypointSession(ctx).Execute()
			require.NoError(t, err)
			assert.Equal(t, "entrypoint", sess.SessionId)
			require.Len(t, sess.Commands, 1)
			assert.Equal(t, tt.command, sess.Commands[0].Command)
			_, out := h.run(sb.Id, "echo ${SANDPLANE_ENTRYPOINT-unset}")
			assert.Equal(t, "unset\n", out, "commands do not inherit the entrypoint's variable")
			if tt.stdout == "" {
				assert.Nil(t, sess.Commands[0].ExitCode, "the entrypoint runs on")
				return
			}
			stdout, stderr := followToolboxLogs(t, h, sb.Id, "/process/session/entrypoint/logs")
			assert.Equal(t, tt.stdout, stdout)
			assert.Equal(t, tt.stderr, stderr)
			logs, _, err := c.ProcessAPI.GetEntrypointLogs(ctx).Execute()
			require.NoError(t, err)
			assert.Equal(t, tt.stdout, logs.GetStdout())
			assert.Equal(t, tt.stderr, logs.GetStderr())
		})
	}
}

// A snapshot's own entrypoint, and Daytona's default one.
var entrypointCases = []entrypointCase{
	{name: "default snapshot", command: "'sleep' 'infinity'"},
	{name: "snapshot entrypoint", snapshot: map[string]any{"imageName": "example/app:1", "entrypoint": []string{"sh", "-c", "echo up; sleep 0.2; echo warn >&2"}},
		command: `'sh' '-c' 'echo up; sleep 0.2; echo warn >&2'`, stdout: "up\n", stderr: "warn\n"},
}

func TestEntrypointSessionNative(t *testing.T) {
	checkEntrypoints(t, nativeHarness(t), entrypointCases)
}

func TestEntrypointSessionDocker(t *testing.T) {
	h, _, tag := dockerExtHarness(t)
	cases := []entrypointCase{entrypointCases[0],
		{name: "snapshot entrypoint", snapshot: map[string]any{"imageName": tag, "entrypoint": []string{"sh", "-c", "echo own"}},
			command: `'sh' '-c' 'echo own'`, stdout: "own\n"},
		{name: "image entrypoint and cmd", snapshot: map[string]any{"buildInfo": map[string]any{"dockerfileContent": "FROM " + tag +
			"\nENTRYPOINT [\"/bin/sh\", \"-c\"]\nCMD [\"echo from-image $HOME\"]\n"}},
			command: `'/bin/sh' '-c' 'echo from-image $HOME'`, stdout: "from-image " + dockerHome + "\n"},
		{name: "image running the toolbox", snapshot: map[string]any{"imageName": tag}, command: "'sleep' 'infinity'"},
	}
	checkEntrypoints(t, h, cases)
}

// The entrypoint is the sandbox's process: it ends with a stop and starts
// again with the start.
func TestEntrypointSessionRestarts(t *testing.T) {
	h := nativeHarness(t)
	h.snapshotWith("counter", map[string]any{"imageName": "example/app:1", "entrypoint": []string{"sh", "-c", "echo run >> $HOME/runs; sleep 600"}})
	sb := h.create(apiclient.CreateSandbox{Snapshot: apiclient.PtrString("counter")})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	// The entrypoint starts with the toolbox, not before the create
	// answers: wait until it has run, so that the stop cannot come first.
	runs := func(want string) func(c *assert.CollectT) {
		return func(c *assert.CollectT) {
			code, out := h.run(sb.Id, "cat $HOME/runs")
			assert.Equal(c, 0, code, out)
			assert.Equal(c, want, out, "the entrypoint ran once per start")
		}
	}
	assert.EventuallyWithT(t, runs("run\n"), 10*time.Second, 50*time.Millisecond)
	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_STOPPED)
	_, _, err = h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_STARTED)
	assert.EventuallyWithT(t, runs("run\nrun\n"), 10*time.Second, 50*time.Millisecond)
}
