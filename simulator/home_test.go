package simulator

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/simulator/internal/backend"
)

// gitFixture is a local repository with one commit of README.md.
func gitFixture(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "empty"},
	} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("fixture\n"), 0o644))
	for _, args := range [][]string{
		{"add", "README.md"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "readme"},
	} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

// upload sends content to path through the simulator's toolbox proxy.
func (h *harness) upload(id, path, content string) int {
	h.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", filepath.Base(path))
	require.NoError(h.t, err)
	_, _ = fw.Write([]byte(content))
	require.NoError(h.t, mw.Close())
	req, err := http.NewRequest("POST", h.srv.URL+"/toolbox/"+id+"/files/upload?path="+path, &buf)
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A native sandbox's home is /home/daytona as the SDKs see it: a private
// directory shown there in the workload's own mount namespace, never the
// host's /home/daytona.
func TestNativeSandboxHomeIsHomeDaytona(t *testing.T) {
	rt := native.New()
	if !rt.CanBind() {
		t.Skipf("this machine gives workloads no mount namespace (%s), so a native sandbox's home stays its private directory", rt.Containment())
	}
	_, hostErr := os.Lstat(backend.NativeHome)
	hostHad := hostErr == nil
	root := t.TempDir()
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime: rt, Root: root, Command: []string{toolboxBinary(t)}, StopGrace: 2 * time.Second,
	})
	require.NoError(t, err)
	h := newHarness(t, func(c *Config) { c.Backend = be })
	repo := gitFixture(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	private := filepath.Join(root, "sandboxes", sb.Id, "home")

	for _, p := range []string{"/user-home-dir", "/work-dir"} {
		code, body, _ := h.raw("GET", "/toolbox/"+sb.Id+p, nil)
		require.Equal(t, http.StatusOK, code, string(body))
		assert.JSONEq(t, `{"dir":"/home/daytona"}`, string(body), p)
	}
	require.Equal(t, http.StatusOK, h.upload(sb.Id, "/home/daytona/x.txt", "uploaded"))
	code, body, _ := h.raw("POST", "/toolbox/"+sb.Id+"/git/clone", map[string]any{"url": repo, "path": "/home/daytona/repo"})
	require.Equal(t, http.StatusOK, code, string(body))

	code, res, body := h.execute(sb.Id, map[string]any{"command": `cd /home/daytona && ls && echo "$HOME" && pwd && cat repo/README.md`})
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, 0, res.ExitCode, res.Result)
	assert.Equal(t, "repo\nx.txt\n/home/daytona\n/home/daytona\nfixture\n", res.Result)
	code, res, _ = h.execute(sb.Id, map[string]any{"command": `pwd; ls ~`})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "/home/daytona\nrepo\nx.txt\n", res.Result, "commands start in the home")

	got, err := os.ReadFile(filepath.Join(private, "x.txt"))
	require.NoError(t, err, "the upload lands in the sandbox's private directory")
	assert.Equal(t, "uploaded", string(got))
	assert.FileExists(t, filepath.Join(private, "repo", "README.md"))
	if !hostHad {
		_, err := os.Lstat(backend.NativeHome)
		assert.True(t, os.IsNotExist(err), "the host's %s was made: %v", backend.NativeHome, err)
	}

	// A second sandbox has a home of its own.
	other := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, other.GetState(), other.GetErrorReason())
	code, res, _ = h.execute(other.Id, map[string]any{"command": `ls -A /home/daytona | wc -l`})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "0\n", res.Result)
}

// A declarative build on the native backend is refused at create, for a
// sandbox and a snapshot alike, naming the backend that builds.
func TestNativeBackendRefusesDeclarativeBuilds(t *testing.T) {
	h := nativeHarness(t)
	build := map[string]any{"dockerfileContent": "FROM debian:12-slim\n"}
	for _, tt := range []struct{ name, path string }{
		{"sandbox", "/api/sandbox"},
		{"snapshot", "/api/snapshots"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := h.raw("POST", tt.path, map[string]any{"name": "built-" + tt.name, "buildInfo": build})
			require.Equal(t, http.StatusBadRequest, code, string(body))
			nest := h.nestError(body)
			assert.Contains(t, nest.Message, "--backend docker")
			assert.Equal(t, "Bad Request", nest.Error)
		})
	}
	code, body, _ := h.raw("GET", "/api/sandbox", nil)
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, string(body), "built-sandbox", "nothing was created")
}

// Where workloads get no mount namespace (process groups), a native
// sandbox's home stays its private directory, and the toolbox maps the
// SDKs' /home/daytona paths onto it: the host's /home/daytona is never
// made or written.
func TestNativeSandboxHomeWithoutAMountNamespace(t *testing.T) {
	if _, err := os.Lstat(backend.NativeHome); err == nil {
		t.Skipf("this machine has a %s of its own, which this test must not write to", backend.NativeHome)
	}
	rt := native.New(native.WithContainment(native.ContainProcessGroup))
	require.False(t, rt.CanBind())
	root := t.TempDir()
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime: rt, Root: root, Command: []string{toolboxBinary(t)}, StopGrace: 2 * time.Second,
	})
	require.NoError(t, err)
	h := newHarness(t, func(c *Config) { c.Backend = be })
	repo := gitFixture(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	private := filepath.Join(root, "sandboxes", sb.Id, "home")

	require.Equal(t, http.StatusOK, h.upload(sb.Id, "/home/daytona/x.txt", "uploaded"))
	code, body, _ := h.raw("POST", "/toolbox/"+sb.Id+"/git/clone", map[string]any{"url": repo, "path": "/home/daytona/repo"})
	require.Equal(t, http.StatusOK, code, string(body))
	code, res, body := h.execute(sb.Id, map[string]any{"command": `ls; echo "$HOME"; cat repo/README.md`, "cwd": "/home/daytona"})
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, "repo\nx.txt\n"+private+"\nfixture\n", res.Result)
	got, err := os.ReadFile(filepath.Join(private, "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "uploaded", string(got))
	_, err = os.Lstat(backend.NativeHome)
	assert.True(t, os.IsNotExist(err), "the host's %s was made: %v", backend.NativeHome, err)
}
