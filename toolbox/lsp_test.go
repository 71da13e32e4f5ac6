package toolbox

import (
	"net/http"
	"net/url"
	"path/filepath"
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

	// pylsp offers no workspace symbols; the answer is an empty list.
	assert.Empty(t, l.workspaceSymbols("Circle"))

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
