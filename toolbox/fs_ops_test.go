package toolbox

import (
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func TestMove(t *testing.T) {
	ts := newTestServer(t, Options{})
	writeFiles(t, ts.workDir, map[string]string{"a.txt": "A", "taken.txt": "T", "dir/inner.txt": "I"})

	tests := []struct {
		name, src, dst string
		status         int
	}{
		{"rename a file", "a.txt", "b.txt", 200},
		{"move a directory", "dir", "moved", 200},
		{"missing source", "nope.txt", "x.txt", 404},
		{"existing destination", "b.txt", "taken.txt", 409},
		{"missing destination parent", "b.txt", "no/such/dir/b.txt", 400},
		{"into itself", "moved", "moved/sub", 400},
		{"no source", "", "x", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.do(t, http.MethodPost, "/files/move?source="+q(tt.src)+"&destination="+q(tt.dst), nil, "")
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			if tt.status != 200 {
				resp.apiErr(t)
			}
		})
	}
	b, err := os.ReadFile(filepath.Join(ts.workDir, "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "A", string(b))
	b, err = os.ReadFile(filepath.Join(ts.workDir, "moved", "inner.txt"))
	require.NoError(t, err)
	assert.Equal(t, "I", string(b))
	b, err = os.ReadFile(filepath.Join(ts.workDir, "taken.txt"))
	require.NoError(t, err)
	assert.Equal(t, "T", string(b), "a refused move leaves the destination alone")
}

func TestSetPermissions(t *testing.T) {
	ts := newTestServer(t, Options{})
	writeFiles(t, ts.workDir, map[string]string{"f.sh": "#!/bin/sh\n"})
	me, err := user.Current()
	require.NoError(t, err)
	grp, err := user.LookupGroupId(me.Gid)
	require.NoError(t, err)

	t.Run("mode", func(t *testing.T) {
		resp := ts.do(t, http.MethodPost, "/files/permissions?path=f.sh&mode=0750", nil, "")
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		fi, err := os.Stat(filepath.Join(ts.workDir, "f.sh"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
	})
	t.Run("owner and group by name and by id", func(t *testing.T) {
		for _, q := range []string{"owner=" + me.Username + "&group=" + grp.Name, "owner=" + me.Uid + "&group=" + me.Gid} {
			resp := ts.do(t, http.MethodPost, "/files/permissions?path=f.sh&"+q, nil, "")
			require.Equal(t, http.StatusOK, resp.status, "%s: %s", q, resp.body)
		}
		resp := ts.get(t, "/files/info?path=f.sh")
		var fi wire.FileInfo
		resp.json(t, &fi)
		assert.Equal(t, me.Uid, fi.Owner)
		assert.Equal(t, me.Gid, fi.Group)
	})
	t.Run("setgid bit", func(t *testing.T) {
		require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "shared"), 0o755))
		resp := ts.do(t, http.MethodPost, "/files/permissions?path=shared&mode=2775", nil, "")
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		fi, err := os.Stat(filepath.Join(ts.workDir, "shared"))
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&os.ModeSetgid)
		assert.Equal(t, os.FileMode(0o775), fi.Mode().Perm())
	})
	for _, tt := range []struct {
		name, query string
		status      int
	}{
		{"bad mode", "path=f.sh&mode=rwx", 400},
		{"mode out of range", "path=f.sh&mode=17777", 400},
		{"unknown owner", "path=f.sh&owner=no-such-user-sandplane", 400},
		{"unknown group", "path=f.sh&group=no-such-group-sandplane", 400},
		{"missing file", "path=nope&mode=0644", 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.do(t, http.MethodPost, "/files/permissions?"+tt.query, nil, "")
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
	if os.Geteuid() != 0 {
		t.Run("chown to another user is refused", func(t *testing.T) {
			resp := ts.do(t, http.MethodPost, "/files/permissions?path=f.sh&owner=0", nil, "")
			require.Equal(t, http.StatusForbidden, resp.status, "body: %s", resp.body)
		})
	}
}

func TestFindInFiles(t *testing.T) {
	ts := newTestServer(t, Options{})
	writeFiles(t, ts.workDir, map[string]string{
		"src/a.go":      "package a\n// TODO: one\nfunc A() {}\n",
		"src/sub/b.go":  "package sub\r\n\r\nvar x = 1 // TODO: two\r\n",
		"src/blob.bin":  "TODO\x00binary",
		"other/c.txt":   "TODO outside\n",
		"src/regex.txt": "a.b literal\naxb\n",
	})
	require.NoError(t, os.Symlink(filepath.Join(ts.workDir, "other"), filepath.Join(ts.workDir, "src", "link")))

	t.Run("relative path", func(t *testing.T) {
		var matches []wire.Match
		resp := ts.get(t, "/files/find?path=src&pattern=TODO")
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		resp.json(t, &matches)
		assert.Equal(t, []wire.Match{
			{File: "src/a.go", Line: 2, Content: "// TODO: one"},
			{File: "src/sub/b.go", Line: 3, Content: "var x = 1 // TODO: two"},
		}, matches, "binary files and symlinked directories are skipped; CRLF is trimmed")
	})
	t.Run("absolute path and a literal pattern", func(t *testing.T) {
		var matches []wire.Match
		ts.get(t, "/files/find?path="+q(filepath.Join(ts.workDir, "src"))+"&pattern="+q("a.b")).json(t, &matches)
		require.Len(t, matches, 1, "the pattern is text, not a regular expression")
		assert.Equal(t, filepath.Join(ts.workDir, "src", "regex.txt"), matches[0].File)
	})
	t.Run("a single file", func(t *testing.T) {
		var matches []wire.Match
		ts.get(t, "/files/find?path=other/c.txt&pattern=outside").json(t, &matches)
		assert.Equal(t, []wire.Match{{File: "other/c.txt", Line: 1, Content: "TODO outside"}}, matches)
	})
	t.Run("no match is an empty list", func(t *testing.T) {
		resp := ts.get(t, "/files/find?path=src&pattern=nothing-matches-this")
		require.Equal(t, http.StatusOK, resp.status)
		assert.JSONEq(t, "[]", string(resp.body))
	})
	for _, tt := range []struct {
		name, query string
		status      int
	}{
		{"no pattern", "path=src", 400},
		{"no path", "pattern=x", 400},
		{"missing dir", "path=nope&pattern=x", 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.get(t, "/files/find?"+tt.query)
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
}

func TestSearchFiles(t *testing.T) {
	ts := newTestServer(t, Options{})
	writeFiles(t, ts.workDir, map[string]string{
		"p/main.go": "", "p/main_test.go": "", "p/README.md": "", "p/cmd/tool.go": "", "p/x.go.txt": "",
	})
	require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "p", "vendor.go"), 0o755))

	var res wire.SearchFilesResponse
	resp := ts.get(t, "/files/search?path=p&pattern="+q("*.go"))
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	resp.json(t, &res)
	assert.Equal(t, []string{"p/cmd/tool.go", "p/main.go", "p/main_test.go", "p/vendor.go"}, res.Files)

	ts.get(t, "/files/search?path=p&pattern="+q("*.rs")).json(t, &res)
	assert.Empty(t, res.Files)
	assert.JSONEq(t, `{"files":[]}`, string(ts.get(t, "/files/search?path=p&pattern="+q("*.rs")).body))

	resp = ts.get(t, "/files/search?path=p&pattern="+q("[x"))
	require.Equal(t, http.StatusBadRequest, resp.status)
	resp.apiErr(t)
}

func TestReplaceInFiles(t *testing.T) {
	ts := newTestServer(t, Options{})
	writeFiles(t, ts.workDir, map[string]string{"a.txt": "old and old\n", "b.txt": "nothing here\n"})
	require.NoError(t, os.Chmod(filepath.Join(ts.workDir, "a.txt"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "dir"), 0o755))

	var results []wire.ReplaceResult
	resp := ts.postJSON(t, "/files/replace", map[string]any{
		"files": []string{"a.txt", "b.txt", "missing.txt", "dir"}, "pattern": "old", "newValue": "new",
	})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	resp.json(t, &results)
	require.Len(t, results, 4)
	assert.Equal(t, wire.ReplaceResult{File: "a.txt", Success: true}, results[0])
	assert.Equal(t, wire.ReplaceResult{File: "b.txt", Success: true}, results[1])
	assert.False(t, results[2].Success)
	assert.Contains(t, results[2].Error, "missing.txt")
	assert.False(t, results[3].Success)

	b, err := os.ReadFile(filepath.Join(ts.workDir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "new and new\n", string(b))
	fi, err := os.Stat(filepath.Join(ts.workDir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "permissions survive a replace")

	t.Run("empty new value deletes", func(t *testing.T) {
		resp := ts.postJSON(t, "/files/replace", map[string]any{"files": []string{"a.txt"}, "pattern": " and new", "newValue": ""})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		b, err := os.ReadFile(filepath.Join(ts.workDir, "a.txt"))
		require.NoError(t, err)
		assert.Equal(t, "new\n", string(b))
	})
	for _, tt := range []struct {
		name string
		body any
	}{
		{"no files", map[string]any{"files": []string{}, "pattern": "a", "newValue": "b"}},
		{"empty pattern", map[string]any{"files": []string{"a.txt"}, "pattern": "", "newValue": "b"}},
		{"no new value", map[string]any{"files": []string{"a.txt"}, "pattern": "a"}},
		{"not JSON", "{"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/files/replace", tt.body)
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
}

func TestUploadThroughDanglingSymlink(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.NoError(t, os.Symlink("target.txt", filepath.Join(ts.workDir, "link")))
	resp := ts.upload(t, "link", "through")
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	b, err := os.ReadFile(filepath.Join(ts.workDir, "target.txt"))
	require.NoError(t, err)
	assert.Equal(t, "through", string(b))
	fi, err := os.Lstat(filepath.Join(ts.workDir, "link"))
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the link stays a link")
}

func TestBulkDownloadPartLength(t *testing.T) {
	ts := newTestServer(t, Options{})
	content := make([]byte, 300<<10)
	for i := range content {
		content[i] = byte(i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(ts.workDir, "big.bin"), content, 0o644))
	parts := readParts(t, ts.postJSON(t, "/files/bulk-download", wire.FilesDownloadRequest{Paths: []string{"big.bin"}}))
	require.Len(t, parts, 1)
	assert.Equal(t, strconv.Itoa(len(content)), parts[0].length)
	assert.Equal(t, content, parts[0].body)
}
