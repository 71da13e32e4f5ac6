package toolbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	// lspCallTimeout bounds one request to a language server; the first
	// ones of a large project can take a while.
	lspCallTimeout = 60 * time.Second
	// lspStopGrace is how long a server may take to exit after shutdown.
	lspStopGrace  = 5 * time.Second
	maxLSPMessage = 64 << 20
	maxLSPServers = 16
)

// lspCommands are the language servers the toolbox runs, found in PATH:
// pylsp (Debian's python3-pylsp) and typescript-language-server (npm, with
// typescript), which serves JavaScript too.
var lspCommands = map[string][]string{
	"python":     {"pylsp"},
	"typescript": {"typescript-language-server", "--stdio"},
	"javascript": {"typescript-language-server", "--stdio"},
}

type lspServers struct {
	srv *server
	reg *registry[string, *lspClient]
}

func newLSPServers(srv *server) *lspServers {
	return &lspServers{srv: srv, reg: newRegistry[string, *lspClient]()}
}

// key validates a server name and returns its map key and project dir.
func (ls *lspServers) key(req wire.LspServerRequest) (string, string, error) {
	if _, ok := lspCommands[req.LanguageID]; !ok {
		return "", "", errorf(http.StatusBadRequest, "unsupported languageId %q: supported are python, typescript and javascript", req.LanguageID)
	}
	if strings.TrimSpace(req.PathToProject) == "" {
		return "", "", errorf(http.StatusBadRequest, "pathToProject is required")
	}
	dir := ls.srv.absPath(req.PathToProject)
	return req.LanguageID + "\x00" + dir, dir, nil
}

func (ls *lspServers) start(ctx context.Context, req wire.LspServerRequest) error {
	key, dir, err := ls.key(req)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return errorf(http.StatusBadRequest, "pathToProject %s is not a directory", dir)
	}
	_, err = ls.reg.add(key, func(old *lspClient, taken bool, n int) (*lspClient, error) {
		switch {
		case taken && !old.isDead():
			return old, nil // already running
		case n >= maxLSPServers:
			return nil, errorf(http.StatusConflict, "too many language servers: at most %d; stop one first", maxLSPServers)
		}
		// A dead server under key is replaced.
		return startLSP(ctx, ls.srv.opts.Clock, req.LanguageID, dir, ls.srv.opts.env.environ())
	})
	return err
}

func (ls *lspServers) get(req wire.LspServerRequest) (*lspClient, error) {
	key, dir, err := ls.key(req)
	if err != nil {
		return nil, err
	}
	c, err := ls.reg.get(key)
	if err != nil || c.isDead() {
		return nil, codedf(http.StatusBadRequest, wire.CodeLspServerNotInitialized, "no %s language server is running for %s: start it first", req.LanguageID, dir)
	}
	return c, nil
}

func (ls *lspServers) stop(req wire.LspServerRequest) error {
	key, dir, err := ls.key(req)
	if err != nil {
		return err
	}
	c, ok := ls.reg.remove(key)
	if !ok {
		return codedf(http.StatusBadRequest, wire.CodeLspServerNotInitialized, "no %s language server is running for %s", req.LanguageID, dir)
	}
	c.stop()
	return nil
}

func (ls *lspServers) closeAll() {
	for _, c := range ls.reg.close() {
		c.stop()
	}
}

// lspClient speaks JSON-RPC with one language server over its stdio.
type lspClient struct {
	language string
	root     string
	clock    clock.Clock
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	dead     chan struct{}

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  int64
	calls   map[int64]chan rpcMessage
	opened  map[string]int // uri → version
	caps    struct{ workspaceSymbol bool }
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcMethodNotFound is JSON-RPC's code for a method a server lacks.
const rpcMethodNotFound = -32601

func startLSP(ctx context.Context, clk clock.Clock, language, root string, environ []string) (*lspClient, error) {
	argv := lspCommands[language]
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "the %s language server (%s) is not installed in the sandbox", language, argv[0])
	}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Dir, cmd.Env = root, environ
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = &boundedBuffer{limit: 64 << 10}
	if err := cmd.Start(); err != nil {
		return nil, errorf(http.StatusInternalServerError, "starting %s: %v", argv[0], err)
	}
	c := &lspClient{
		language: language, root: root, clock: clk, cmd: cmd, stdin: stdin,
		dead: make(chan struct{}), calls: map[int64]chan rpcMessage{}, opened: map[string]int{},
	}
	go func() {
		c.readLoop(bufio.NewReaderSize(stdout, 64<<10))
		cmd.Wait()
		close(c.dead)
	}()
	if err := c.initialize(ctx); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

func (c *lspClient) initialize(ctx context.Context) error {
	rootURI := fileURI(c.root)
	params := map[string]any{
		"processId": os.Getpid(),
		"rootUri":   rootURI,
		"rootPath":  c.root,
		"workspaceFolders": []map[string]string{
			{"uri": rootURI, "name": filepath.Base(c.root)},
		},
		"capabilities": map[string]any{
			"textDocument": map[string]any{
				"completion":      map[string]any{"completionItem": map[string]any{"snippetSupport": false}},
				"documentSymbol":  map[string]any{"hierarchicalDocumentSymbolSupport": true},
				"synchronization": map[string]any{"didSave": false},
			},
			"workspace": map[string]any{"symbol": map[string]any{}, "workspaceFolders": true, "configuration": true},
		},
	}
	raw, err := c.call(ctx, "initialize", params)
	if err != nil {
		return err
	}
	var res struct {
		Capabilities struct {
			WorkspaceSymbolProvider json.RawMessage `json:"workspaceSymbolProvider"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return errorf(http.StatusInternalServerError, "%s language server: bad initialize result: %v", c.language, err)
	}
	p := string(res.Capabilities.WorkspaceSymbolProvider)
	c.caps.workspaceSymbol = p != "" && p != "false" && p != "null"
	return c.notify("initialized", map[string]any{})
}

func (c *lspClient) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// readLoop dispatches the server's messages: responses to their callers,
// requests answered at once, notifications dropped.
func (c *lspClient) readLoop(r *bufio.Reader) {
	defer c.failCalls()
	tp := textproto.NewReader(r)
	for {
		h, err := tp.ReadMIMEHeader()
		if err != nil {
			return
		}
		n, err := strconv.Atoi(h.Get("Content-Length"))
		if err != nil || n < 0 || n > maxLSPMessage {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		var m rpcMessage
		if json.Unmarshal(body, &m) != nil {
			continue
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			c.answerServerRequest(m)
		case m.Method == "" && len(m.ID) > 0:
			c.deliver(m)
		}
	}
}

// answerServerRequest gives the server's own requests (configuration,
// progress tokens, capability registration) empty answers.
func (c *lspClient) answerServerRequest(m rpcMessage) {
	var result any
	if m.Method == "workspace/configuration" {
		var p struct {
			Items []any `json:"items"`
		}
		json.Unmarshal(m.Params, &p)
		result = make([]any, len(p.Items))
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
}

func (c *lspClient) deliver(m rpcMessage) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	ch := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

func (c *lspClient) failCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ch := range c.calls {
		close(ch)
		delete(c.calls, id)
	}
}

func (c *lspClient) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := fmt.Fprintf(c.stdin, "Content-Length: %d\r\n\r\n", len(b)); err != nil {
		return err
	}
	_, err = c.stdin.Write(b)
	return err
}

func (c *lspClient) notify(method string, params any) error {
	if err := c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params}); err != nil {
		return errorf(http.StatusInternalServerError, "%s language server: %s: %v", c.language, method, err)
	}
	return nil
}

// call sends a request and waits for its answer, at most lspCallTimeout.
func (c *lspClient) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan rpcMessage, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.calls[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
	}()
	if err := c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return nil, errorf(http.StatusInternalServerError, "%s language server: %s: %v", c.language, method, err)
	}
	ctx, cancel := clock.WithTimeout(ctx, c.clock, lspCallTimeout)
	defer cancel()
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, errorf(http.StatusInternalServerError, "%s language server exited during %s", c.language, method)
		}
		if m.Error != nil {
			return nil, &lspCallError{rpcError: *m.Error, language: c.language, method: method}
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, errorf(http.StatusRequestTimeout, "%s language server did not answer %s in time", c.language, method)
	}
}

// lspCallError is a server's error answer; it becomes a 500 like other
// failures of the server.
type lspCallError struct {
	rpcError
	language, method string
}

func (e *lspCallError) Error() string {
	return fmt.Sprintf("%s language server: %s: %s (code %d)", e.language, e.method, e.Message, e.Code)
}

func (c *lspClient) stop() {
	ctx, cancel := clock.WithTimeout(context.Background(), c.clock, lspStopGrace)
	defer cancel()
	if _, err := c.call(ctx, "shutdown", nil); err == nil {
		c.notify("exit", nil)
	}
	t := c.clock.NewTimer(lspStopGrace)
	defer t.Stop()
	select {
	case <-c.dead:
	case <-t.C():
		c.kill()
	}
}

func (c *lspClient) kill() {
	killProcessGroup(c.cmd)
	c.stdin.Close()
	<-c.dead
}

// documentPath turns a request's uri into an absolute file path. The SDKs
// send "file://" + the path they were given, so a relative path arrives
// as "file://src/a.py"; it is resolved against the project.
func (c *lspClient) documentPath(uri string) (string, error) {
	p, ok := strings.CutPrefix(uri, "file://")
	if !ok {
		return "", errorf(http.StatusBadRequest, "uri %q is not a file:// URI", uri)
	}
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	if p == "" {
		return "", errorf(http.StatusBadRequest, "uri %q names no file", uri)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.root, p)
	}
	return filepath.Clean(p), nil
}

func fileURI(p string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String()
}

// open sends didOpen with the file's current content; a document that is
// open already is closed first, so that it is reread.
func (c *lspClient) open(uri string) (string, error) {
	p, err := c.documentPath(uri)
	if err != nil {
		return "", err
	}
	text, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", errorf(http.StatusNotFound, "document %s does not exist", p)
		}
		return "", errorf(http.StatusBadRequest, "reading document %s: %v", p, err)
	}
	doc := fileURI(p)
	c.mu.Lock()
	version, wasOpen := c.opened[doc]
	c.opened[doc] = version + 1
	c.mu.Unlock()
	if wasOpen {
		if err := c.notify("textDocument/didClose", map[string]any{"textDocument": map[string]string{"uri": doc}}); err != nil {
			return "", err
		}
	}
	err = c.notify("textDocument/didOpen", map[string]any{
		"textDocument": map[string]any{"uri": doc, "languageId": c.language, "version": version + 1, "text": string(text)},
	})
	return doc, err
}

// ensureOpen opens a document the client did not open itself: servers
// answer only for open documents.
func (c *lspClient) ensureOpen(uri string) (string, error) {
	p, err := c.documentPath(uri)
	if err != nil {
		return "", err
	}
	doc := fileURI(p)
	c.mu.Lock()
	_, ok := c.opened[doc]
	c.mu.Unlock()
	if ok {
		return doc, nil
	}
	return c.open(uri)
}

func (c *lspClient) close(uri string) error {
	p, err := c.documentPath(uri)
	if err != nil {
		return err
	}
	doc := fileURI(p)
	c.mu.Lock()
	_, ok := c.opened[doc]
	delete(c.opened, doc)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	return c.notify("textDocument/didClose", map[string]any{"textDocument": map[string]string{"uri": doc}})
}

func (c *lspClient) completions(ctx context.Context, req wire.LspCompletionParams) (wire.CompletionList, error) {
	doc, err := c.ensureOpen(req.URI)
	if err != nil {
		return wire.CompletionList{}, err
	}
	params := map[string]any{"textDocument": map[string]string{"uri": doc}, "position": req.Position}
	if req.Context != nil {
		params["context"] = req.Context
	}
	raw, err := c.call(ctx, "textDocument/completion", params)
	if err != nil {
		return wire.CompletionList{}, err
	}
	return parseCompletions(raw)
}

// parseCompletions accepts both of LSP's answers: a CompletionList or a
// bare array of items.
func parseCompletions(raw json.RawMessage) (wire.CompletionList, error) {
	type item struct {
		Label         string          `json:"label"`
		Kind          *int            `json:"kind"`
		Detail        string          `json:"detail"`
		Documentation json.RawMessage `json:"documentation"`
		SortText      string          `json:"sortText"`
		FilterText    string          `json:"filterText"`
		InsertText    string          `json:"insertText"`
	}
	var list struct {
		IsIncomplete bool   `json:"isIncomplete"`
		Items        []item `json:"items"`
	}
	if trimmed := strings.TrimSpace(string(raw)); strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal(raw, &list.Items); err != nil {
			return wire.CompletionList{}, errorf(http.StatusInternalServerError, "bad completion answer: %v", err)
		}
	} else if trimmed != "null" && trimmed != "" {
		if err := json.Unmarshal(raw, &list); err != nil {
			return wire.CompletionList{}, errorf(http.StatusInternalServerError, "bad completion answer: %v", err)
		}
	}
	out := wire.CompletionList{IsIncomplete: list.IsIncomplete, Items: make([]wire.CompletionItem, 0, len(list.Items))}
	for _, it := range list.Items {
		out.Items = append(out.Items, wire.CompletionItem{
			Label: it.Label, Kind: it.Kind, Detail: it.Detail, SortText: it.SortText,
			FilterText: it.FilterText, InsertText: it.InsertText,
			Documentation: markup(it.Documentation),
		})
	}
	return out, nil
}

// markup turns LSP documentation (a string or MarkupContent) into
// MarkupContent.
func markup(raw json.RawMessage) map[string]any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil
		}
		return map[string]any{"kind": "plaintext", "value": s}
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		return m
	}
	return nil
}

func (c *lspClient) documentSymbols(ctx context.Context, uri string) ([]wire.LspSymbol, error) {
	doc, err := c.ensureOpen(uri)
	if err != nil {
		return nil, err
	}
	raw, err := c.call(ctx, "textDocument/documentSymbol", map[string]any{"textDocument": map[string]string{"uri": doc}})
	if err != nil {
		return nil, err
	}
	return parseSymbols(raw, doc)
}

// lspSymbolWire is any of LSP's symbol shapes: SymbolInformation and
// WorkspaceSymbol carry a location, DocumentSymbol a range and children.
type lspSymbolWire struct {
	Name     string `json:"name"`
	Kind     int    `json:"kind"`
	Location *struct {
		URI   string         `json:"uri"`
		Range *wire.LspRange `json:"range"`
	} `json:"location"`
	Range    *wire.LspRange  `json:"range"`
	Children []lspSymbolWire `json:"children"`
}

// parseSymbols flattens any symbol answer into LspSymbols; doc is the URI
// of DocumentSymbols, which carry none.
func parseSymbols(raw json.RawMessage, doc string) ([]wire.LspSymbol, error) {
	var syms []lspSymbolWire
	if s := strings.TrimSpace(string(raw)); s != "null" && s != "" {
		if err := json.Unmarshal(raw, &syms); err != nil {
			return nil, errorf(http.StatusInternalServerError, "bad symbol answer: %v", err)
		}
	}
	out := []wire.LspSymbol{}
	var walk func([]lspSymbolWire)
	walk = func(ws []lspSymbolWire) {
		for _, w := range ws {
			sym := wire.LspSymbol{Name: w.Name, Kind: w.Kind, Location: wire.LspLocation{URI: doc}}
			switch {
			case w.Location != nil:
				sym.Location.URI = w.Location.URI
				if w.Location.Range != nil {
					sym.Location.Range = *w.Location.Range
				}
			case w.Range != nil:
				sym.Location.Range = *w.Range
			}
			out = append(out, sym)
			walk(w.Children)
		}
	}
	walk(syms)
	return out, nil
}

func (s *server) handleLSPStart(w http.ResponseWriter, r *http.Request) {
	var req wire.LspServerRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.lsp.start(r.Context(), req); err != nil {
		s.fail(w, r, lspFailure(err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *server) handleLSPStop(w http.ResponseWriter, r *http.Request) {
	var req wire.LspServerRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.lsp.stop(req); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// documentRequest decodes a document body and finds its server.
func (s *server) documentRequest(w http.ResponseWriter, r *http.Request, req *wire.LspDocumentRequest) (*lspClient, error) {
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, req); err != nil {
		return nil, err
	}
	if req.URI == "" {
		return nil, errorf(http.StatusBadRequest, "uri is required")
	}
	return s.lsp.get(req.LspServerRequest)
}

func (s *server) handleLSPDidOpen(w http.ResponseWriter, r *http.Request) {
	var req wire.LspDocumentRequest
	c, err := s.documentRequest(w, r, &req)
	if err == nil {
		_, err = c.open(req.URI)
	}
	if err != nil {
		s.fail(w, r, lspFailure(err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *server) handleLSPDidClose(w http.ResponseWriter, r *http.Request) {
	var req wire.LspDocumentRequest
	c, err := s.documentRequest(w, r, &req)
	if err == nil {
		err = c.close(req.URI)
	}
	if err != nil {
		s.fail(w, r, lspFailure(err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *server) handleLSPCompletions(w http.ResponseWriter, r *http.Request) {
	var req wire.LspCompletionParams
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.URI == "" || req.Position == nil {
		s.fail(w, r, errorf(http.StatusBadRequest, "uri and position are required"))
		return
	}
	c, err := s.lsp.get(req.LspServerRequest)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := c.completions(r.Context(), req)
	if err != nil {
		s.fail(w, r, lspFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) handleLSPDocumentSymbols(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("uri") == "" {
		s.fail(w, r, errorf(http.StatusBadRequest, "uri is required"))
		return
	}
	c, err := s.lsp.get(wire.LspServerRequest{LanguageID: q.Get("languageId"), PathToProject: q.Get("pathToProject")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	syms, err := c.documentSymbols(r.Context(), q.Get("uri"))
	if err != nil {
		s.fail(w, r, lspFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, syms)
}

func (s *server) handleLSPWorkspaceSymbols(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := s.lsp.get(wire.LspServerRequest{LanguageID: q.Get("languageId"), PathToProject: q.Get("pathToProject")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	syms, err := c.workspaceSymbols(r.Context(), q.Get("query"))
	if err != nil {
		s.fail(w, r, lspFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, syms)
}

// lspFailure makes a language server's error answer a 500.
func lspFailure(err error) error {
	var ce *lspCallError
	if errors.As(err, &ce) {
		return errorf(http.StatusInternalServerError, "%s", ce.Error())
	}
	return err
}
