package escape_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/escape"
)

// fileTrick is one request through A's toolbox file API.
type fileTrick struct {
	method, path, contentType string
	body                      []byte
}

// dotdot is a relative path from A's work dir up to the root and down to
// abs: `..` tricks.
func (w *world) dotdot(abs string) string {
	up := strings.Repeat("../", strings.Count(w.a.workDir, "/")+2)
	return up + strings.TrimPrefix(abs, "/")
}

// names are the ways A's file API may name target (a file or directory
// outside A): absolute, through `..`, and through each symlink the probe
// made.
func (w *world) names(target string, links map[string]string) []string {
	out := []string{target, w.dotdot(target)}
	for link, to := range links {
		if rel, err := filepath.Rel(to, target); err == nil && !strings.HasPrefix(rel, "..") {
			out = append(out, filepath.Join(link, rel))
		}
	}
	return out
}

// tricks are the file API's routes aimed at dir (where file is): reads
// of every kind (download, bulk download, list, info, search, find) and
// writes (upload, move in and out, replace).
func (w *world) tricks(t *testing.T, dir, file, pattern string) []fileTrick {
	t.Helper()
	var out []fileTrick
	get := func(p string) { out = append(out, fileTrick{method: http.MethodGet, path: p}) }
	for _, f := range w.names(file, w.cfg.Links) {
		get("/files/download?path=" + url.QueryEscape(f))
		get("/files/info?path=" + url.QueryEscape(f))
		out = append(out, w.jsonTrick(t, "/files/bulk-download", map[string]any{"paths": []string{f}}))
		out = append(out, w.jsonTrick(t, "/files/replace", map[string]any{"files": []string{f}, "pattern": pattern, "newValue": "replaced"}))
		out = append(out, fileTrick{method: http.MethodPost, path: "/files/move?source=" + url.QueryEscape(f) + "&destination=" + url.QueryEscape(filepath.Join(w.a.workDir, "stolen"))})
	}
	for _, d := range w.names(dir, w.cfg.Links) {
		get("/files?path=" + url.QueryEscape(d) + "&depth=3")
		get("/files/search?path=" + url.QueryEscape(d) + "&pattern=*")
		get("/files/find?path=" + url.QueryEscape(d) + "&pattern=" + url.QueryEscape(pattern))
		out = append(out, w.uploadTrick(t, filepath.Join(d, "planted")))
		out = append(out, fileTrick{method: http.MethodPost, path: "/files/move?source=" + url.QueryEscape(filepath.Join(w.a.workDir, "escape-config.json")) + "&destination=" + url.QueryEscape(filepath.Join(d, "moved-in"))})
	}
	return out
}

// jsonTrick is a JSON POST of v to path.
func (w *world) jsonTrick(t *testing.T, path string, v any) fileTrick {
	t.Helper()
	b, err := jsonBytes(v)
	require.NoError(t, err)
	return fileTrick{method: http.MethodPost, path: path, contentType: "application/json", body: b}
}

// uploadTrick is an upload to path.
func (w *world) uploadTrick(t *testing.T, path string) fileTrick {
	t.Helper()
	var buf bytes.Buffer
	ct := multipartFile(t, &buf, "planted by the escape suite")
	return fileTrick{method: http.MethodPost, path: "/files/upload?path=" + url.QueryEscape(path), contentType: ct, body: buf.Bytes()}
}

// planted are the names the tricks write under.
var planted = []string{"planted", "moved-in"}

// marks is what tells that a trick wrote where it must not: the target
// file's content (it must stay as it is), and every file under dir with a
// planted name. The rest of dir is left out: the daemon itself rewrites
// the records it keeps there.
func marks(dir, file string) map[string]string {
	out := map[string]string{}
	if b, err := os.ReadFile(file); err == nil {
		out[file] = string(b)
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && slices.Contains(planted, d.Name()) {
			out[p] = "planted"
		}
		return nil
	})
	return out
}

// diff names what changed between two snapshots.
func diff(before, after map[string]string) []string {
	var out []string
	for p, v := range after {
		if old, ok := before[p]; !ok {
			out = append(out, "new "+p)
		} else if old != v {
			out = append(out, "changed "+p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, "gone "+p)
		}
	}
	slices.Sort(out)
	return out
}

// tryFileAPI aims every trick at dir and file through A's toolbox; it
// escaped when an answer holds a secret or anything under dir changed.
func (w *world) tryFileAPI(t *testing.T, dir, file, pattern string) verdict {
	t.Helper()
	before := marks(dir, file)
	var answers []string
	opened := 0
	for _, tr := range w.tricks(t, dir, file, pattern) {
		code, body := w.a.do(t, tr.method, tr.path, tr.contentType, bytes.NewReader(tr.body))
		answers = append(answers, string(body))
		if code < 300 {
			opened++
		}
	}
	changed := diff(before, marks(dir, file))
	v := verdict{outcome: escape.Blocked, leaked: w.secrets.found(strings.Join(answers, "\n"))}
	v.evidence = fmt.Sprintf("%d requests, %d answered 2xx; changed under the target: %v", len(answers), opened, changed)
	if len(v.leaked) > 0 || len(changed) > 0 {
		v.outcome = escape.Escaped
	}
	return v
}

// tryLeftover has the probe leave a detached process without the
// sandbox's markers, deletes A, and looks for it on the host.
func (w *world) tryLeftover(t *testing.T) verdict {
	t.Helper()
	nonce := secret("linger")
	exit, out := w.a.exec(t, "./escape-probe linger "+nonce)
	require.Zero(t, exit, out)
	require.Eventually(t, func() bool { return len(hostProcesses(t, "cmdline", nonce)) > 0 },
		10*time.Second, 20*time.Millisecond, "the lingering process never ran")
	require.NoError(t, w.d.P.Delete(t.Context(), w.a.ID))
	var left []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		left = hostProcesses(t, "cmdline", nonce)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // a poll of the host's processes; the deadline bounds it
	}
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL) // the test's own process, found by its nonce
	}
	if len(left) > 0 {
		return verdict{outcome: escape.Escaped, evidence: fmt.Sprintf("processes %v outlived the delete", left)}
	}
	return verdict{outcome: escape.Blocked, evidence: "setsid'd, environment-less, signal-ignoring process gone with the delete"}
}
