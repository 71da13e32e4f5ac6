package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/toolbox/wire"
)

var (
	toolboxOnce sync.Once
	toolboxBin  string
	toolboxErr  error
	binDir      string
)

func TestMain(m *testing.M) {
	// This test binary is the init of the native workloads it runs;
	// testdaemon.Main also removes the sandplane binary tests built.
	code := testdaemon.Main(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// toolboxBinary builds the test workload (the project's toolbox server)
// once per test run.
func toolboxBinary(t *testing.T) string {
	t.Helper()
	if goruntime.GOOS != "linux" {
		t.Skip("the native runtime runs on Linux only")
	}
	toolboxOnce.Do(func() {
		binDir, toolboxErr = os.MkdirTemp("", "simtest-bin-")
		if toolboxErr != nil {
			return
		}
		toolboxBin = filepath.Join(binDir, "toolbox")
		out, err := exec.Command("go", "build", "-o", toolboxBin, "./testdata/toolbox").CombinedOutput()
		if err != nil {
			toolboxErr = fmt.Errorf("build the test toolbox: %v\n%s", err, out)
		}
	})
	require.NoError(t, toolboxErr)
	return toolboxBin
}

// nativeHarness is a harness whose sandboxes run the toolbox as real
// processes. The simulator's own clock is fake; the runtime's is real.
func nativeHarness(t *testing.T, configure ...func(*Config)) *harness {
	t.Helper()
	bin := toolboxBinary(t)
	root := t.TempDir()
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime:   native.New(),
		Root:      root,
		Command:   []string{bin},
		StopGrace: 2 * time.Second,
	})
	require.NoError(t, err)
	h := newHarness(t, append([]func(*Config){func(c *Config) { c.Backend = be }}, configure...)...)
	h.root = root
	return h
}

type executeResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

func (h *harness) execute(id string, body map[string]any) (int, executeResponse, []byte) {
	h.t.Helper()
	code, b, _ := h.raw("POST", "/toolbox/"+id+"/process/execute", body)
	var out executeResponse
	if code == http.StatusOK {
		require.NoError(h.t, json.Unmarshal(b, &out), string(b))
	}
	return code, out, b
}

func TestNativeBackendLifecycle(t *testing.T) {
	h := nativeHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{Env: &map[string]string{"GREETING": "hello"}})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())

	code, res, body := h.execute(sb.Id, map[string]any{"command": "echo $GREETING; echo $DAYTONA_SANDBOX_ID"})
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, "hello\n"+sb.Id+"\n", res.Result)

	// Upload a file through the toolbox, then read it back.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "note.txt")
	require.NoError(t, err)
	_, _ = fw.Write([]byte("kept across restarts"))
	require.NoError(t, mw.Close())
	req, err := http.NewRequest("POST", h.srv.URL+"/toolbox/"+sb.Id+"/files/upload?path=note.txt", &buf)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, _, err = api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_STOPPED)
	code, body, _ = h.raw("POST", "/toolbox/"+sb.Id+"/process/execute", map[string]any{"command": "true"})
	assert.Equal(t, http.StatusBadRequest, code)
	var gin wire.ErrorResponse
	require.NoError(t, json.Unmarshal(body, &gin))
	assert.Equal(t, msgNotStarted, gin.Message)
	assert.Equal(t, "BAD_REQUEST", gin.Code)

	started, _, err := api.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState(), started.GetErrorReason())
	code, body, _ = h.raw("GET", "/toolbox/"+sb.Id+"/files/download?path=note.txt", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, "kept across restarts", string(body))

	_, _, err = api.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitGone(sb.Id)
}

// waitState polls GET (real time passes for the runtime) until the state.
func (h *harness) waitState(id string, want apiclient.SandboxState) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		sb, _, err := h.api.SandboxAPI.GetSandbox(h.ctx, id).Execute()
		return err == nil && sb.GetState() == want
	}, 20*time.Second, 20*time.Millisecond, "sandbox %s never reached %s", id, want)
}

func (h *harness) waitGone(id string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		code, _, _ := h.raw("GET", "/api/sandbox/"+id, nil)
		return code == http.StatusNotFound
	}, 20*time.Second, 20*time.Millisecond)
}

func TestTrap19_ExecuteCommandThroughTheToolbox(t *testing.T) {
	h := nativeHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	tests := []struct {
		name   string
		body   map[string]any
		status int
		exit   int
		result string
	}{
		{"combined stdout and stderr", map[string]any{"command": "echo out; echo err >&2"}, 200, 0, "out\nerr\n"},
		{"non-zero exit is still 200", map[string]any{"command": "echo bye; exit 3"}, 200, 3, "bye\n"},
		{"timeout is 408", map[string]any{"command": "sleep 5", "timeout": 1}, 408, 0, ""},
		{"empty command is 400", map[string]any{"command": "   "}, 400, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, res, body := h.execute(sb.Id, tt.body)
			require.Equal(t, tt.status, code, string(body))
			if code == http.StatusOK {
				assert.Equal(t, tt.exit, res.ExitCode)
				assert.Equal(t, tt.result, res.Result)
				return
			}
			var gin wire.ErrorResponse
			require.NoError(t, json.Unmarshal(body, &gin), string(body))
			assert.Equal(t, tt.status, gin.StatusCode)
		})
	}
}

func TestToolboxTrafficIsActivity(t *testing.T) {
	h := nativeHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	created := h.get(sb.Id).GetLastActivityAt()

	h.clk.Advance(time.Minute)
	req, err := http.NewRequest("GET", h.srv.URL+"/toolbox/"+sb.Id+"/work-dir", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set(skipActivityHeader, "true")
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, created, h.get(sb.Id).GetLastActivityAt(), "the opt-out header skips the bump")

	code, _, _ := h.raw("GET", "/toolbox/"+sb.Id+"/work-dir", nil)
	require.Equal(t, http.StatusOK, code)
	bumped := h.get(sb.Id).GetLastActivityAt()
	assert.Equal(t, iso(h.clk.Now()), bumped)

	h.clk.Advance(30 * time.Second)
	code, _, _ = h.raw("GET", "/toolbox/"+sb.Id+"/work-dir", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, bumped, h.get(sb.Id).GetLastActivityAt(), "the proxy deduplicates bumps for 45 s")

	h.clk.Advance(20 * time.Second)
	code, _, _ = h.raw("GET", "/toolbox/"+sb.Id+"/work-dir", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, iso(h.clk.Now()), h.get(sb.Id).GetLastActivityAt())

	t.Run("a long request is re-bumped every 50 s", func(t *testing.T) {
		h.clk.Advance(time.Minute)
		waiters := h.clk.Waiters()
		done := make(chan int, 1)
		go func() {
			code, _, _ := h.execute(sb.Id, map[string]any{"command": "sleep 1"})
			done <- code
		}()
		// The proxy arms its 50 s re-bump ticker once the request is open.
		require.NoError(t, h.clk.BlockUntilWaiters(t.Context(), waiters+1))
		opened := h.get(sb.Id).GetLastActivityAt()
		assert.Equal(t, iso(h.clk.Now()), opened)
		h.clk.Advance(50 * time.Second)
		// The ticker's goroutine records the bump after Advance returns.
		want := iso(h.clk.Now())
		assert.Eventually(t, func() bool {
			sb, _, err := h.api.SandboxAPI.GetSandbox(h.ctx, sb.Id).Execute()
			return err == nil && sb.GetLastActivityAt() == want
		}, 10*time.Second, 5*time.Millisecond, "no re-bump 50 s into the request")
		assert.Equal(t, http.StatusOK, <-done)
	})
}

func TestPreviewReachesARealPort(t *testing.T) {
	h := nativeHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	port, err := freePort()
	require.NoError(t, err)

	// Start a second server inside the sandbox, on port, in the background.
	cmd := fmt.Sprintf("PORT=%d nohup %s >/dev/null 2>&1 & echo $!", port, toolboxBinary(t))
	code, res, body := h.execute(sb.Id, map[string]any{"command": cmd})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, 0, res.ExitCode, res.Result)
	// The pid is the server's in the sandbox's PID namespace, meaningless
	// here: deleting the sandbox ends the namespace, this server included.
	_, err = strconv.Atoi(strings.TrimSpace(res.Result))
	require.NoError(t, err, res.Result)

	link, _, err := h.api.SandboxAPI.GetPortPreviewUrl(h.ctx, sb.Id, float32(port)).Execute()
	require.NoError(t, err)
	h.clk.Advance(time.Minute)
	get := func(url, token string) (int, string) {
		req, err := http.NewRequest("GET", url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set(previewTokenHeader, token)
		}
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		code, _ := get(link.Url+"/version", link.Token)
		return code == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	code2, text := get(link.Url+"/version", link.Token)
	assert.Equal(t, http.StatusOK, code2)
	assert.Contains(t, text, "sim-test")
	assert.Equal(t, iso(h.clk.Now()), h.get(sb.Id).GetLastActivityAt(), "preview traffic is activity")

	// The host form of the same URL: <port>-<id>.<domain>.
	req, err := http.NewRequest("GET", h.srv.URL+"/version", nil)
	require.NoError(t, err)
	req.Host = strconv.Itoa(port) + "-" + sb.Id + ".preview.localhost"
	req.Header.Set(previewTokenHeader, link.Token)
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	signed, _, err := h.api.SandboxAPI.GetSignedPortPreviewUrl(h.ctx, sb.Id, int32(port)).Execute()
	require.NoError(t, err)
	code2, _ = get(signed.Url+"/version", "")
	assert.Equal(t, http.StatusOK, code2, "a signed URL needs no header")
}

func TestWorkloadFailureBecomesErrorReason(t *testing.T) {
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime: native.New(),
		Root:    t.TempDir(),
		Command: []string{"/bin/sh", "-c", "echo cannot start >&2; exit 7"},
	})
	require.NoError(t, err)
	h := newHarness(t, func(c *Config) { c.Backend = be })
	_, resp, err := h.api.SandboxAPI.CreateSandbox(h.ctx).CreateSandbox(apiclient.CreateSandbox{Name: ptr("broken")}).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.True(t, strings.HasPrefix(msg, "Sandbox failed to start: the sandbox workload exited before serving"), msg)
	assert.Contains(t, msg, "cannot start")
	assert.Equal(t, apiclient.SANDBOXSTATE_ERROR, h.get("broken").GetState())
}

func TestCloseRemovesWorkloads(t *testing.T) {
	bin := toolboxBinary(t)
	root := t.TempDir()
	be, err := NewRuntimeBackend(RuntimeBackendConfig{Runtime: native.New(), Root: root, Command: []string{bin}})
	require.NoError(t, err)
	sim, err := New(Config{Backend: be, DisableValidation: true})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := be.Start(ctx, Workload{SandboxID: "direct", User: "daytona"})
	require.NoError(t, err)
	resp, err := http.Get(url + "/version")
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, sim.Close())
	_, err = http.Get(url + "/version")
	assert.Error(t, err, "the workload is gone after Close")
	_, err = os.Stat(filepath.Join(root, "sandboxes", "direct"))
	assert.True(t, os.IsNotExist(err))
}

// freePort is a port nothing listens on now.
func freePort() (int, error) { return launcher.FreePorts{}.Allocate(0) }

// A workload's output reaches errorReason, but neither the sandbox's env
// values nor its secret do.
func TestWorkloadFailureHidesSecrets(t *testing.T) {
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime: native.New(),
		Root:    t.TempDir(),
		Command: []string{"/bin/sh", "-c", "echo \"key $API_KEY token $" + TokenEnv + "\" >&2; exit 7"},
	})
	require.NoError(t, err)
	h := newHarness(t, func(c *Config) { c.Backend = be })
	_, resp, err := h.api.SandboxAPI.CreateSandbox(h.ctx).CreateSandbox(apiclient.CreateSandbox{
		Name: ptr("leaky"), Env: &map[string]string{"API_KEY": "hunter2-secret"},
	}).Execute()
	_, msg := apiStatus(t, resp, err)
	assert.Contains(t, msg, "key [REDACTED] token [REDACTED]")
	assert.NotContains(t, msg, "hunter2-secret")
	assert.NotContains(t, h.get("leaky").GetErrorReason(), "hunter2-secret")
}
