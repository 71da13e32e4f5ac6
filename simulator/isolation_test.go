package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
)

// upload sends content to path in sandbox id through the toolbox proxy, as
// Daytona's SDKs and MCP server's file_upload do.
func (r *running) upload(id, path, content string) {
	r.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", filepath.Base(path))
	require.NoError(r.t, err)
	_, _ = fw.Write([]byte(content))
	require.NoError(r.t, mw.Close())
	req, err := http.NewRequest("POST", "http://"+r.addr+"/toolbox/"+id+"/files/upload?path="+path, &buf)
	require.NoError(r.t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer run-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(r.t, http.StatusOK, resp.StatusCode, string(b))
}

// list names the entries of dir in sandbox id, through the toolbox proxy.
func (r *running) list(id, dir string) []string {
	r.t.Helper()
	code, body := r.do("GET", "/toolbox/"+id+"/files?path="+dir, "run-key", nil)
	require.Equal(r.t, http.StatusOK, code, string(body))
	var entries []struct{ Name string }
	require.NoError(r.t, json.Unmarshal(body, &entries))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return names
}

// bwrapWorks skips the test where bubblewrap cannot isolate.
func bwrapWorks(t *testing.T) {
	t.Helper()
	if err := native.New().ProbeIsolation(context.Background()); err != nil {
		t.Skipf("bubblewrap does not isolate here: %v", err)
	}
}

// A default simulator's native sandboxes are isolated where bubblewrap
// works: a file uploaded to /tmp lands in the sandbox's own /tmp, not the
// host's, and listing /tmp shows none of the host's files.
func TestRunIsolatesNativeWorkloadsByDefault(t *testing.T) {
	bwrapWorks(t)
	hostTmp := "/tmp" // the host's, whatever TMPDIR the test has
	marker, err := os.CreateTemp(hostTmp, "sandplane-host-marker-")
	require.NoError(t, err)
	marker.Close()
	t.Cleanup(func() { os.Remove(marker.Name()) })
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	r := startRun(t, RunConfig{Toolbox: []string{toolboxBinary(t)}, Root: root})
	assert.NotContains(t, r.log.String(), UnisolatedWarning, "nothing to warn of")

	id, _ := r.createAndExecute("true")
	upload := filepath.Join(hostTmp, "x-"+id+".txt")
	t.Cleanup(func() { os.Remove(upload) })
	r.upload(id, upload, "inside")
	_, err = os.Stat(upload)
	assert.True(t, os.IsNotExist(err), "the upload did not write the host's %s: %v", upload, err)
	names := r.list(id, hostTmp)
	assert.Contains(t, names, filepath.Base(upload), "the sandbox has its file, in its own /tmp")
	assert.NotContains(t, names, filepath.Base(marker.Name()), "the sandbox's /tmp shows none of the host's files")
}

// Where bubblewrap cannot isolate, the simulator says so once at start and
// runs its sandboxes unisolated; --isolation bwrap then refuses to start,
// and --isolation none opts out without a word.
func TestRunSaysOnceWhenItCannotIsolate(t *testing.T) {
	toolbox := []string{toolboxBinary(t)} // built before PATH loses go
	t.Setenv("PATH", t.TempDir())         // no bwrap to find
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	r := startRun(t, RunConfig{Toolbox: toolbox, Root: root})
	logged := r.log.String()
	assert.Equal(t, 1, strings.Count(logged, UnisolatedWarning), logged)
	assert.Contains(t, logged, "apt-get install bubblewrap", "the reason names the fix")
	require.NoError(t, r.stop())

	r = startRun(t, RunConfig{Toolbox: toolbox, Root: root, Isolation: native.IsolationNone})
	assert.NotContains(t, r.log.String(), UnisolatedWarning, "an explicit opt-out is not warned of")
	require.NoError(t, r.stop())

	err := Run(context.Background(), RunConfig{Listen: "127.0.0.1:0", Toolbox: toolbox, Root: root, Isolation: native.IsolationBwrap})
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "isolation asked for must work: %v", err)
	assert.ErrorContains(t, err, "--isolation bwrap")
	assert.ErrorContains(t, err, "apt-get install bubblewrap")
}

func TestRunRefusesAnUnknownIsolation(t *testing.T) {
	err := Run(context.Background(), RunConfig{Isolation: "chroot"})
	assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
	assert.ErrorContains(t, err, `unknown --isolation "chroot"`)
}

// A preview of a port an isolated sandbox serves inside its own network
// reaches that server, and never what the host serves on the same port of
// its own loopback.
func TestIsolatedPreviewReachesTheSandboxNotTheHost(t *testing.T) {
	bwrapWorks(t)
	decoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "the host's own service")
	}))
	t.Cleanup(decoy.Close)
	_, port, _ := net.SplitHostPort(decoy.Listener.Addr().String())
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	r := startRun(t, RunConfig{Toolbox: []string{toolboxBinary(t)}, Root: root})

	code, body := r.do("POST", "/api/sandbox", "run-key", map[string]any{"public": true})
	require.Equal(t, http.StatusOK, code, string(body))
	var sb struct{ ID string }
	require.NoError(t, json.Unmarshal(body, &sb))
	code, body = r.do("POST", "/toolbox/"+sb.ID+"/process/execute", "run-key", map[string]any{
		"command": "sh -c 'PORT=" + port + " nohup " + toolboxBinary(t) + " >/dev/null 2>&1 &'"})
	require.Equal(t, http.StatusOK, code, string(body))

	var got string
	require.Eventually(t, func() bool {
		code, b := r.do("GET", "/_preview/"+port+"-"+sb.ID+"/_test/headers", "run-key", nil)
		got = string(b)
		return code == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the sandbox's server never answered its preview: %s", got)
	assert.NotContains(t, got, "the host's own service", "the preview went to the host's port")
	assert.Contains(t, got, "Host", "the sandbox's own server answered (its /_test/headers)")
}

// An isolated native sandbox has no way to the secrets proxy on the host's
// loopback: a create with secrets is refused, naming --isolation none.
func TestIsolatedNativeRefusesSecrets(t *testing.T) {
	bwrapWorks(t)
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	r := startRun(t, RunConfig{Toolbox: []string{toolboxBinary(t)}, Root: root})
	code, body := r.do("POST", "/api/secret", "run-key", map[string]any{"name": "k", "value": "v"})
	require.Equal(t, http.StatusCreated, code, string(body))
	code, body = r.do("POST", "/api/sandbox", "run-key", map[string]any{"secrets": []map[string]string{{"K": "k"}}})
	assert.Equal(t, http.StatusBadRequest, code, string(body))
	assert.Contains(t, string(body), "--isolation none")
}
