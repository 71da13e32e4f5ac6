package toolbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	maxPTYs        = 64
	ptyDefaultCols = 80
	ptyDefaultRows = 24
	ptyMaxDim      = 1000
	// ptyPendingBytes is how much output a PTY keeps while no client is
	// connected; the first client gets it, the oldest bytes go first.
	ptyPendingBytes = 64 << 10
	// ptyClientQueue is how many output chunks a client may lag behind
	// before it is disconnected; a slow client never stalls the terminal.
	ptyClientQueue = 1024

	// ptyExitControlProtocol is offered by SDKs that understand the
	// "exited" control message; the others learn the exit from the close
	// frame only.
	ptyExitControlProtocol = "X-Daytona-Pty-Exit-Control"
	// ptyEnvsProtocolPrefix carries the environment of create-connect as
	// base64url JSON, after the "~".
	ptyEnvsProtocolPrefix = "X-Daytona-Pty-Envs~"
)

// ptyControl is the JSON text message of the PTY WebSocket protocol.
type ptyControl struct {
	Type       string `json:"type"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	ExitReason string `json:"exitReason,omitempty"`
	Error      string `json:"error,omitempty"`
}

// ptyExit is the close reason that ends a PTY connection.
type ptyExit struct {
	ExitCode   *int   `json:"exitCode,omitempty"`
	ExitReason string `json:"exitReason,omitempty"`
	Error      string `json:"error,omitempty"`
}

type ptyManager struct {
	srv *server
	reg *registry[string, *ptySession]
}

func newPtyManager(srv *server) *ptyManager {
	return &ptyManager{srv: srv, reg: newRegistry[string, *ptySession]()}
}

// A ptySession is a shell on a pseudo-terminal. It outlives its WebSocket
// connections: clients come and go, the shell runs until it exits or the
// session is deleted.
type ptySession struct {
	id        string
	cwd       string
	env       []string
	envNames  []string
	createdAt time.Time
	lazy      bool
	opts      Options

	mu       sync.Mutex
	cols     int
	rows     int
	started  bool
	cmd      *exec.Cmd
	ptmx     *os.File
	clients  map[*ptyClient]struct{}
	pending  []byte
	exited   bool
	deleted  bool // kill ended it: reported as killed
	exitCode int
	reason   string
	readDone chan struct{}
	done     chan struct{} // closed once exited is set
}

type ptyClient struct {
	out    chan []byte
	kicked chan struct{}
}

func (pm *ptyManager) create(req wire.PtyCreateRequest) (*ptySession, error) {
	sess, err := pm.newSession(req)
	if err != nil {
		return nil, err
	}
	return pm.reg.add(sess.id, func(_ *ptySession, taken bool, n int) (*ptySession, error) {
		switch {
		case taken:
			return nil, errorf(http.StatusConflict, "PTY session with ID %s already exists", sess.id)
		case n >= maxPTYs:
			return nil, errorf(http.StatusConflict, "too many PTY sessions: at most %d; delete one first", maxPTYs)
		}
		if !sess.lazy {
			if err := sess.start(); err != nil {
				return nil, err
			}
		}
		return sess, nil
	})
}

func (pm *ptyManager) newSession(req wire.PtyCreateRequest) (*ptySession, error) {
	if req.ID == "" {
		req.ID = uuid.NewString()
	}
	if err := validSessionID(req.ID); err != nil {
		return nil, err
	}
	cols, err := ptyDim("cols", req.Cols, ptyDefaultCols)
	if err != nil {
		return nil, err
	}
	rows, err := ptyDim("rows", req.Rows, ptyDefaultRows)
	if err != nil {
		return nil, err
	}
	if err := validateEnv(req.Envs); err != nil {
		return nil, err
	}
	cwd := pm.srv.absPath(req.Cwd)
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, errorf(http.StatusBadRequest, "cwd %s is not a directory", cwd)
	}
	names := make([]string, 0, len(req.Envs))
	for k := range req.Envs {
		names = append(names, k)
	}
	sort.Strings(names)
	// TERM before the request's env, which may set its own.
	env := appendEnv(append(pm.srv.opts.env.environ(), "TERM=xterm-256color"), req.Envs)
	return &ptySession{
		id: req.ID, cwd: cwd, env: env, envNames: names,
		createdAt: pm.srv.opts.Clock.Now().UTC(), lazy: req.LazyStart, opts: pm.srv.opts,
		cols: cols, rows: rows,
		clients: map[*ptyClient]struct{}{},
		done:    make(chan struct{}),
	}, nil
}

func ptyDim(name string, v *int, def int) (int, error) {
	if v == nil || *v == 0 {
		return def, nil
	}
	if *v < 1 || *v > ptyMaxDim {
		return 0, errorf(http.StatusBadRequest, "%s must be between 1 and %d", name, ptyMaxDim)
	}
	return *v, nil
}

// get returns the PTY id; after close there is none.
func (pm *ptyManager) get(id string) (*ptySession, error) {
	sess, err := pm.reg.get(id)
	if err != nil {
		return nil, codedf(http.StatusNotFound, wire.CodeProcessNotFound, "PTY session %s not found", id)
	}
	return sess, nil
}

func (pm *ptyManager) remove(id string) error {
	sess, ok := pm.reg.remove(id)
	if !ok {
		return codedf(http.StatusNotFound, wire.CodeProcessNotFound, "PTY session %s not found", id)
	}
	sess.kill()
	return nil
}

func (pm *ptyManager) list() []wire.PtySessionInfo {
	all := pm.reg.values()
	sort.Slice(all, func(i, j int) bool {
		return all[i].createdAt.Before(all[j].createdAt) || all[i].createdAt.Equal(all[j].createdAt) && all[i].id < all[j].id
	})
	out := make([]wire.PtySessionInfo, 0, len(all))
	for _, s := range all {
		out = append(out, s.info())
	}
	return out
}

func (pm *ptyManager) closeAll() {
	// At once: each may wait out a hang-up's grace.
	var wg sync.WaitGroup
	for _, s := range pm.reg.close() {
		wg.Go(s.kill)
	}
	wg.Wait()
}

// ptyShell is the user's login shell, else bash, else sh.
func ptyShell() string {
	if sh := os.Getenv("SHELL"); strings.HasPrefix(sh, "/") {
		if _, err := os.Stat(sh); err == nil {
			return sh
		}
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return fallbackShell
}

// start runs the shell once; later calls do nothing.
func (p *ptySession) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.exited {
		return nil
	}
	cmd := exec.Command(ptyShell())
	cmd.Dir = p.cwd
	cmd.Env = p.env
	ptmx, err := startPTY(cmd, p.cols, p.rows)
	if err != nil {
		return errorf(http.StatusInternalServerError, "starting the PTY shell: %v", err)
	}
	p.started, p.cmd, p.ptmx = true, cmd, ptmx
	p.readDone = make(chan struct{})
	go p.readLoop()
	go p.waitLoop()
	return nil
}

// readLoop fans the terminal's output out to the connected clients, or
// keeps it for the next one while none is connected.
func (p *ptySession) readLoop() {
	defer close(p.readDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := p.ptmx.Read(buf)
		if n > 0 {
			p.broadcast(append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			// EIO once every holder of the terminal's other end is gone.
			return
		}
	}
}

func (p *ptySession) broadcast(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.clients) == 0 {
		p.pending = append(p.pending, b...)
		if over := len(p.pending) - ptyPendingBytes; over > 0 {
			p.pending = append(p.pending[:0], p.pending[over:]...)
		}
		return
	}
	for c := range p.clients {
		select {
		case c.out <- b:
		default:
			delete(p.clients, c)
			close(c.kicked)
		}
	}
}

// waitLoop records the shell's exit once its output has been read, or
// after the output grace when background jobs keep the terminal open.
func (p *ptySession) waitLoop() {
	err := p.cmd.Wait()
	code, reason := ptyExitStatus(p.cmd, err)
	p.mu.Lock()
	if p.deleted {
		// Daytona reports a deleted PTY as killed, whatever its shell
		// made of the hang-up that came first here.
		code, reason = 128+int(syscall.SIGKILL), "terminated by signal "+syscall.SIGKILL.String()
	}
	p.mu.Unlock()
	t := p.opts.Clock.NewTimer(p.opts.OutputGrace)
	select {
	case <-p.readDone:
	case <-t.C():
	}
	t.Stop()
	p.mu.Lock()
	p.exited, p.exitCode, p.reason = true, code, reason
	p.mu.Unlock()
	close(p.done)
}

// ptyExitStatus gives a shell's exit code, 128+n for signal n as shells
// report it, and a reason for anything but a clean exit.
func ptyExitStatus(cmd *exec.Cmd, err error) (int, string) {
	if cmd.ProcessState == nil {
		return -1, fmt.Sprintf("wait failed: %v", err)
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal()), "terminated by signal " + st.Signal().String()
	}
	code := exitCode(cmd, err)
	if code != 0 {
		return code, fmt.Sprintf("exited with code %d", code)
	}
	return 0, ""
}

// kill ends the shell and everything in its terminal session.
func (p *ptySession) kill() {
	p.mu.Lock()
	if !p.started {
		if !p.exited {
			p.exited, p.exitCode, p.reason = true, -1, "PTY session deleted before it started"
			close(p.done)
		}
		p.mu.Unlock()
		return
	}
	cmd := p.cmd
	p.deleted = true
	p.mu.Unlock()
	tree := sessionTree(cmd.Process.Pid)
	// No end of input here: closing the terminal would cut off the
	// output that still drains through it until the shell exits.
	hangUp(tree, nil, p.done, p.opts.Clock)
	killSession(cmd.Process.Pid)
	signalMembers(tree, syscall.SIGKILL)
	<-p.done
	p.ptmx.Close()
}

func (p *ptySession) info() wire.PtySessionInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	envs := make(map[string]string, len(p.envNames))
	for _, k := range p.envNames {
		envs[k] = ""
	}
	return wire.PtySessionInfo{
		ID: p.id, Cwd: p.cwd, Envs: envs, Cols: p.cols, Rows: p.rows,
		CreatedAt: p.createdAt.Format(time.RFC3339Nano),
		Active:    p.started && !p.exited,
		LazyStart: p.lazy,
	}
}

func (p *ptySession) resize(cols, rows int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cols, p.rows = cols, rows
	if !p.started || p.exited {
		return nil
	}
	if err := setPTYSize(p.ptmx, cols, rows); err != nil {
		return errorf(http.StatusInternalServerError, "resizing the PTY: %v", err)
	}
	return nil
}

// attach adds a client and hands it what was written while nobody watched.
func (p *ptySession) attach() (*ptyClient, []byte) {
	c := &ptyClient{out: make(chan []byte, ptyClientQueue), kicked: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients[c] = struct{}{}
	pending := p.pending
	p.pending = nil
	return c, pending
}

func (p *ptySession) detach(c *ptyClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.clients, c)
}

func (p *ptySession) write(b []byte) error {
	p.mu.Lock()
	ptmx, live := p.ptmx, p.started && !p.exited
	p.mu.Unlock()
	if !live {
		return errors.New("the PTY has exited")
	}
	_, err := ptmx.Write(b)
	return err
}

func (p *ptySession) exitInfo() ptyExit {
	p.mu.Lock()
	defer p.mu.Unlock()
	code := p.exitCode
	return ptyExit{ExitCode: &code, ExitReason: p.reason}
}

func (s *server) handleCreatePty(w http.ResponseWriter, r *http.Request) {
	var req wire.PtyCreateRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	sess, err := s.ptys.create(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, wire.PtyCreateResponse{SessionID: sess.id})
}

func (s *server) handleListPty(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.PtyListResponse{Sessions: s.ptys.list()})
}

func (s *server) handleGetPty(w http.ResponseWriter, r *http.Request) {
	sess, err := s.ptys.get(r.PathValue("sessionId"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess.info())
}

func (s *server) handleDeletePty(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sessionId")
	if err := s.ptys.remove(id); err != nil {
		s.fail(w, r, err)
		return
	}
	// The documented body is gin.H with object values; the official Go
	// client fails to decode anything else, so the object is empty.
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *server) handleResizePty(w http.ResponseWriter, r *http.Request) {
	sess, err := s.ptys.get(r.PathValue("sessionId"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req wire.PtyResizeRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Cols == nil || req.Rows == nil {
		s.fail(w, r, errorf(http.StatusBadRequest, "cols and rows are required"))
		return
	}
	cols, err := ptyDim("cols", req.Cols, 0)
	if err == nil && *req.Cols == 0 {
		err = errorf(http.StatusBadRequest, "cols must be between 1 and %d", ptyMaxDim)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, err := ptyDim("rows", req.Rows, 0)
	if err == nil && *req.Rows == 0 {
		err = errorf(http.StatusBadRequest, "rows must be between 1 and %d", ptyMaxDim)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := sess.resize(cols, rows); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess.info())
}

// handleConnectPty attaches a WebSocket to a PTY session. Frames from the
// client are terminal input; the terminal's output goes out as binary
// frames. The first message is the text control {"type":"control",
// "status":"connected"}; the connection closes with 1000 and the reason
// {"exitCode":N,"exitReason":"..."} when the shell exits, after an
// "exited" control message for clients that offered ptyExitControlProtocol.
func (s *server) handleConnectPty(w http.ResponseWriter, r *http.Request) {
	sess, err := s.ptys.get(r.PathValue("sessionId"))
	if err != nil && !isWebSocket(r) {
		s.fail(w, r, err)
		return
	}
	conn, aerr := acceptWebSocket(w, r, ptyExitControlProtocol)
	if aerr != nil {
		return
	}
	if err != nil {
		refusePty(r.Context(), conn, err)
		return
	}
	s.servePty(r.Context(), conn, sess, offers(r, ptyExitControlProtocol))
}

// handleCreateConnectPty is the newer SDKs' single round trip: create a
// lazily started session from the query (envs in a subprotocol token) and
// connect to it.
func (s *server) handleCreateConnectPty(w http.ResponseWriter, r *http.Request) {
	req, perr := ptyCreateFromQuery(r)
	if perr != nil && !isWebSocket(r) {
		s.fail(w, r, perr)
		return
	}
	conn, err := acceptWebSocket(w, r, ptyExitControlProtocol)
	if err != nil {
		return
	}
	if perr != nil {
		refusePty(r.Context(), conn, perr)
		return
	}
	sess, err := s.ptys.create(req)
	if err != nil {
		refusePty(r.Context(), conn, err)
		return
	}
	s.servePty(r.Context(), conn, sess, offers(r, ptyExitControlProtocol))
}

func ptyCreateFromQuery(r *http.Request) (wire.PtyCreateRequest, error) {
	q := r.URL.Query()
	req := wire.PtyCreateRequest{ID: q.Get("id"), Cwd: q.Get("cwd"), LazyStart: true}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"cols", &req.Cols}, {"rows", &req.Rows}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return req, errorf(http.StatusBadRequest, "%s must be a number", f.name)
			}
			*f.dst = &n
		}
	}
	for _, p := range offeredProtocols(r) {
		enc, ok := strings.CutPrefix(p, ptyEnvsProtocolPrefix)
		if !ok {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || json.Unmarshal(raw, &req.Envs) != nil {
			return req, errorf(http.StatusBadRequest, "invalid PTY environment token")
		}
	}
	return req, nil
}

func offers(r *http.Request, proto string) bool {
	for _, p := range offeredProtocols(r) {
		if p == proto {
			return true
		}
	}
	return false
}

// refusePty reports a failure the SDKs read from the close reason.
func refusePty(ctx context.Context, conn *websocket.Conn, err error) {
	msg := asAPIError(err).msg
	writeJSONMessage(ctx, conn, ptyControl{Type: "control", Status: "error", Error: msg})
	conn.Close(websocket.StatusPolicyViolation, fittingReason(msg, func(m string) any { return ptyExit{Error: m} }))
}

func (s *server) servePty(ctx context.Context, conn *websocket.Conn, sess *ptySession, exitControl bool) {
	defer conn.CloseNow()
	if err := sess.start(); err != nil {
		refusePty(ctx, conn, err)
		return
	}
	client, pending := sess.attach()
	defer sess.detach(client)
	if writeJSONMessage(ctx, conn, ptyControl{Type: "control", Status: "connected"}) != nil {
		return
	}
	if len(pending) > 0 && conn.Write(ctx, websocket.MessageBinary, pending) != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer cancel()
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			// Input after the shell's exit is dropped; the exit report
			// still goes out.
			sess.write(data)
		}
	}()
	for {
		select {
		case b := <-client.out:
			if conn.Write(ctx, websocket.MessageBinary, b) != nil {
				return
			}
		case <-client.kicked:
			conn.Close(websocket.StatusPolicyViolation, "client too slow: output dropped")
			return
		case <-sess.done:
			s.finishPty(ctx, conn, sess, client, exitControl)
			return
		case <-ctx.Done():
			return
		}
	}
}

// finishPty flushes the output that preceded the exit and reports it.
func (s *server) finishPty(ctx context.Context, conn *websocket.Conn, sess *ptySession, client *ptyClient, exitControl bool) {
	for {
		select {
		case b := <-client.out:
			if conn.Write(ctx, websocket.MessageBinary, b) != nil {
				return
			}
			continue
		default:
		}
		break
	}
	exit := sess.exitInfo()
	if exitControl {
		ctl := ptyControl{Type: "control", Status: "exited", ExitCode: exit.ExitCode, ExitReason: exit.ExitReason}
		if writeJSONMessage(ctx, conn, ctl) != nil {
			return
		}
	}
	conn.Close(websocket.StatusNormalClosure, closeReason(exit))
}
