package toolbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func q(p string) string { return url.QueryEscape(p) }

// multipartBody builds a form from name/value pairs; a value is sent as a
// file part when its name ends in ".file" or is "file".
func multipartBody(t *testing.T, fields ...string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i < len(fields); i += 2 {
		name, value := fields[i], fields[i+1]
		var w io.Writer
		var err error
		if name == "file" || strings.HasSuffix(name, ".file") {
			w, err = mw.CreateFormFile(name, "blob")
		} else {
			w, err = mw.CreateFormField(name)
		}
		require.NoError(t, err)
		_, err = io.WriteString(w, value)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return &buf, mw.FormDataContentType()
}

func (ts *testServer) upload(t *testing.T, path, content string) response {
	t.Helper()
	body, ctype := multipartBody(t, "file", content)
	return ts.do(t, http.MethodPost, "/files/upload?path="+q(path), body, ctype)
}

func TestUploadDownloadRoundTrip(t *testing.T) {
	ts := newTestServer(t, Options{})
	binary := string([]byte{0, 1, 2, 255, '\n', 'x'})

	tests := []struct {
		name     string
		path     string
		content  string
		diskPath string
	}{
		{name: "relative path", path: "hello.txt", content: "hello, world\n", diskPath: "hello.txt"},
		{name: "creates parent directories", path: "a/b/c.bin", content: binary, diskPath: "a/b/c.bin"},
		{name: "absolute path", path: filepath.Join(ts.workDir, "abs.txt"), content: "abs", diskPath: "abs.txt"},
		{name: "empty file", path: "empty", content: "", diskPath: "empty"},
		{name: "overwrite", path: "hello.txt", content: "second", diskPath: "hello.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.upload(t, tt.path, tt.content)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)

			onDisk, err := os.ReadFile(filepath.Join(ts.workDir, tt.diskPath))
			require.NoError(t, err)
			assert.Equal(t, tt.content, string(onDisk))

			resp = ts.get(t, "/files/download?path="+q(tt.path))
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			assert.Equal(t, tt.content, string(resp.body))
			assert.Equal(t, "application/octet-stream", resp.header.Get("Content-Type"))
			_, params, err := mime.ParseMediaType(resp.header.Get("Content-Disposition"))
			require.NoError(t, err)
			assert.Equal(t, filepath.Base(tt.diskPath), params["filename"])
		})
	}

	t.Run("no temp files are left behind", func(t *testing.T) {
		matches, err := filepath.Glob(filepath.Join(ts.workDir, ".sandplane-upload-*"))
		require.NoError(t, err)
		assert.Empty(t, matches)
	})

	t.Run("overwrite keeps permissions", func(t *testing.T) {
		p := filepath.Join(ts.workDir, "script.sh")
		require.NoError(t, os.WriteFile(p, []byte("old"), 0o755))
		require.Equal(t, http.StatusOK, ts.upload(t, "script.sh", "#!/bin/sh\n").status)
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	})
}

func TestUploadErrors(t *testing.T) {
	ts := newTestServer(t, Options{MaxUploadBytes: 1 << 10})
	require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "dir"), 0o755))

	noFile, noFileType := multipartBody(t, "other", "x")
	big, bigType := multipartBody(t, "file", strings.Repeat("z", 4<<10))
	tests := []struct {
		name   string
		path   string
		body   io.Reader
		ctype  string
		status int
	}{
		{name: "no path", path: "", body: strings.NewReader(""), ctype: "multipart/form-data; boundary=x", status: 400},
		{name: "not multipart", path: "f", body: strings.NewReader("raw"), ctype: "text/plain", status: 415},
		{name: "no file part", path: "f", body: noFile, ctype: noFileType, status: 400},
		{name: "too large", path: "big", body: big, ctype: bigType, status: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.do(t, http.MethodPost, "/files/upload?path="+q(tt.path), tt.body, tt.ctype)
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
	t.Run("onto a directory", func(t *testing.T) {
		resp := ts.upload(t, "dir", "x")
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
		resp.apiErr(t)
	})
	_, err := os.Stat(filepath.Join(ts.workDir, "big"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a rejected upload leaves nothing behind")
}

func TestDownloadErrors(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "dir"), 0o755))
	tests := []struct {
		name, path string
		status     int
		code       string
	}{
		{"missing path", "", 400, "BAD_REQUEST"},
		{"not found", "nope.txt", 404, "FILE_NOT_FOUND"},
		{"directory", "dir", 400, "BAD_REQUEST"},
		{"named pipe", "fifo", 400, "BAD_REQUEST"},
	}
	// Opening a pipe for reading waits for a writer; a download must not.
	fifo := filepath.Join(ts.workDir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	t.Cleanup(func() {
		// Let a download stuck in open(2) go, so the server can close.
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			f.Close()
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.get(t, "/files/download?path="+q(tt.path))
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			assert.Equal(t, tt.code, resp.apiErr(t).Code)
		})
	}
}

func TestBulkUpload(t *testing.T) {
	ts := newTestServer(t, Options{})

	t.Run("all files", func(t *testing.T) {
		body, ctype := multipartBody(t,
			"files[0].path", "one.txt",
			"files[0].file", "first",
			"files[1].path", "nested/dir/two.txt",
			"files[1].file", "second!",
		)
		resp := ts.do(t, http.MethodPost, "/files/bulk-upload", body, ctype)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		var got struct{ Files []uploadedFile }
		resp.json(t, &got)
		assert.Equal(t, []uploadedFile{{Path: "one.txt", Bytes: 5}, {Path: "nested/dir/two.txt", Bytes: 7}}, got.Files)
		b, err := os.ReadFile(filepath.Join(ts.workDir, "nested/dir/two.txt"))
		require.NoError(t, err)
		assert.Equal(t, "second!", string(b))
	})

	t.Run("partial failure reports errors and keeps the good files", func(t *testing.T) {
		body, ctype := multipartBody(t,
			"files[0].file", "orphan",
			"files[1].path", "good.txt",
			"files[1].file", "ok",
			"files[2].path", "   ",
		)
		resp := ts.do(t, http.MethodPost, "/files/bulk-upload", body, ctype)
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
		e := resp.apiErr(t)
		assert.Equal(t, "BAD_REQUEST", e.Code)
		var got struct {
			Errors []string
			Files  []uploadedFile
		}
		resp.json(t, &got)
		assert.Equal(t, []string{"file[0]: missing .path metadata", "path[2]: empty path"}, got.Errors)
		assert.Equal(t, []uploadedFile{{Path: "good.txt", Bytes: 2}}, got.Files)
		_, err := os.Stat(filepath.Join(ts.workDir, "good.txt"))
		assert.NoError(t, err)
	})

	t.Run("not multipart", func(t *testing.T) {
		resp := ts.do(t, http.MethodPost, "/files/bulk-upload", strings.NewReader("{}"), "application/json")
		require.Equal(t, http.StatusUnsupportedMediaType, resp.status)
		resp.apiErr(t)
	})
}

// downloadPart is one part of a bulk download.
type downloadPart struct {
	name, filename, ctype, length string
	body                          []byte
}

func readParts(t *testing.T, resp response) []downloadPart {
	t.Helper()
	mediaType, params, err := mime.ParseMediaType(resp.header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/form-data", mediaType)
	require.Equal(t, DownloadBoundary, params["boundary"])
	mr := multipart.NewReader(bytes.NewReader(resp.body), params["boundary"])
	var parts []downloadPart
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return parts
		}
		require.NoError(t, err)
		b, err := io.ReadAll(p)
		require.NoError(t, err)
		// Part.FileName strips directories; the SDKs read the raw parameter.
		_, dp, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		require.NoError(t, err)
		parts = append(parts, downloadPart{name: p.FormName(), filename: dp["filename"], ctype: p.Header.Get("Content-Type"), length: p.Header.Get("Content-Length"), body: b})
	}
}

func TestBulkDownload(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(ts.workDir, "a.txt"), []byte("alpha"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(ts.workDir, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ts.workDir, "d", "b.bin"), []byte{0, 1, 2}, 0o644))
	absB := filepath.Join(ts.workDir, "d", "b.bin")

	resp := ts.postJSON(t, "/files/bulk-download", wire.FilesDownloadRequest{Paths: []string{"a.txt", "missing.txt", absB, "d"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	parts := readParts(t, resp)
	require.Len(t, parts, 4)

	assert.Equal(t, "file", parts[0].name)
	assert.Equal(t, "a.txt", parts[0].filename, "filename is the path as requested")
	assert.Equal(t, "alpha", string(parts[0].body))
	assert.Contains(t, parts[0].ctype, "text/plain")
	assert.Equal(t, "5", parts[0].length, "each file part carries its length, for progress totals")

	assert.Equal(t, "error", parts[1].name)
	assert.Equal(t, "missing.txt", parts[1].filename)
	var e wire.ErrorResponse
	require.NoError(t, json.Unmarshal(parts[1].body, &e), "%s", parts[1].body)
	assert.Equal(t, http.StatusNotFound, e.StatusCode)
	assert.Equal(t, "FILE_NOT_FOUND", e.Code)
	assert.Equal(t, "file not found: missing.txt", e.Message)
	assert.Equal(t, "missing.txt", e.Path)
	assert.Equal(t, http.MethodPost, e.Method)

	assert.Equal(t, "file", parts[2].name)
	assert.Equal(t, absB, parts[2].filename)
	assert.Equal(t, []byte{0, 1, 2}, parts[2].body)

	assert.Equal(t, "error", parts[3].name)
	require.NoError(t, json.Unmarshal(parts[3].body, &e))
	assert.Equal(t, "INVALID_FILE_PATH", e.Code)

	t.Run("bad requests", func(t *testing.T) {
		for _, body := range []string{`{}`, `{"paths":[]}`, `not json`, `{"paths":"a"}`} {
			resp := ts.postJSON(t, "/files/bulk-download", body)
			assert.Equal(t, http.StatusBadRequest, resp.status, "body %s", body)
			resp.apiErr(t)
		}
	})

	t.Run("quotes in the path survive", func(t *testing.T) {
		name := `we"ird\name.txt`
		require.NoError(t, os.WriteFile(filepath.Join(ts.workDir, name), []byte("q"), 0o644))
		parts := readParts(t, ts.postJSON(t, "/files/bulk-download", wire.FilesDownloadRequest{Paths: []string{name}}))
		require.Len(t, parts, 1)
		assert.Equal(t, name, parts[0].filename)
		assert.Equal(t, "q", string(parts[0].body))
	})
}

func TestFolderListInfoDelete(t *testing.T) {
	ts := newTestServer(t, Options{})

	resp := ts.do(t, http.MethodPost, "/files/folder?path=proj/src&mode=0750", nil, "")
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	fi, err := os.Stat(filepath.Join(ts.workDir, "proj/src"))
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm()&^umask(t))

	require.Equal(t, http.StatusOK, ts.upload(t, "proj/readme.md", "# hi\n").status)
	require.NoError(t, os.Symlink("readme.md", filepath.Join(ts.workDir, "proj", "link")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(ts.workDir, "proj", "dangling")))

	t.Run("list", func(t *testing.T) {
		resp := ts.get(t, "/files?path=proj")
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		var list []wire.FileInfo
		resp.json(t, &list)
		require.Len(t, list, 3, "the dangling link is skipped: %s", resp.body)
		assert.Equal(t, "link", list[0].Name)
		assert.Equal(t, int64(5), list[0].Size, "links are followed")
		assert.Equal(t, "readme.md", list[1].Name)
		assert.False(t, list[1].IsDir)
		assert.Equal(t, "src", list[2].Name)
		assert.True(t, list[2].IsDir)
		assert.Equal(t, "drwxr-x---", list[2].Mode)
	})

	t.Run("list deeper", func(t *testing.T) {
		require.Equal(t, http.StatusOK, ts.upload(t, "proj/src/pkg/main.go", "package main\n").status)
		require.NoError(t, os.Symlink("src", filepath.Join(ts.workDir, "proj", "srclink")))
		t.Cleanup(func() {
			require.NoError(t, os.RemoveAll(filepath.Join(ts.workDir, "proj", "src", "pkg")))
			require.NoError(t, os.Remove(filepath.Join(ts.workDir, "proj", "srclink")))
		})
		paths := func(depth string) []string {
			resp := ts.get(t, "/files?path=proj&depth="+depth)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			var list []wire.FileInfo
			resp.json(t, &list)
			var out []string
			for _, fi := range list {
				assert.Equal(t, filepath.Base(fi.Path), fi.Name)
				out = append(out, strings.TrimPrefix(fi.Path, ts.workDir+"/"))
			}
			return out
		}
		assert.Equal(t, []string{"proj/link", "proj/readme.md", "proj/src", "proj/srclink"}, paths("1"))
		assert.Equal(t, []string{"proj/link", "proj/readme.md", "proj/src", "proj/src/pkg", "proj/srclink"}, paths("2"),
			"each directory's children follow it; a link to a directory is not descended into")
		assert.Equal(t, []string{"proj/link", "proj/readme.md", "proj/src", "proj/src/pkg", "proj/src/pkg/main.go", "proj/srclink"}, paths("3"))
		assert.Equal(t, paths("3"), paths("64"))
	})

	t.Run("list defaults to the work dir", func(t *testing.T) {
		var list []wire.FileInfo
		ts.get(t, "/files").json(t, &list)
		require.Len(t, list, 1)
		assert.Equal(t, "proj", list[0].Name)
	})

	t.Run("info has every required field", func(t *testing.T) {
		resp := ts.get(t, "/files/info?path=proj/readme.md")
		require.Equal(t, http.StatusOK, resp.status)
		var raw map[string]any
		resp.json(t, &raw)
		for _, k := range []string{"group", "isDir", "modTime", "mode", "modifiedAt", "name", "owner", "permissions", "size"} {
			assert.Contains(t, raw, k)
		}
		var info wire.FileInfo
		resp.json(t, &info)
		assert.Equal(t, "readme.md", info.Name)
		assert.Equal(t, int64(5), info.Size)
		assert.Equal(t, "-rw-r--r--", info.Mode)
		assert.Equal(t, "0644", info.Permissions)
		assert.Equal(t, strconv.Itoa(os.Getuid()), info.Owner)
		assert.Equal(t, strconv.Itoa(os.Getgid()), info.Group)
		fi, err := os.Stat(filepath.Join(ts.workDir, "proj/readme.md"))
		require.NoError(t, err)
		assert.Equal(t, fi.ModTime().UTC().String(), info.ModTime, "modTime is in Go's time.String() layout, as the spec says")
		modified, err := time.Parse(time.RFC3339Nano, info.ModifiedAt)
		require.NoError(t, err, "modifiedAt is RFC 3339")
		assert.True(t, fi.ModTime().Equal(modified))
	})

	errorCases := []struct {
		name, method, path string
		status             int
	}{
		{"info missing path", http.MethodGet, "/files/info", 400},
		{"info not found", http.MethodGet, "/files/info?path=nope", 404},
		{"list not found", http.MethodGet, "/files?path=nope", 404},
		{"list a file", http.MethodGet, "/files?path=proj/readme.md", 400},
		{"list depth 0", http.MethodGet, "/files?path=proj&depth=0", 400},
		{"list depth not a number", http.MethodGet, "/files?path=proj&depth=all", 400},
		{"list depth too deep", http.MethodGet, "/files?path=proj&depth=65", 400},
		{"folder missing path", http.MethodPost, "/files/folder", 400},
		{"folder bad mode", http.MethodPost, "/files/folder?path=x&mode=rwx", 400},
		{"folder mode out of range", http.MethodPost, "/files/folder?path=x&mode=77777", 400},
		{"folder over a file", http.MethodPost, "/files/folder?path=proj/readme.md", 400},
		{"delete missing path", http.MethodDelete, "/files", 400},
		{"delete not found", http.MethodDelete, "/files?path=nope", 404},
		{"delete dir without recursive", http.MethodDelete, "/files?path=proj", 400},
		{"delete bad recursive flag", http.MethodDelete, "/files?path=proj&recursive=yes", 400},
		{"unknown route", http.MethodGet, "/files/nope", 404},
		{"wrong method", http.MethodPut, "/files", 404},
	}
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.do(t, tt.method, tt.path, nil, "")
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}

	t.Run("delete a symlink removes only the link", func(t *testing.T) {
		require.NoError(t, os.Symlink("src", filepath.Join(ts.workDir, "proj", "srclink")))
		resp := ts.do(t, http.MethodDelete, "/files?path=proj/srclink", nil, "")
		require.Equal(t, http.StatusNoContent, resp.status, "body: %s", resp.body)
		_, err := os.Stat(filepath.Join(ts.workDir, "proj", "src"))
		assert.NoError(t, err)
	})

	t.Run("delete a file then the tree", func(t *testing.T) {
		resp := ts.do(t, http.MethodDelete, "/files?path=proj/readme.md", nil, "")
		require.Equal(t, http.StatusNoContent, resp.status, "body: %s", resp.body)
		resp = ts.do(t, http.MethodDelete, "/files?path=proj&recursive=true", nil, "")
		require.Equal(t, http.StatusNoContent, resp.status, "body: %s", resp.body)
		_, err := os.Stat(filepath.Join(ts.workDir, "proj"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
}

func umask(t *testing.T) os.FileMode {
	t.Helper()
	p := filepath.Join(t.TempDir(), "probe")
	require.NoError(t, os.Mkdir(p, 0o777))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return 0o777 &^ fi.Mode().Perm()
}

// POST /files/upload-v2 (newer toolboxes; pre-signed upload URLs name it)
// takes the file as the multipart part "file" or as the raw body, and
// answers the uploaded file.
func TestUploadV2(t *testing.T) {
	ts := newTestServer(t, Options{MaxUploadBytes: 1 << 10})
	binary := string([]byte{0, 1, 2, 255, '\n', 'x'})
	multi := func(content string) (io.Reader, string) { return multipartBody(t, "file", content) }
	raw := func(ctype string) func(string) (io.Reader, string) {
		return func(content string) (io.Reader, string) { return strings.NewReader(content), ctype }
	}
	tests := []struct {
		name string
		body func(string) (io.Reader, string)
	}{
		{"multipart", multi},
		{"raw, no type", raw("")},
		{"raw, octet-stream", raw("application/octet-stream")},
		{"raw, as curl --data-binary labels it", raw("application/x-www-form-urlencoded")},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("up/v2-%d.bin", i)
			body, ctype := tt.body(binary)
			resp := ts.do(t, http.MethodPost, "/files/upload-v2?path="+q(path), body, ctype)
			require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
			var got wire.UploadedFileV2
			resp.json(t, &got)
			assert.Equal(t, wire.UploadedFileV2{Name: fmt.Sprintf("v2-%d.bin", i), Path: path, Type: "file"}, got)
			b, err := os.ReadFile(filepath.Join(ts.workDir, path))
			require.NoError(t, err)
			assert.Equal(t, binary, string(b))
		})
	}
	t.Run("refusals", func(t *testing.T) {
		resp := ts.do(t, http.MethodPost, "/files/upload-v2?path="+q("big"), strings.NewReader(strings.Repeat("x", 2<<10)), "")
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.status, "%s", resp.body)
		resp = ts.do(t, http.MethodPost, "/files/upload-v2", strings.NewReader("x"), "")
		assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
		body, ctype := multipartBody(t, "other", "x")
		resp = ts.do(t, http.MethodPost, "/files/upload-v2?path="+q("nofile"), body, ctype)
		assert.Equal(t, http.StatusBadRequest, resp.status, "a multipart body without the part file: %s", resp.body)
	})
}
