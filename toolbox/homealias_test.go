package toolbox

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// With HomeAlias, a path under the alias is the same path under HomeDir
// for every endpoint that takes one; the alias itself is never touched.
func TestHomeAliasMapsRequestPaths(t *testing.T) {
	isolateGit(t)
	alias := filepath.Join(t.TempDir(), "home", "daytona") // never made
	home := t.TempDir()
	ts := newTestServer(t, Options{HomeDir: home, HomeAlias: alias})
	bare := filepath.Join(t.TempDir(), "origin.git")
	bareFixture(t, bare)

	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "x.txt")
	require.NoError(t, err)
	_, _ = fw.Write([]byte("mapped"))
	require.NoError(t, mw.Close())
	resp := ts.do(t, http.MethodPost, "/files/upload?path="+alias+"/x.txt", &buf, mw.FormDataContentType())
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	got, err := os.ReadFile(filepath.Join(home, "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "mapped", string(got))

	resp = ts.get(t, "/files/download?path="+alias+"/x.txt")
	require.Equal(t, http.StatusOK, resp.status)
	assert.Equal(t, "mapped", string(resp.body))
	resp = ts.get(t, "/files?path="+alias)
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	assert.Contains(t, string(resp.body), `"name":"x.txt"`)

	gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "file://" + bare, Path: alias + "/repo"}, 200)
	assert.FileExists(t, filepath.Join(home, "repo", "README.md"))
	assert.Equal(t, "main", gitStatus(t, ts, alias+"/repo").CurrentBranch)

	cwd := alias + "/repo"
	resp = ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: "pwd", Cwd: &cwd})
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	var out wire.ExecuteResponse
	resp.json(t, &out)
	assert.Equal(t, filepath.Join(home, "repo")+"\n", out.Result)

	_, err = os.Lstat(alias)
	assert.True(t, os.IsNotExist(err), "the alias was made: %v", err)
	_, err = newServer(Options{HomeAlias: "relative/home"})
	assert.Error(t, err, "an alias must be absolute")
}
