package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// tsDir is the TypeScript client's package, from this package's directory.
var tsDir = filepath.Join("..", "..", "clients", "typescript")

// buildClient compiles the TypeScript client's browser build (src to ES
// modules, as `npm run build` does) into a directory of this test's own,
// and returns it. Not into dist/: clients/typescript's own test builds
// there, and `go test ./...` runs it alongside this one, so a page could
// load a file tsc is rewriting.
func buildClient(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript client's browser test needs Node 18+ and npm to build the client")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("node is installed but npm is not: the TypeScript client's browser test needs npm's packages of clients/typescript")
	}
	tsc := filepath.Join(tsDir, "node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatal("the TypeScript client's packages are not installed: run `make test-deps` (npm ci in clients/typescript)")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, node, tsc, "-p", filepath.Join(tsDir, "tsconfig.json"), "--outDir", out)
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the TypeScript client failed: %v\n%s", err, msg)
	}
	return out
}

// esmEntry is the file of the package in dir that a browser imports: the
// ES module its package.json exports.
func esmEntry(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err, "run `make test-deps` (npm ci in clients/typescript)")
	var pkg struct {
		Module  string `json:"module"`
		Main    string `json:"main"`
		Exports map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(raw, &pkg))
	var dot struct {
		Import  string `json:"import"`
		Default string `json:"default"`
	}
	if e, ok := pkg.Exports["."]; ok {
		_ = json.Unmarshal(e, &dot)
	}
	for _, p := range []string{dot.Import, dot.Default, pkg.Module, pkg.Main} {
		if strings.HasSuffix(p, ".mjs") || strings.HasSuffix(p, ".js") {
			return path.Clean(p)
		}
	}
	t.Fatalf("no ES module entry in %s", filepath.Join(dir, "package.json"))
	return ""
}

// clientPage is a web UI of a developer's own: it loads the client with
// an import map, as a bundler-free page would, lists the sandboxes of the
// daemon given in ?daemon=, asks for one that does not exist, and writes
// what it got into the page.
const clientPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>my ui</title>
<link rel="icon" href="data:,">
<script type="importmap">{"imports": {"openapi-fetch": %s}}</script>
<script type="module">
import { ControlPlaneClient, ControlPlaneError } from "/client/index.js";
const out = (id, text) => { document.getElementById(id).textContent = text; };
try {
  const cp = new ControlPlaneClient({ baseUrl: new URLSearchParams(location.search).get("daemon") + "/v1" });
  const list = await cp.list();
  document.getElementById("names").replaceChildren(...list.map((s) => {
    const li = document.createElement("li");
    li.textContent = s.name;
    return li;
  }));
  try {
    await cp.get("nope");
    out("failure", "no error");
  } catch (err) {
    out("failure", JSON.stringify({ isControlPlaneError: err instanceof ControlPlaneError, name: err.name, code: err.code, status: err.status, message: err.message }));
  }
  document.body.dataset.done = "ok";
} catch (err) {
  out("failure", "unexpected: " + (err && err.name) + " " + (err && err.code) + " " + (err && err.message));
  document.body.dataset.done = "failed";
}
</script></head>
<body><ul id="names"></ul><pre id="failure"></pre></body></html>`

// TestTypeScriptClientInABrowser loads the TypeScript client's browser
// build into Chromium from a page on another port of localhost than the
// daemon's, as a developer's own web UI would run, and calls the daemon
// across origins: the daemon's CORS answers must let it list sandboxes
// and read the errors' codes. Both spellings of a dev origin are tried,
// http://127.0.0.1:PORT and http://localhost:PORT.
func TestTypeScriptClientInABrowser(t *testing.T) {
	built := buildClient(t)
	fetchDir := filepath.Join(tsDir, "node_modules", "openapi-fetch")
	entry := esmEntry(t, fetchDir)
	d := startDaemon(t)
	ctx := browser(t)
	bg := context.Background()

	for _, name := range []string{"ui-first", "ui-second"} {
		_, err := d.P.Create(bg, provider.CreateRequest{Name: name, AutoStopInterval: ptr(0)})
		require.NoError(t, err)
	}

	// Only the package's dist/ is served, as a page would copy it.
	entry, ok := strings.CutPrefix(entry, "dist/")
	require.True(t, ok, "openapi-fetch's ES module %q is not under its dist/", entry)
	importMap, err := json.Marshal("/openapi-fetch/" + entry)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, clientPage, importMap)
	})
	mux.Handle("GET /client/", modules(http.StripPrefix("/client/", http.FileServer(http.Dir(built)))))
	mux.Handle("GET /openapi-fetch/", modules(http.StripPrefix("/openapi-fetch/", http.FileServer(http.Dir(filepath.Join(fetchDir, "dist"))))))
	ui := httptest.NewServer(mux)
	t.Cleanup(ui.Close)
	uiURL, err := url.Parse(ui.URL)
	require.NoError(t, err)
	daemonURL, err := url.Parse(d.URL)
	require.NoError(t, err)
	require.NotEqual(t, daemonURL.Port(), uiURL.Port(), "the page must be of another origin than the daemon")

	for _, host := range []string{"127.0.0.1", "localhost"} {
		origin := "http://" + host + ":" + uiURL.Port()
		t.Run(host, func(t *testing.T) {
			step(t, ctx, "load the page",
				chromedp.Navigate(origin+"/?daemon="+url.QueryEscape(d.URL)),
				poll(`document.body && document.body.dataset.done !== undefined`),
			)
			failure := eval[string](t, ctx, `document.getElementById("failure").textContent`)
			require.Equal(t, "ok", eval[string](t, ctx, `document.body.dataset.done`), "the page's calls failed: %s", failure)
			assert.Equal(t, origin, eval[string](t, ctx, `location.origin`))
			assert.Equal(t, []string{"ui-first", "ui-second"}, eval[[]string](t, ctx, `[...document.querySelectorAll("#names li")].map(li => li.textContent)`))

			var got struct {
				IsControlPlaneError bool
				Name, Code, Message string
				Status              int
			}
			require.NoError(t, json.Unmarshal([]byte(failure), &got), failure)
			assert.True(t, got.IsControlPlaneError, "a failed call throws a ControlPlaneError: %s", failure)
			assert.Equal(t, "ControlPlaneError", got.Name)
			assert.Equal(t, "not_found", got.Code, "the daemon's code reaches the page across origins: %s", failure)
			assert.Equal(t, http.StatusNotFound, got.Status)
			assert.Contains(t, got.Message, "nope")
		})
	}
}

// modules serves JavaScript as such: a browser runs a module script only
// with a JavaScript MIME type, which the host's mime tables may not give
// .mjs.
func modules(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".js") || strings.HasSuffix(r.URL.Path, ".mjs") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		next.ServeHTTP(w, r)
	})
}
