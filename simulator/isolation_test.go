package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
