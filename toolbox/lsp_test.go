package toolbox

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func symbolNames(syms []wire.LspSymbol) []string {
	var out []string
	for _, s := range syms {
		out = append(out, s.Name)
	}
	return out
}

func completionLabels(list wire.CompletionList) []string {
	var out []string
	for _, it := range list.Items {
		out = append(out, it.Label)
	}
	return out
}

// lspSession drives one language server of a project through the toolbox,
// the way the SDKs do: uris are "file://" + the path as given.
type lspSession struct {
	t    *testing.T
	ts   *testServer
	lang string
	proj string
}

func (l lspSession) server() wire.LspServerRequest {
	return wire.LspServerRequest{LanguageID: l.lang, PathToProject: l.proj}
}

func (l lspSession) doc(path string) wire.LspDocumentRequest {
	return wire.LspDocumentRequest{LspServerRequest: l.server(), URI: "file://" + path}
}

func (l lspSession) post(path string, body any) {
	l.t.Helper()
	resp := l.ts.postJSON(l.t, path, body)
	require.Equal(l.t, http.StatusOK, resp.status, "%s: %s", path, resp.body)
}

func (l lspSession) documentSymbols(path string) []wire.LspSymbol {
	l.t.Helper()
	q := url.Values{"languageId": {l.lang}, "pathToProject": {l.proj}, "uri": {"file://" + path}}
	resp := l.ts.get(l.t, "/lsp/document-symbols?"+q.Encode())
	require.Equal(l.t, http.StatusOK, resp.status, "body: %s", resp.body)
	var syms []wire.LspSymbol
	resp.json(l.t, &syms)
	return syms
}

func (l lspSession) workspaceSymbols(query string) []wire.LspSymbol {
	l.t.Helper()
	q := url.Values{"languageId": {l.lang}, "pathToProject": {l.proj}, "query": {query}}
	resp := l.ts.get(l.t, "/lsp/workspacesymbols?"+q.Encode())
	require.Equal(l.t, http.StatusOK, resp.status, "body: %s", resp.body)
	var syms []wire.LspSymbol
	resp.json(l.t, &syms)
	return syms
}

func (l lspSession) completions(path string, line, char int) wire.CompletionList {
	l.t.Helper()
	resp := l.ts.postJSON(l.t, "/lsp/completions", wire.LspCompletionParams{LspDocumentRequest: l.doc(path), Position: &wire.LspPosition{Line: line, Character: char}})
	require.Equal(l.t, http.StatusOK, resp.status, "body: %s", resp.body)
	var list wire.CompletionList
	resp.json(l.t, &list)
	return list
}

func TestLSPPython(t *testing.T) {
	requireTool(t, "pylsp")
	ts := newTestServer(t, Options{})
	writeFiles(t, ts.workDir, map[string]string{
		"proj/shapes.py": "import math\n\nclass Circle:\n    def area(self, r):\n        return math.pi * r * r\n\ndef unit_circle():\n    return Circle()\n\nmath.\n",
	})
	l := lspSession{t: t, ts: ts, lang: "python", proj: "proj"}
	l.post("/lsp/start", l.server())
	l.post("/lsp/start", l.server()) // starting twice is fine
	l.post("/lsp/did-open", l.doc("shapes.py"))

	syms := l.documentSymbols("shapes.py")
	assert.Subset(t, symbolNames(syms), []string{"Circle", "area", "unit_circle"})
	for _, s := range syms {
		if s.Name == "unit_circle" {
			assert.Equal(t, fileURI(filepath.Join(ts.workDir, "proj", "shapes.py")), s.Location.URI)
			assert.Equal(t, 6, s.Location.Range.Start.Line)
			assert.Equal(t, 12, s.Kind, "Function")
		}
	}

	list := l.completions("shapes.py", 9, 5)
	assert.Contains(t, completionLabels(list), "sqrt", "completions of math.")

	// pylsp has no workspace/symbol; the toolbox searches the project's
	// document symbols itself.
	ws := l.workspaceSymbols("Circle")
	assert.ElementsMatch(t, []string{"Circle", "unit_circle"}, symbolNames(ws))

	l.post("/lsp/did-close", l.doc("shapes.py"))
	l.post("/lsp/stop", l.server())
	resp := ts.get(t, "/lsp/document-symbols?"+url.Values{"languageId": {"python"}, "pathToProject": {"proj"}, "uri": {"file://shapes.py"}}.Encode())
	require.Equal(t, http.StatusBadRequest, resp.status, "a stopped server answers nothing: %s", resp.body)
	resp.apiErr(t)
}

func TestLSPTypeScript(t *testing.T) {
	withNodeTools(t)
	ts := newTestServer(t, Options{})
	proj := filepath.Join(ts.workDir, "web")
	writeFiles(t, ts.workDir, map[string]string{
		"web/tsconfig.json":   `{"compilerOptions":{"strict":true,"target":"es2020","module":"commonjs"}}`,
		"web/src/geometry.ts": "export interface Point { x: number; y: number }\n\nexport class Polygon {\n  constructor(public points: Point[]) {}\n  perimeterLength(): number { return this.points.length }\n}\n\nexport function makeSquare(): Polygon {\n  return new Polygon([])\n}\n",
		"web/src/main.ts":     "import { makeSquare } from './geometry'\nconst sq = makeSquare()\nsq.\n",
	})
	l := lspSession{t: t, ts: ts, lang: "typescript", proj: proj}
	l.post("/lsp/start", l.server())
	l.post("/lsp/did-open", l.doc(filepath.Join(proj, "src", "main.ts")))

	syms := l.documentSymbols("src/geometry.ts")
	assert.Subset(t, symbolNames(syms), []string{"Point", "Polygon", "perimeterLength", "makeSquare"})

	list := l.completions("src/main.ts", 2, 3)
	assert.Contains(t, completionLabels(list), "perimeterLength")
	assert.Contains(t, completionLabels(list), "points")

	ws := l.workspaceSymbols("makeSquare")
	require.NotEmpty(t, ws)
	assert.Equal(t, "makeSquare", ws[0].Name)
	assert.Equal(t, fileURI(filepath.Join(proj, "src", "geometry.ts")), ws[0].Location.URI)

	l.post("/lsp/did-close", l.doc(filepath.Join(proj, "src", "main.ts")))
	l.post("/lsp/stop", l.server())
}

// symbolAt is how a workspace symbol is checked: its name, kind and where
// it starts, the file relative to the project.
type symbolAt struct {
	name string
	kind int
	file string
	line int
}

func symbolsAt(t *testing.T, proj string, syms []wire.LspSymbol) []symbolAt {
	t.Helper()
	out := []symbolAt{}
	for _, s := range syms {
		p, ok := strings.CutPrefix(s.Location.URI, "file://")
		require.True(t, ok, "uri %q", s.Location.URI)
		rel, err := filepath.Rel(proj, p)
		require.NoError(t, err)
		out = append(out, symbolAt{s.Name, s.Kind, filepath.ToSlash(rel), s.Location.Range.Start.Line})
	}
	return out
}

// TestLSPWorkspaceSymbols searches projects right after their servers
// start, before any document is opened, as an SDK user does.
func TestLSPWorkspaceSymbols(t *testing.T) {
	const (
		class    = 5
		method   = 6
		function = 12
	)
	t.Run("python", func(t *testing.T) {
		requireTool(t, "pylsp")
		ts := newTestServer(t, Options{})
		writeFiles(t, ts.workDir, map[string]string{
			"proj/shapes.py":         "import math\n\nclass Circle:\n    def area(self, r):\n        return math.pi * r * r\n\ndef unit_circle():\n    return Circle()\n",
			"proj/geo/util.py":       "from shapes import Circle\nimport os\n\ndef make_circle():\n    return Circle()\n\nclass CircleCache:\n    pass\n",
			"proj/.venv/lib/site.py": "class Circle:\n    pass\n",
			"proj/__pycache__/c.py":  "class Circle:\n    pass\n",
			"proj/notes.txt":         "class Circle:\n",
		})
		proj := filepath.Join(ts.workDir, "proj")
		l := lspSession{t: t, ts: ts, lang: "python", proj: "proj"}
		l.post("/lsp/start", l.server())
		t.Cleanup(func() { l.post("/lsp/stop", l.server()) })
		circles := []symbolAt{
			{"make_circle", function, "geo/util.py", 3},
			{"CircleCache", class, "geo/util.py", 6},
			{"Circle", class, "shapes.py", 2},
			{"unit_circle", function, "shapes.py", 6},
		}
		for _, tt := range []struct {
			name, query string
			want        []symbolAt
		}{
			{"definitions only: neither imports nor hidden, cached or other files", "Circle", circles},
			{"case does not matter", "circle", circles},
			{"a part of a name", "it_ci", []symbolAt{{"unit_circle", function, "shapes.py", 6}}},
			{"a method", "area", []symbolAt{{"area", method, "shapes.py", 3}}},
			{"nothing matches", "no_such_symbol", []symbolAt{}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				assert.ElementsMatch(t, tt.want, symbolsAt(t, proj, l.workspaceSymbols(tt.query)))
			})
		}
		t.Run("an empty query lists every symbol", func(t *testing.T) {
			assert.Subset(t, symbolsAt(t, proj, l.workspaceSymbols("")), append(circles, symbolAt{"area", method, "shapes.py", 3}))
		})
		t.Run("the answer is an empty list, not null", func(t *testing.T) {
			q := url.Values{"languageId": {"python"}, "pathToProject": {"proj"}, "query": {"no_such_symbol"}}
			resp := ts.get(t, "/lsp/workspacesymbols?"+q.Encode())
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			assert.JSONEq(t, "[]", string(resp.body))
		})
	})

	t.Run("typescript", func(t *testing.T) {
		withNodeTools(t)
		ts := newTestServer(t, Options{})
		proj := filepath.Join(ts.workDir, "web")
		writeFiles(t, ts.workDir, map[string]string{
			"web/tsconfig.json":           `{"compilerOptions":{"strict":true,"target":"es2020","module":"commonjs"}}`,
			"web/jest.config.js":          "module.exports = {}\n",
			"web/src/geometry.ts":         "export class Polygon {}\n\nexport function makeSquare(): Polygon {\n  return new Polygon()\n}\n",
			"web/src/main.ts":             "import { makeSquare } from './geometry'\nexport const square = makeSquare()\n",
			"web/node_modules/dep/dep.ts": "export function makeSquare(): number { return 1 }\n",
		})
		l := lspSession{t: t, ts: ts, lang: "typescript", proj: proj}
		l.post("/lsp/start", l.server())
		t.Cleanup(func() { l.post("/lsp/stop", l.server()) })
		for _, tt := range []struct {
			name, query string
			want        []symbolAt
		}{
			{"a function, where it is defined", "makeSquare", []symbolAt{{"makeSquare", function, "src/geometry.ts", 2}}},
			{"a class", "Polygon", []symbolAt{{"Polygon", class, "src/geometry.ts", 0}}},
			{"nothing matches", "noSuchSymbol", []symbolAt{}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				assert.ElementsMatch(t, tt.want, symbolsAt(t, proj, l.workspaceSymbols(tt.query)))
			})
		}
	})

	t.Run("javascript without a jsconfig.json", func(t *testing.T) {
		withNodeTools(t)
		ts := newTestServer(t, Options{})
		proj := filepath.Join(ts.workDir, "app")
		writeFiles(t, ts.workDir, map[string]string{
			"app/index.js":     "function startThing() {}\nmodule.exports = { startThing }\n",
			"app/lib/util.js":  "function helperThing() {}\nmodule.exports = { helperThing }\n",
			"app/lib/types.ts": "export function typedThing(): number { return 1 }\n",
		})
		l := lspSession{t: t, ts: ts, lang: "javascript", proj: proj}
		l.post("/lsp/start", l.server())
		t.Cleanup(func() { l.post("/lsp/stop", l.server()) })
		// Files that import nothing of each other are all searched.
		assert.ElementsMatch(t, []symbolAt{
			{"startThing", function, "index.js", 0},
			{"helperThing", function, "lib/util.js", 0},
			{"typedThing", function, "lib/types.ts", 0},
		}, symbolsAt(t, proj, l.workspaceSymbols("Thing")))
	})
}

func TestProjectSources(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"b.py": "", "a/z.py": "", "a/types.pyi": "", "a/notes.md": "",
		".git/hook.py": "", ".venv/x.py": "", "node_modules/m/y.py": "", "__pycache__/c.py": "",
		"venv/lib/site-packages/s.py": "", "web/app.js": "", "web/app.ts": "",
	})
	require.NoError(t, os.Symlink(filepath.Join(root, "b.py"), filepath.Join(root, "link.py")))
	for _, tt := range []struct {
		language  string
		want      []string
		preferred string
	}{
		{"python", []string{"a/types.pyi", "a/z.py", "b.py"}, "a/z.py"},
		{"typescript", []string{"web/app.js", "web/app.ts"}, "web/app.ts"},
		{"javascript", []string{"web/app.js", "web/app.ts"}, "web/app.js"},
	} {
		t.Run(tt.language, func(t *testing.T) {
			c := &lspClient{language: tt.language, root: root}
			files, err := c.projectSources()
			require.NoError(t, err)
			var rel []string
			for _, f := range files {
				r, err := filepath.Rel(root, f)
				require.NoError(t, err)
				rel = append(rel, filepath.ToSlash(r))
			}
			assert.Equal(t, tt.want, rel, "in path order; hidden, dependency and cache directories and symlinks left out")
			assert.Equal(t, filepath.Join(root, tt.preferred), c.preferredSource(files))
		})
	}
}

func TestLSPErrors(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, tt := range []struct {
		name, path string
		body       any
		status     int
	}{
		{"unknown language", "/lsp/start", wire.LspServerRequest{LanguageID: "cobol", PathToProject: "."}, 400},
		{"no project", "/lsp/start", wire.LspServerRequest{LanguageID: "python"}, 400},
		{"missing project", "/lsp/start", wire.LspServerRequest{LanguageID: "python", PathToProject: "/no/such/dir"}, 400},
		{"not started", "/lsp/did-open", wire.LspDocumentRequest{LspServerRequest: wire.LspServerRequest{LanguageID: "python", PathToProject: "."}, URI: "file://a.py"}, 400},
		{"stop what never started", "/lsp/stop", wire.LspServerRequest{LanguageID: "python", PathToProject: "."}, 400},
		{"completions without position", "/lsp/completions", wire.LspDocumentRequest{LspServerRequest: wire.LspServerRequest{LanguageID: "python", PathToProject: "."}, URI: "file://a.py"}, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, tt.path, tt.body)
			require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
	t.Run("a missing document", func(t *testing.T) {
		requireTool(t, "pylsp")
		srv := wire.LspServerRequest{LanguageID: "python", PathToProject: "."}
		require.Equal(t, http.StatusOK, ts.postJSON(t, "/lsp/start", srv).status)
		resp := ts.postJSON(t, "/lsp/did-open", wire.LspDocumentRequest{LspServerRequest: srv, URI: "file://nope.py"})
		require.Equal(t, http.StatusNotFound, resp.status, "body: %s", resp.body)
		resp = ts.postJSON(t, "/lsp/did-open", wire.LspDocumentRequest{LspServerRequest: srv, URI: "http://x/a.py"})
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
	})
}
