package toolbox

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// Unconfined, the toolbox sees the file system as the sandbox user does, like
// Daytona's daemon: ".." is resolved lexically against the work dir and
// absolute paths are taken as they are.
func TestUnconfinedPaths(t *testing.T) {
	parent := t.TempDir()
	work := filepath.Join(parent, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	ts := newTestServer(t, Options{WorkDir: work})

	require.Equal(t, http.StatusOK, ts.upload(t, "../beside.txt", "up").status)
	b, err := os.ReadFile(filepath.Join(parent, "beside.txt"))
	require.NoError(t, err)
	assert.Equal(t, "up", string(b))

	resp := ts.get(t, "/files/info?path="+q(filepath.Join(parent, "x", "..", "beside.txt")))
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)

	t.Run("absolute symlinks are followed", func(t *testing.T) {
		// Sandbox images are full of them (/etc/localtime, alternatives).
		require.NoError(t, os.Symlink(filepath.Join(parent, "beside.txt"), filepath.Join(work, "abs-link")))
		resp := ts.get(t, "/files/download?path=abs-link")
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		assert.Equal(t, "up", string(resp.body))
		require.Equal(t, http.StatusOK, ts.upload(t, "abs-link", "through").status)
		b, err := os.ReadFile(filepath.Join(parent, "beside.txt"))
		require.NoError(t, err)
		assert.Equal(t, "through", string(b))
	})
	t.Run("NUL bytes are refused", func(t *testing.T) {
		resp := ts.get(t, "/files/info?path="+q("a\x00b"))
		require.Equal(t, http.StatusBadRequest, resp.status)
		assert.Contains(t, resp.apiErr(t).Message, "NUL")
	})
	t.Run("the file system root cannot be deleted", func(t *testing.T) {
		resp := ts.do(t, http.MethodDelete, "/files?path=/&recursive=true", nil, "")
		require.Equal(t, http.StatusBadRequest, resp.status)
		resp.apiErr(t)
	})
}

func TestConfinedRoot(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("secret"), 0o600))

	root := t.TempDir()
	work := filepath.Join(root, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "top.txt"), []byte("top"), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(work, "abs-link")))
	require.NoError(t, os.Symlink("../../"+filepath.Base(outside)+"/secret.txt", filepath.Join(work, "rel-link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(work, "dir-link")))
	require.NoError(t, os.Symlink("../top.txt", filepath.Join(work, "inside-link")))
	ts := newTestServer(t, Options{WorkDir: work, Root: root})

	tests := []struct {
		name   string
		method string
		path   string
		status int
	}{
		{"dot-dot out of the root", http.MethodGet, "/files/download?path=" + q("../../etc/passwd"), 403},
		{"absolute path outside", http.MethodGet, "/files/download?path=" + q(secret), 403},
		{"absolute symlink out", http.MethodGet, "/files/download?path=abs-link", 403},
		{"relative symlink out", http.MethodGet, "/files/download?path=rel-link", 403},
		{"through a directory symlink", http.MethodGet, "/files/info?path=" + q("dir-link/secret.txt"), 403},
		{"list outside", http.MethodGet, "/files?path=" + q(outside), 403},
		{"list through a symlink", http.MethodGet, "/files?path=dir-link", 403},
		{"mkdir outside", http.MethodPost, "/files/folder?path=" + q("../../evil"), 403},
		{"mkdir through a symlink", http.MethodPost, "/files/folder?path=" + q("dir-link/evil"), 403},
		{"delete outside", http.MethodDelete, "/files?path=" + q(secret), 403},
		{"delete the root", http.MethodDelete, "/files?path=..&recursive=true", 400},
		{"parent inside the root is fine", http.MethodGet, "/files/download?path=" + q("../top.txt"), 200},
		{"symlink inside the root is fine", http.MethodGet, "/files/download?path=inside-link", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.do(t, tt.method, tt.path, nil, "")
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			if tt.status == http.StatusOK {
				assert.Equal(t, "top", string(resp.body))
				return
			}
			e := resp.apiErr(t)
			assert.NotContains(t, e.Message, "secret\n")
		})
	}

	t.Run("uploads cannot escape", func(t *testing.T) {
		for _, p := range []string{"../../evil.txt", "dir-link/evil.txt", filepath.Join(outside, "evil.txt")} {
			resp := ts.upload(t, p, "evil")
			assert.Equal(t, http.StatusForbidden, resp.status, "%s: %s", p, resp.body)
		}
		entries, err := os.ReadDir(outside)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "only the secret is there")
	})

	t.Run("bulk download reports an escape per file", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(work, "ok.txt"), []byte("ok"), 0o644))
		parts := readParts(t, ts.postJSON(t, "/files/bulk-download", wire.FilesDownloadRequest{Paths: []string{"abs-link", "ok.txt"}}))
		require.Len(t, parts, 2)
		assert.Equal(t, "error", parts[0].name)
		assert.Contains(t, string(parts[0].body), "FILE_ACCESS_DENIED")
		assert.Equal(t, "ok", string(parts[1].body))
	})

	content, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "secret", string(content))
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"a", "../x", "/etc/passwd", "a/../../b", "", ".", "..", "/", "a\x00b", "//x//y/"} {
		f.Add(s)
	}
	root := f.TempDir()
	work := filepath.Join(root, "w")
	fs, err := newFsys(root, work, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tg, err := fs.resolve(p)
		if err != nil {
			return
		}
		if !filepath.IsAbs(tg.abs) || filepath.Clean(tg.abs) != tg.abs {
			t.Fatalf("%q: abs %q", p, tg.abs)
		}
		if filepath.IsAbs(tg.rel) || tg.rel == ".." || len(tg.rel) >= 3 && tg.rel[:3] == "../" {
			t.Fatalf("%q: rel %q leaves the root", p, tg.rel)
		}
		if filepath.Join(root, tg.rel) != tg.abs {
			t.Fatalf("%q: rel %q and abs %q disagree", p, tg.rel, tg.abs)
		}
	})
}

// TestHiddenDirectories: the file endpoints refuse what lies in a hidden
// directory (the daemon's state directory, where other sandboxes keep their
// secrets), through "..", absolute paths and symlinks, in walks too, but not
// the work dir inside it.
func TestHiddenDirectories(t *testing.T) {
	root := t.TempDir()
	own := filepath.Join(root, "a")
	other := filepath.Join(root, "b")
	require.NoError(t, os.MkdirAll(own, 0o700))
	require.NoError(t, os.MkdirAll(other, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(other, "runtime-env.json"), []byte(`{"KEY":"secret"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(own, "mine.txt"), []byte("mine"), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(other, "runtime-env.json"), filepath.Join(own, "link")))
	f, err := newFsys("", own, []string{root})
	require.NoError(t, err)

	for _, p := range []string{
		filepath.Join(other, "runtime-env.json"),
		"../b/runtime-env.json",
		"link",
		root,
		filepath.Join(other, "new-file"),
	} {
		_, err := f.resolve(p)
		var ae *apiError
		require.ErrorAs(t, err, &ae, p)
		assert.Equal(t, http.StatusForbidden, ae.status, p)
	}
	for _, p := range []string{"mine.txt", filepath.Join(own, "mine.txt"), "new-file", "/etc/hostname"} {
		_, err := f.resolve(p)
		assert.NoError(t, err, p)
	}

	// Walk from the hidden directory's parent: nothing of b is visited.
	var seen []string
	parent, err := f.resolve(filepath.Dir(root))
	require.NoError(t, err)
	require.NoError(t, f.walk(parent, func(rel string, d fs.DirEntry) error {
		seen = append(seen, rel)
		return nil
	}))
	for _, rel := range seen {
		assert.NotContains(t, rel, filepath.Base(other)+"/runtime-env.json")
	}
	assert.Contains(t, seen, filepath.Base(root)+"/a/mine.txt", "the work dir stays visible")
}

// TestHiddenDirectoriesListed: a listing, at any depth, shows nothing of a
// hidden directory (not a name, not a size through a link) but the way
// down to the work dir inside it.
func TestHiddenDirectoriesListed(t *testing.T) {
	root := t.TempDir()
	own := filepath.Join(root, "a")
	other := filepath.Join(root, "b")
	require.NoError(t, os.MkdirAll(own, 0o700))
	require.NoError(t, os.MkdirAll(other, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(other, "runtime-env.json"), []byte(`{"KEY":"secret"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(own, "mine.txt"), []byte("mine"), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(other, "runtime-env.json"), filepath.Join(own, "link")))
	f, err := newFsys("", own, []string{root})
	require.NoError(t, err)

	parent, err := f.resolve(filepath.Dir(root))
	require.NoError(t, err)
	list, err := f.list(parent, 4)
	require.NoError(t, err)
	var paths []string
	for _, fi := range list {
		if strings.HasPrefix(fi.Path, root) {
			paths = append(paths, fi.Path)
		}
	}
	assert.Equal(t, []string{root, own, filepath.Join(own, "mine.txt")}, paths)

	mine, err := f.resolve(own)
	require.NoError(t, err)
	list, err = f.list(mine, 1)
	require.NoError(t, err)
	require.Len(t, list, 1, "the link into the hidden directory is not listed")
	assert.Equal(t, "mine.txt", list[0].Name)
}
