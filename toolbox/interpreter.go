package toolbox

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/sandplane/sandplane/toolbox/wire"
)

//go:embed interpreter_driver.py
var interpreterDriver string

const (
	defaultContextID = "default"
	maxContexts      = 64
	// interruptGrace is how long an interrupted run may take to unwind
	// before its worker is killed; the context then starts afresh.
	interruptGrace = 2 * time.Second
	// maxInterpreterMessage bounds one message of a worker (one print).
	maxInterpreterMessage = 64 << 20
	// interpTimeoutCode closes a run that exceeded its timeout; the SDKs
	// turn it into their timeout error.
	interpTimeoutCode websocket.StatusCode = 4008
)

// interpRequest is the first message of an execute WebSocket.
type interpRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"contextId"`
	Envs      map[string]string `json:"envs"`
	// Timeout is in seconds; absent or 0 means none.
	Timeout *int64 `json:"timeout"`
}

// interpMessage is a message of the worker and of the execute WebSocket.
type interpMessage struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	Traceback string `json:"traceback,omitempty"`
}

type interpreters struct {
	srv *server
	reg *registry[string, *interpContext]
}

func newInterpreters(srv *server) *interpreters {
	return &interpreters{srv: srv, reg: newRegistry[string, *interpContext]()}
}

// An interpContext is one python worker whose globals persist across runs.
// Runs take turns; a worker that dies or must be killed is replaced, with
// fresh globals, by the next run.
type interpContext struct {
	id        string
	cwd       string
	createdAt time.Time
	turn      chan struct{} // holds a token while a run owns the context
	env       *procEnv      // what each of its workers starts with

	mu     sync.Mutex
	worker *interpWorker
}

func (in *interpreters) create(req wire.CreateContextRequest) (*interpContext, error) {
	if req.Language != "" && req.Language != "python" {
		return nil, errorf(http.StatusBadRequest, "unsupported language: %s; interpreter contexts support python only", req.Language)
	}
	cwd := in.srv.absPath(req.Cwd)
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, errorf(http.StatusBadRequest, "cwd %s is not a directory", cwd)
	}
	c := in.newContext(uuid.NewString(), cwd)
	if err := c.ensureWorker(); err != nil {
		return nil, err
	}
	_, err := in.reg.add(c.id, func(_ *interpContext, _ bool, n int) (*interpContext, error) {
		if n >= maxContexts {
			return nil, errorf(http.StatusConflict, "too many interpreter contexts: at most %d; delete one first", maxContexts)
		}
		return c, nil
	})
	if err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

func (in *interpreters) newContext(id, cwd string) *interpContext {
	return &interpContext{id: id, cwd: cwd, createdAt: in.srv.opts.Clock.Now().UTC(), turn: make(chan struct{}, 1), env: in.srv.opts.env}
}

// get returns a context; the empty id is the default context, made on
// first use in the work directory.
func (in *interpreters) get(id string) (*interpContext, error) {
	if id == "" || id == defaultContextID {
		return in.reg.getOrAdd(defaultContextID, func() *interpContext {
			return in.newContext(defaultContextID, in.srv.opts.WorkDir)
		})
	}
	c, err := in.reg.get(id)
	if errors.Is(err, errMissing) {
		return nil, errorf(http.StatusNotFound, "interpreter context %s not found", id)
	}
	return c, err
}

func (in *interpreters) remove(id string) error {
	if id == defaultContextID {
		return errorf(http.StatusBadRequest, "the default interpreter context cannot be deleted")
	}
	c, ok := in.reg.remove(id)
	if !ok {
		return errorf(http.StatusNotFound, "interpreter context %s not found", id)
	}
	c.kill()
	return nil
}

// list returns the contexts clients created; the default one is left out.
func (in *interpreters) list() []wire.InterpreterContext {
	all := slices.DeleteFunc(in.reg.values(), func(c *interpContext) bool { return c.id == defaultContextID })
	sort.Slice(all, func(i, j int) bool {
		if !all[i].createdAt.Equal(all[j].createdAt) {
			return all[i].createdAt.Before(all[j].createdAt)
		}
		return all[i].id < all[j].id
	})
	out := make([]wire.InterpreterContext, 0, len(all))
	for _, c := range all {
		out = append(out, c.info())
	}
	return out
}

func (in *interpreters) closeAll() {
	for _, c := range in.reg.close() {
		c.kill()
	}
}

func (c *interpContext) info() wire.InterpreterContext {
	c.mu.Lock()
	defer c.mu.Unlock()
	return wire.InterpreterContext{
		ID: c.id, Cwd: c.cwd, Language: "python",
		CreatedAt: c.createdAt.Format(time.RFC3339Nano),
		Active:    c.worker != nil && !c.worker.isDead(),
	}
}

// ensureWorker starts a worker unless a live one exists.
func (c *interpContext) ensureWorker() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.worker != nil && !c.worker.isDead() {
		return nil
	}
	w, err := startWorker(c.cwd, c.env.environ())
	if err != nil {
		return err
	}
	c.worker = w
	return nil
}

func (c *interpContext) currentWorker() *interpWorker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.worker
}

func (c *interpContext) kill() {
	c.mu.Lock()
	w := c.worker
	c.mu.Unlock()
	if w != nil {
		w.kill()
	}
}

// interpWorker is a running driver process.
type interpWorker struct {
	cmd    *exec.Cmd
	reqs   *os.File // the driver reads requests from here
	marker []byte
	dead   chan struct{}

	mu  sync.Mutex
	run *interpRun // the run being served, if any
}

// interpRun collects one run's messages. It is over when the driver said
// "done" and both raw output streams passed the marker, or when the worker
// died.
type interpRun struct {
	msgs    chan interpMessage
	pending int // end signals still to come; guarded by the worker's mu
	once    sync.Once
	done    chan struct{}
}

func (r *interpRun) finish() { r.once.Do(func() { close(r.done) }) }

func startWorker(cwd string, environ []string) (*interpWorker, error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "python3 is not installed in the sandbox: the interpreter needs it")
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	w := &interpWorker{reqs: reqW, marker: []byte("<sandplane-end-" + randomHex(16) + ">"), dead: make(chan struct{})}
	cmd := exec.Command(python, "-u", "-c", interpreterDriver)
	cmd.Dir = cwd
	cmd.Env = append(environ, "SANDPLANE_INTERPRETER_MARKER="+string(w.marker), "PYTHONIOENCODING=utf-8")
	cmd.ExtraFiles = []*os.File{ctlW, reqR} // fds 3 and 4
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, errors.Join(err, ctlR.Close(), ctlW.Close(), reqR.Close(), reqW.Close())
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, errors.Join(err, ctlR.Close(), ctlW.Close(), reqR.Close(), reqW.Close())
	}
	setProcessGroup(cmd)
	err = cmd.Start()
	ctlW.Close()
	reqR.Close()
	if err != nil {
		ctlR.Close()
		reqW.Close()
		return nil, errorf(http.StatusInternalServerError, "starting the interpreter: %v", err)
	}
	w.cmd = cmd
	var pumps sync.WaitGroup
	pumps.Add(3)
	go func() { defer pumps.Done(); w.readControl(ctlR) }()
	go func() { defer pumps.Done(); w.readRaw(stdout, "stdout") }()
	go func() { defer pumps.Done(); w.readRaw(stderr, "stderr") }()
	go func() {
		// Wait closes the stdout and stderr pipes, so the pumps go first.
		pumps.Wait()
		cmd.Wait()
		ctlR.Close()
		close(w.dead)
		w.fail("the interpreter process exited; the context starts afresh on its next run")
	}()
	return w, nil
}

// readControl reads the driver's messages. Its fd 2 gets the marker like
// fd 1, and its control stream ends a run with "done"; they may come in
// any order.
func (w *interpWorker) readControl(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxInterpreterMessage)
	for sc.Scan() {
		var m interpMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		run := w.current()
		switch {
		case run == nil:
		case m.Type == "done":
			w.signal(run)
		default:
			run.deliver(m)
		}
	}
	// The control stream broke: the worker is going away. The goroutine
	// that waits for it reaps it.
	if !w.isDead() {
		killProcessGroup(w.cmd)
	}
}

// readRaw forwards what the worker's processes write to a file descriptor
// directly, up to each run's marker.
func (w *interpWorker) readRaw(r io.Reader, kind string) {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		pending = append(pending, buf[:n]...)
		for {
			run := w.current()
			i := bytes.Index(pending, w.marker)
			if i < 0 {
				keep := max(markerTail(pending, w.marker), utf8Tail(pending))
				run.deliverText(kind, pending[:len(pending)-keep])
				pending = append(pending[:0], pending[len(pending)-keep:]...)
				break
			}
			run.deliverText(kind, pending[:i])
			if run != nil {
				w.signal(run)
			}
			pending = pending[i+len(w.marker):]
		}
		if err != nil {
			return
		}
	}
}

func (w *interpWorker) current() *interpRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.run
}

// signal counts one of a run's end signals.
func (w *interpWorker) signal(run *interpRun) {
	w.mu.Lock()
	defer w.mu.Unlock()
	run.pending--
	if run.pending == 0 {
		if w.run == run {
			w.run = nil
		}
		run.finish()
	}
}

// fail ends the current run, if any, with an error message.
func (w *interpWorker) fail(msg string) {
	w.mu.Lock()
	run := w.run
	w.run = nil
	w.mu.Unlock()
	if run == nil {
		return
	}
	select {
	case run.msgs <- interpMessage{Type: "error", Name: "InterpreterError", Value: msg}:
	default:
	}
	run.finish()
}

// deliver hands a message to the run. It blocks while the client is slow
// to read, which slows the worker down: backpressure, not loss.
func (r *interpRun) deliver(m interpMessage) {
	if r == nil {
		return
	}
	select {
	case r.msgs <- m:
	case <-r.done:
	}
}

func (r *interpRun) deliverText(kind string, b []byte) {
	if len(b) > 0 {
		r.deliver(interpMessage{Type: kind, Text: string(b)})
	}
}

// markerTail is the length of the longest tail of p that could begin the
// marker; that much output waits for the next read.
func markerTail(p, marker []byte) int {
	for k := min(len(marker)-1, len(p)); k > 0; k-- {
		if bytes.HasPrefix(marker, p[len(p)-k:]) {
			return k
		}
	}
	return 0
}

// utf8Tail is the length of an incomplete UTF-8 sequence ending p.
func utf8Tail(p []byte) int {
	for k := 1; k <= 3 && k <= len(p); k++ {
		if utf8.RuneStart(p[len(p)-k]) {
			if !utf8.FullRune(p[len(p)-k:]) {
				return k
			}
			return 0
		}
	}
	return 0
}

func (w *interpWorker) isDead() bool {
	select {
	case <-w.dead:
		return true
	default:
		return false
	}
}

// begin sends one request to the worker.
func (w *interpWorker) begin(req interpRequest) (*interpRun, error) {
	line, err := json.Marshal(map[string]any{"code": req.Code, "envs": req.Envs})
	if err != nil {
		return nil, err
	}
	run := &interpRun{msgs: make(chan interpMessage, 64), pending: 3, done: make(chan struct{})}
	w.mu.Lock()
	if w.isDead() {
		w.mu.Unlock()
		return nil, errors.New("the interpreter process exited")
	}
	w.run = run
	w.mu.Unlock()
	if _, err := w.reqs.Write(append(line, '\n')); err != nil {
		w.kill()
		return nil, fmt.Errorf("sending code to the interpreter: %w", err)
	}
	return run, nil
}

func (w *interpWorker) interrupt() {
	if w.cmd.Process != nil {
		w.cmd.Process.Signal(syscall.SIGINT)
	}
}

func (w *interpWorker) kill() {
	if !w.isDead() {
		killProcessGroup(w.cmd)
	}
	w.reqs.Close()
	<-w.dead
}

func (s *server) handleCreateContext(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateContextRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := s.interp.create(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c.info())
}

func (s *server) handleListContexts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.ListContextsResponse{Contexts: s.interp.list()})
}

func (s *server) handleDeleteContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.interp.remove(id); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "interpreter context " + id + " deleted"})
}

// handleInterpreterExecute runs code in a context over a WebSocket. The
// client sends one JSON request; the server streams stdout, stderr and
// error messages, then {"type":"control","text":"completed"} and a normal
// close. A run past its timeout is interrupted and closed with 4008.
func (s *server) handleInterpreterExecute(w http.ResponseWriter, r *http.Request) {
	conn, err := acceptWebSocket(w, r)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx := r.Context()
	req, err := readInterpRequest(ctx, conn)
	if err != nil {
		conn.Close(websocket.StatusPolicyViolation, truncateReason(err.Error()))
		return
	}
	c, err := s.interp.get(req.ContextID)
	if err != nil {
		conn.Close(websocket.StatusPolicyViolation, truncateReason(asAPIError(err).msg))
		return
	}
	s.runInContext(ctx, conn, c, req)
}

func readInterpRequest(ctx context.Context, conn *websocket.Conn) (interpRequest, error) {
	_, b, err := conn.Read(ctx)
	if err != nil {
		return interpRequest{}, err
	}
	return parseInterpRequest(b)
}

// parseInterpRequest decodes and checks a run request, the WebSocket's
// first message.
func parseInterpRequest(b []byte) (interpRequest, error) {
	var req interpRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return req, fmt.Errorf("invalid request: %v", err)
	}
	if req.Code == "" {
		return req, errors.New("code is required")
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		return req, errors.New("timeout must not be negative")
	}
	if err := validateEnv(req.Envs); err != nil {
		return req, err
	}
	return req, nil
}

func (s *server) runInContext(ctx context.Context, conn *websocket.Conn, c *interpContext, req interpRequest) {
	// The client may leave while it waits for its turn.
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		// Reads surface the client's close; other messages are ignored.
		defer stopWatch()
		for {
			if _, _, err := conn.Read(watch); err != nil {
				return
			}
		}
	}()
	select {
	case c.turn <- struct{}{}:
		defer func() { <-c.turn }()
	case <-watch.Done():
		return
	}
	if err := c.ensureWorker(); err != nil {
		conn.Close(websocket.StatusInternalError, truncateReason(asAPIError(err).msg))
		return
	}
	worker := c.currentWorker()
	run, err := worker.begin(req)
	if err != nil {
		conn.Close(websocket.StatusInternalError, truncateReason(err.Error()))
		return
	}
	var timeout <-chan time.Time
	if d := timeoutDuration(req.Timeout); d > 0 {
		t := s.opts.Clock.NewTimer(d)
		defer t.Stop()
		timeout = t.C()
	}
	for {
		select {
		case m := <-run.msgs:
			if writeJSONMessage(watch, conn, m) != nil {
				s.abandonRun(worker, run)
				return
			}
		case <-run.done:
			s.flushRun(watch, conn, run)
			writeJSONMessage(watch, conn, interpMessage{Type: "control", Text: "completed"})
			conn.Close(websocket.StatusNormalClosure, "")
			return
		case <-timeout:
			s.abandonRun(worker, run)
			conn.Close(interpTimeoutCode, "execution timed out")
			return
		case <-watch.Done():
			s.abandonRun(worker, run)
			return
		}
	}
}

// flushRun sends what the run delivered before it ended.
func (s *server) flushRun(ctx context.Context, conn *websocket.Conn, run *interpRun) {
	for {
		select {
		case m := <-run.msgs:
			if writeJSONMessage(ctx, conn, m) != nil {
				return
			}
		default:
			return
		}
	}
}

// abandonRun interrupts a run nobody waits for any more; a worker that does
// not come back from the interrupt within interruptGrace is killed.
func (s *server) abandonRun(w *interpWorker, run *interpRun) {
	w.interrupt()
	grace := s.opts.Clock.NewTimer(interruptGrace)
	defer grace.Stop()
	for {
		select {
		case <-run.msgs:
		case <-run.done:
			return
		case <-grace.C():
			w.kill()
			return
		}
	}
}
