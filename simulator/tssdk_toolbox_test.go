package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
)

// toolboxSteps are the steps of testdata/ts-sdk/toolbox-test.js that every
// SDK runs, in order: each one drives a toolbox feature and checks what
// came back.
var toolboxSteps = []string{
	"fs.createFolder", "fs.uploadFile", "fs.uploadFiles", "fs.uploadFileStream", "fs.downloadFile",
	"fs.downloadFileStream", "fs.downloadFiles", "fs.listFiles", "fs.getFileDetails", "fs.setFilePermissions",
	"fs.moveFiles", "fs.findFiles", "fs.searchFiles", "fs.replaceInFiles", "fs.deleteFile",
	"process.executeCommand", "process.executeCommand bash", "process.executeCommand timeout",
	"process.codeRun python", "process.codeRun javascript", "process.codeRun typescript",
	"process.createSession", "process.executeSessionCommand sync", "process.executeSessionCommand async and follow",
	"process.sendSessionCommandInput", "process.deleteSession",
	"process.createPty", "process.resizePty", "process.pty wait", "process.connectPty", "process.pty kill",
	"git.clone", "git.branches", "git.add and commit", "git.push", "git.pull",
	"lsp python", "lsp typescript", "codeInterpreter", "getPreviewLink",
}

// newerToolboxSteps are the steps of what SDK releases after 0.190.1 added
// (listFiles depth; clone depth, push and pull naming branch and remote,
// init, remotes, config, reset and restore, the status of a detached
// HEAD), which only those run.
var newerToolboxSteps = []string{
	"fs.listFiles depth", "git.clone depth", "git.push branch", "git.pull branch", "git.init and remotes",
	"git.config", "git.reset and restore", "git.status detached",
	"sandbox.updateEnv", "sandbox.getMetricsLatest", "git.dangerouslyAuthenticate",
}

// sandboxTools are the programs toolbox-test.js makes the sandbox's toolbox
// run: code-run, the interpreter and git, and the language servers.
var sandboxTools = []string{"python3", "git", "node", "ts-node", "pylsp", "typescript-language-server"}

// TestOfficialTypeScriptSDKToolbox drives every toolbox feature with the
// official TypeScript SDK, pinned and newest, events on, against a real
// `sandplane sim` whose sandboxes run `sandplane toolbox`: on the native
// backend always, on the docker backend once its default image carries the
// tools the features run.
func TestOfficialTypeScriptSDKToolbox(t *testing.T) {
	for _, backend := range []string{"native", "docker"} {
		t.Run(backend, func(t *testing.T) {
			tsSDKDir(t, tsSDKs[0].pkg)
			var env, args []string
			if backend == "native" {
				env = nativeToolsEnv(t)
				// The tools nativeToolsEnv puts on PATH (ts-node from this
				// tree's node_modules) may lie under the host's /tmp, which
				// an isolated sandbox does not see: this test is of the
				// toolbox API, not of isolation.
				args = []string{"--isolation", "none"}
			} else {
				dockertest.Engine(t)
			}
			sim := startSimProcess(t, backend, env, args...)
			if backend == "docker" {
				if missing := sim.missingTools(t); len(missing) > 0 {
					t.Skipf("docker default image lacks %s: the toolbox features run them", strings.Join(missing, ", "))
				}
			}
			for _, sdk := range tsSDKs {
				t.Run(sdk.name, func(t *testing.T) {
					tsSDKDir(t, sdk.pkg)
					require.Equal(t, http.StatusNoContent, sim.admin(t, http.MethodDelete, "/_sim/calls", nil))
					out := runScript(t, "toolbox-test.js", sdk.pkg, "", sim.url, "DAYTONA_API_KEY="+sim.apiKey,
						"SANDPLANE_SIM_ADMIN_KEY="+sim.adminKey)
					var res struct {
						OK      bool     `json:"ok"`
						Version string   `json:"version"`
						Ran     []string `json:"ran"`
						Newer   []string `json:"newer"`
					}
					require.NoError(t, json.Unmarshal(out, &res), string(out))
					assert.True(t, res.OK)
					want := toolboxSteps
					if res.Version != "0.190.1" {
						want = slices.Concat(toolboxSteps, newerToolboxSteps)
						assert.ElementsMatch(t, newerToolboxSteps, res.Newer, "a later SDK runs what it added")
					} else {
						assert.Empty(t, res.Newer, "the pinned SDK runs only what it has")
					}
					assert.ElementsMatch(t, want, res.Ran, "every step ran")
					sim.assertNoServerErrors(t)
				})
			}
		})
	}
}

// nativeToolsEnv is the environment that gives native sandboxes the
// language tools (from toolbox/testdata/node, which `make test-deps`
// installs, and the host's python3, git and pylsp), skipping the test when
// they are missing.
func nativeToolsEnv(t *testing.T) []string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "toolbox", "testdata", "node", "node_modules", ".bin"))
	require.NoError(t, err)
	path := bin + string(os.PathListSeparator) + os.Getenv("PATH")
	var missing []string
	for _, tool := range sandboxTools {
		if _, err := lookPathIn(tool, path); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s not installed: `make test-deps` installs the node tools, .ci/run the others", strings.Join(missing, ", "))
	}
	return []string{"PATH=" + path}
}

// lookPathIn is exec.LookPath on another PATH.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// simProcess is a `sandplane sim` the test started.
type simProcess struct {
	url, apiKey, adminKey string
	stderr                *testdaemon.Buffer
	cmd                   *exec.Cmd
	// done is closed once the process has ended.
	done chan struct{}
}

// startSimProcess runs `sandplane sim --backend backend args...` (the
// binary built from this tree) on a free loopback port with env added, and
// stops it when t ends; stopping removes its sandboxes.
func startSimProcess(t *testing.T, backend string, env []string, args ...string) *simProcess {
	t.Helper()
	addr := testdaemon.FreeAddr(t)
	sim := &simProcess{url: "http://" + addr, apiKey: "ts-sdk-toolbox-key", adminKey: "ts-sdk-toolbox-admin", stderr: &testdaemon.Buffer{}}
	cmd := exec.Command(testdaemon.Binary(t), append([]string{"sim", "--listen", addr, "--backend", backend, "--root", t.TempDir(),
		"--api-key", sim.apiKey, "--admin-key", sim.adminKey}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = sim.stderr, sim.stderr
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	sim.cmd, sim.done = cmd, done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("sandplane sim did not stop within a minute of SIGTERM:\n%s", sim.stderr)
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		resp, err := http.Get(sim.url + "/api/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "sandplane sim did not come up:\n%s", sim.stderr)
	select {
	case <-done:
		t.Fatalf("sandplane sim exited:\n%s", sim.stderr)
	default:
	}
	return sim
}

// do sends a request with headers and a JSON body, and returns the status
// and the body.
func (s *simProcess) do(t *testing.T, method, path string, header http.Header, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	// Generous: the docker backend's first create may build its image.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	require.NoError(t, err)
	req.Header = header
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s; sim says:\n%s", method, path, s.stderr)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func (s *simProcess) api(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	return s.do(t, method, path, http.Header{"Authorization": {"Bearer " + s.apiKey}}, body)
}

func (s *simProcess) admin(t *testing.T, method, path string, body any) int {
	t.Helper()
	code, _ := s.do(t, method, path, http.Header{"Authorization": {"Bearer " + s.adminKey}, AdminAPIKeyHeader: {s.apiKey}}, body)
	return code
}

// missingTools runs `which` on sandboxTools in a new sandbox and returns
// those it did not find.
func (s *simProcess) missingTools(t *testing.T) []string {
	t.Helper()
	code, b := s.api(t, http.MethodPost, "/api/sandbox", map[string]any{})
	require.Equal(t, http.StatusOK, code, string(b))
	var sb struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	require.NoError(t, json.Unmarshal(b, &sb))
	defer func() {
		code, b := s.api(t, http.MethodDelete, "/api/sandbox/"+sb.ID, nil)
		assert.Equal(t, http.StatusOK, code, string(b))
	}()
	// The first create may wait for the image to be built.
	require.Eventually(t, func() bool {
		code, b := s.api(t, http.MethodGet, "/api/sandbox/"+sb.ID, nil)
		require.Equal(t, http.StatusOK, code, string(b))
		require.NoError(t, json.Unmarshal(b, &sb))
		require.NotContains(t, []string{"error", "build_failed"}, sb.State, string(b))
		return sb.State == "started"
	}, 10*time.Minute, 100*time.Millisecond, "the probe sandbox never started; sim says:\n%s", s.stderr)
	code, b = s.api(t, http.MethodPost, "/toolbox/"+sb.ID+"/process/execute",
		map[string]any{"command": "which " + strings.Join(sandboxTools, " ")})
	require.Equal(t, http.StatusOK, code, string(b))
	var res executeResponse
	require.NoError(t, json.Unmarshal(b, &res))
	found := map[string]bool{}
	for _, line := range strings.Split(res.Result, "\n") {
		found[filepath.Base(strings.TrimSpace(line))] = true
	}
	var missing []string
	for _, tool := range sandboxTools {
		if !found[tool] {
			missing = append(missing, tool)
		}
	}
	return missing
}

// assertNoServerErrors checks the call log of the run: the toolbox was
// reached, and nothing the SDK asked for failed on the server's side (the
// script's expected failures are all 4xx).
func (s *simProcess) assertNoServerErrors(t *testing.T) {
	t.Helper()
	code, b := s.do(t, http.MethodGet, "/_sim/calls",
		http.Header{"Authorization": {"Bearer " + s.adminKey}, AdminAPIKeyHeader: {s.apiKey}}, nil)
	require.Equal(t, http.StatusOK, code, string(b))
	var log struct {
		Calls  []Call         `json:"calls"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal(b, &log))
	assert.Greater(t, log.Counts["toolbox"], 100, "the run's toolbox calls: %v", log.Counts)
	upgrades := 0
	for _, c := range log.Calls {
		assert.Less(t, c.Status, 500, "%s %s (%s) answered %d", c.Method, c.Path, c.Operation, c.Status)
		if c.Status == http.StatusSwitchingProtocols {
			upgrades++
		}
	}
	// Logs followed, two or three PTY connections, eight interpreter runs.
	assert.GreaterOrEqual(t, upgrades, 10, "the WebSockets of the run")
	if t.Failed() {
		t.Logf("sandplane sim:\n%s", s.stderr)
	}
}
