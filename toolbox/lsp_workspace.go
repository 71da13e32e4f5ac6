package toolbox

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/wire"
)

// maxProjectSources bounds the files a workspace search reads itself: a
// project of more is searched in its first ones, in path order.
const maxProjectSources = 2000

// lspSourceExts are the file extensions of a language's sources, the
// preferred first: the file the toolbox opens to anchor a project is one
// of the earliest kind it finds.
var lspSourceExts = map[string][]string{
	"python":     {".py", ".pyi"},
	"typescript": {".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"},
	"javascript": {".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"},
}

// skipSourceDir tells the directories whose files are not the project's
// own: hidden ones (.git, .venv), installed dependencies and caches.
func skipSourceDir(name string) bool {
	switch name {
	case "node_modules", "__pycache__", "venv", "site-packages":
		return true
	}
	return strings.HasPrefix(name, ".") && name != "."
}

// projectSources lists the project's source files of the client's
// language, in path order, at most maxProjectSources.
func (c *lspClient) projectSources() ([]string, error) {
	exts := lspSourceExts[c.language]
	var files []string
	errFull := errors.New("enough files")
	err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil // an unreadable corner does not spoil the search
		case d.IsDir():
			if p != c.root && skipSourceDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		case d.Type().IsRegular() && slices.Contains(exts, filepath.Ext(p)):
			files = append(files, p)
			if len(files) == maxProjectSources {
				return errFull
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return nil, err
	}
	return files, nil
}

// workspaceSymbols answers a search for symbols across the project. A
// server that searches workspaces is asked, and matches query its own way
// (typescript-language-server: substrings and camel-case humps); one that
// cannot (pylsp 1.7 has no workspace/symbol at all) is searched here, for
// names that contain query: see searchDocumentSymbols.
func (c *lspClient) workspaceSymbols(ctx context.Context, query string) ([]wire.LspSymbol, error) {
	if !c.caps.workspaceSymbol {
		return c.searchDocumentSymbols(ctx, query)
	}
	if err := c.anchorProject(); err != nil {
		return nil, err
	}
	raw, err := c.call(ctx, "workspace/symbol", map[string]string{"query": query})
	if err != nil {
		var ce *lspCallError
		if errors.As(err, &ce) && ce.Code == rpcMethodNotFound {
			return c.searchDocumentSymbols(ctx, query)
		}
		return nil, err
	}
	return parseSymbols(raw, "")
}

// anchorProject opens project sources so that the server searches them.
// typescript-language-server searches the projects of its open documents
// only, and answers "No Project" before the first is opened, whereas an
// SDK user searches a project right after starting its server: so one
// source is opened when none is. A project with no tsconfig.json or
// jsconfig.json is, to the server, its open files and what they import,
// so there every source is opened, up to maxLooseSources. Files opened
// here stay open, as if the user had opened them.
func (c *lspClient) anchorProject() error {
	loose := c.looseProject()
	c.mu.Lock()
	anyOpen := len(c.opened) > 0
	c.mu.Unlock()
	if anyOpen && !loose {
		return nil
	}
	files, err := c.projectSources()
	if err != nil || len(files) == 0 {
		return nil // nothing to anchor on: the server answers as it can
	}
	if loose {
		return c.openAll(files[:min(len(files), maxLooseSources)])
	}
	_, err = c.open(fileURI(c.preferredSource(files)))
	return err
}

// maxLooseSources bounds the files opened for a search of a project with
// no tsconfig.json: the server checks every open file.
const maxLooseSources = 200

// looseProject tells a TypeScript or JavaScript project without a
// tsconfig.json or jsconfig.json at its root.
func (c *lspClient) looseProject() bool {
	if c.language != "typescript" && c.language != "javascript" {
		return false
	}
	for _, name := range []string{"tsconfig.json", "jsconfig.json"} {
		if _, err := os.Stat(filepath.Join(c.root, name)); err == nil {
			return false
		}
	}
	return true
}

// openAll opens those of files that are not open yet; one deleted since
// it was listed is passed over.
func (c *lspClient) openAll(files []string) error {
	for _, f := range files {
		_, err := c.ensureOpen(fileURI(f))
		if ae := asAPIError(err); ae != nil && ae.status == http.StatusNotFound {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// preferredSource is the first of files with the language's preferred
// extension: a TypeScript project is anchored on a .ts file, so that a
// stray script beside it does not make the search that script's alone.
func (c *lspClient) preferredSource(files []string) string {
	best, rank := files[0], len(lspSourceExts[c.language])
	for _, f := range files {
		if r := slices.Index(lspSourceExts[c.language], filepath.Ext(f)); r >= 0 && r < rank {
			best, rank = f, r
		}
	}
	return best
}

// searchDocumentSymbols is the workspace search of a server that has
// none: the document symbols of each of the project's sources (read from
// disk, or as open if open), those whose names contain query
// case-insensitively; an empty query matches every symbol. Imports are
// left out, as typescript-language-server leaves out names that are only
// imported: a search finds where a symbol is defined, not every file that
// uses it. The whole search is bounded by lspCallTimeout.
func (c *lspClient) searchDocumentSymbols(ctx context.Context, query string) ([]wire.LspSymbol, error) {
	files, err := c.projectSources()
	if err != nil {
		return nil, err
	}
	ctx, cancel := clock.WithTimeout(ctx, c.clock, lspCallTimeout)
	defer cancel()
	out := []wire.LspSymbol{}
	for _, f := range files {
		doc := fileURI(f)
		raw, err := c.call(ctx, "textDocument/documentSymbol", map[string]any{"textDocument": map[string]string{"uri": doc}})
		var ce *lspCallError
		switch {
		case errors.As(err, &ce):
			continue // the server could not read this file; the others count
		case err != nil:
			return nil, err
		}
		syms, err := parseSymbols(raw, doc)
		if err != nil {
			continue
		}
		out = append(out, c.definedMatches(f, syms, query)...)
	}
	return out, nil
}

// definedMatches are the symbols of file f whose names contain query and
// that are not imports.
func (c *lspClient) definedMatches(f string, syms []wire.LspSymbol, query string) []wire.LspSymbol {
	q := strings.ToLower(query)
	var lines []string // read once, when a symbol matches
	var out []wire.LspSymbol
	for _, s := range syms {
		if !strings.Contains(strings.ToLower(s.Name), q) {
			continue
		}
		if lines == nil {
			lines = readLines(f)
		}
		if c.isImportLine(lines, s.Location.Range.Start.Line) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// pythonImport is a line of a Python import statement.
var pythonImport = regexp.MustCompile(`^\s*(from\s+\S+\s+)?import\s`)

// isImportLine tells whether line n of a source is an import statement,
// whose names pylsp lists among a document's symbols.
func (c *lspClient) isImportLine(lines []string, n int) bool {
	if c.language != "python" || n < 0 || n >= len(lines) {
		return false
	}
	return pythonImport.MatchString(lines[n])
}

// readLines is the file's lines; an unreadable file has none.
func readLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{}
	}
	defer f.Close()
	lines := []string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLSPMessage)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
