package toolbox

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	maxSessions = 256
	// maxSessionCommands bounds the commands a session remembers; the oldest
	// finished ones are forgotten first.
	maxSessionCommands = 1000
	maxSessionIDBytes  = 256
)

// A session is one long-lived shell. Commands run one after another in it,
// so `cd` and `export` carry over, like Daytona's sessions. Each command is
// framed by markers the shell prints on stdout and stderr after it, which
// tell where its output ends and what its exit code was.
//
// The shell leads a terminal session (setsid) of its own, without a
// terminal: whatever it starts stays in that session, background jobs and
// the process groups of `set -m` included, and deleting the session kills
// all of it. Only a process that calls setsid itself and whose parent has
// exited escapes; inside a sandplane sandbox the sandbox's PID-namespace
// init still ends it when the sandbox stops.
type session struct {
	id      string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	outR    *os.File
	errR    *os.File
	outSize int
	all     *sessions // for the log budget they share
	clock   clock.Clock
	grace   time.Duration
	outEOF  chan struct{}
	errEOF  chan struct{}

	writeMu  sync.Mutex
	mu       sync.Mutex
	commands []*sessionCommand // in submission order
	byID     map[string]*sessionCommand
	pending  []*sessionCommand // sent to the shell, not finished
	reaped   bool              // the shell's pid is no longer ours
	exited   bool              // and every pending command is finished
	exitCode int
	gone     chan struct{}   // closed when the shell has exited
	inputDir string          // holds the FIFOs of async commands; made on first use
	entry    *sessionCommand // the entrypoint, in the entrypoint session
}

type sessionCommand struct {
	seq     uint64 // submission order across all sessions
	id      string
	text    string
	marker  []byte // unique token the shell prints after the command
	outDone bool
	errDone bool
	code    int // from the stdout marker
	stdout  cappedBuffer
	stderr  cappedBuffer
	output  cappedBuffer
	// discarded: the logs were given up to make room for newer ones.
	discarded bool
	exit      *int
	done      chan struct{}
	// changed is closed (and cleared) when the logs grow or the command
	// ends; a follower makes it when it waits.
	changed chan struct{}
	// runs record where the kept output switched streams, so that a
	// follower sends stdout and stderr in the order they came.
	runs []streamRun

	// stdin is the write end of an async command's FIFO while the command
	// runs; nil for a sync command, whose stdin is /dev/null.
	stdin     *os.File
	stdinPath string
	// echo copies input into stdout, as a terminal would echo typing.
	echo    bool
	inputMu sync.Mutex // one input at a time, never interleaved
}

type sessions struct {
	srv    *server
	budget *logBudget
	seq    atomic.Uint64
	reg    *registry[string, *session]
}

func newSessions(srv *server) *sessions {
	return &sessions{
		srv:    srv,
		budget: &logBudget{limit: srv.opts.MaxSessionLogBytes},
		reg:    newRegistry[string, *session](),
	}
}

func validSessionID(id string) error {
	if strings.TrimSpace(id) == "" {
		return errorf(http.StatusBadRequest, "sessionId is required")
	}
	if len(id) > maxSessionIDBytes {
		return errorf(http.StatusBadRequest, "sessionId is longer than %d bytes", maxSessionIDBytes)
	}
	for _, r := range id {
		if r == '/' || r == '\\' || !unicode.IsPrint(r) {
			return errorf(http.StatusBadRequest, "sessionId must be printable and contain no slashes")
		}
	}
	return nil
}

func (ss *sessions) create(id string) error {
	if err := validSessionID(id); err != nil {
		return err
	}
	_, err := ss.start(id, false)
	return err
}

// start makes the session id; only the toolbox itself may make the
// entrypoint session.
func (ss *sessions) start(id string, entrypoint bool) (*session, error) {
	return ss.reg.add(id, func(_ *session, taken bool, n int) (*session, error) {
		switch {
		case taken:
			return nil, errorf(http.StatusConflict, "session already exists")
		case id == entrypointSessionID && !entrypoint:
			return nil, errorf(http.StatusBadRequest, "sessionId %q is reserved for the sandbox's entrypoint", id)
		case n >= maxSessions:
			return nil, errorf(http.StatusConflict, "too many sessions: at most %d", maxSessions)
		}
		sess, err := startSession(id, ss.srv.opts, ss)
		if err != nil {
			return nil, errorf(http.StatusInternalServerError, "starting session shell: %v", err)
		}
		return sess, nil
	})
}

// get returns the session id; after close there is none.
func (ss *sessions) get(id string) (*session, error) {
	sess, err := ss.reg.get(id)
	if err != nil {
		return nil, codedf(http.StatusNotFound, wire.CodeProcessNotFound, "session not found")
	}
	return sess, nil
}

func (ss *sessions) remove(id string) error {
	sess, ok := ss.reg.remove(id)
	if !ok {
		return codedf(http.StatusNotFound, wire.CodeProcessNotFound, "session not found")
	}
	sess.kill()
	return nil
}

func (ss *sessions) list() []wire.Session {
	all := ss.reg.values()
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	out := make([]wire.Session, 0, len(all))
	for _, s := range all {
		out = append(out, s.view())
	}
	return out
}

func (ss *sessions) closeAll() {
	// At once: each may wait out a hang-up's grace.
	var wg sync.WaitGroup
	for _, s := range ss.reg.close() {
		wg.Go(s.kill)
	}
	wg.Wait()
}

func startSession(id string, opts Options, all *sessions) (*session, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := shellCommand(opts.Shell)
	cmd.Dir, cmd.Env = opts.WorkDir, opts.env.environ()
	cmd.Stdout, cmd.Stderr = outW, errW
	setSession(cmd)
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	outW.Close()
	errW.Close()
	if err == nil {
		// Far shorter than a pipe holds: this write never blocks.
		_, err = io.WriteString(stdin, shellPrelude(opts.Shell))
		if err != nil {
			killSessionTree(cmd.Process.Pid)
			cmd.Wait()
		}
	}
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	s := &session{
		id: id, cmd: cmd, stdin: stdin, outR: outR, errR: errR,
		outSize: opts.MaxOutputBytes, all: all, clock: opts.Clock, grace: opts.OutputGrace,
		outEOF: make(chan struct{}), errEOF: make(chan struct{}),
		byID: map[string]*sessionCommand{},
		gone: make(chan struct{}),
	}
	go s.readStream(outR, true, s.outEOF)
	go s.readStream(errR, false, s.errEOF)
	go s.wait()
	return s, nil
}

// wait finishes every pending command when the shell exits (after `exit`,
// or when killed): their exit code is the shell's.
func (s *session) wait() {
	err := s.cmd.Wait()
	code := exitCode(s.cmd, err)
	s.mu.Lock()
	s.reaped = true
	s.mu.Unlock()
	// What the shell wrote before exiting may still sit in the pipes.
	t := s.clock.NewTimer(s.grace)
	defer t.Stop()
drain:
	for _, eof := range []chan struct{}{s.outEOF, s.errEOF} {
		select {
		case <-eof:
		case <-t.C():
			break drain
		}
	}
	s.mu.Lock()
	s.exited = true
	s.exitCode = code
	for _, c := range s.pending {
		s.finishLocked(c, code)
	}
	s.pending = nil
	s.mu.Unlock()
	close(s.gone)
}

// kill ends the shell and everything it started that is still in its
// terminal session or below it in the process tree, hanging it up first
// (see hangUp), and frees the session's logs and FIFOs.
func (s *session) kill() {
	s.mu.Lock()
	var tree []treeMember
	if !s.reaped {
		tree = sessionTree(s.cmd.Process.Pid)
	}
	s.mu.Unlock()
	hangUp(tree, s.stdin, s.gone, s.clock)
	s.mu.Lock()
	if !s.reaped {
		killSessionTree(s.cmd.Process.Pid)
	}
	s.mu.Unlock()
	signalMembers(tree, syscall.SIGKILL)
	s.stdin.Close()
	<-s.gone
	// Background jobs that left the group may hold the pipes; stop reading.
	s.outR.Close()
	s.errR.Close()
	// No command is pending once the shell is gone, so nothing writes to
	// the logs any more: their memory goes back to the budget.
	s.mu.Lock()
	for _, c := range s.commands {
		c.release()
	}
	s.removeInputDirLocked()
	s.mu.Unlock()
}

// execOptions are how a command runs in its session.
type execOptions struct {
	// async gives the command a FIFO for stdin, which sendInput writes to;
	// otherwise it reads /dev/null, so that it cannot wait for input that
	// nobody can send before the call returns.
	async bool
	// suppressEcho keeps input out of the command's stdout.
	suppressEcho bool
}

// exec sends one command to the shell (see evalLine), followed by the
// markers that end its output.
func (s *session) exec(text string, opts execOptions) (*sessionCommand, error) {
	budget := s.all.budget
	c := &sessionCommand{
		seq:    s.all.seq.Add(1),
		id:     newCommandID(),
		text:   text,
		done:   make(chan struct{}),
		stdout: cappedBuffer{limit: s.outSize, budget: budget},
		stderr: cappedBuffer{limit: s.outSize, budget: budget},
		output: cappedBuffer{limit: s.outSize, budget: budget},
		echo:   !opts.suppressEcho,
	}
	token := "__sandplane_cmd_end_" + randomHex(16)
	c.marker = []byte(token)

	// writeMu keeps the shell's input in the order of s.pending. s.mu is not
	// held while writing: the shell may be slow to read while its output,
	// which needs s.mu to be consumed, fills a pipe.
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.exited {
		s.mu.Unlock()
		return nil, codedf(http.StatusGone, wire.CodeSessionEnded, "session shell has exited with code %d", s.exitCode)
	}
	stdin := os.DevNull
	if opts.async {
		if err := s.openInputLocked(c); err != nil {
			s.mu.Unlock()
			return nil, errorf(http.StatusInternalServerError, "making the command's stdin: %v", err)
		}
		stdin = c.stdinPath
	}
	script := evalLine(text, stdin) +
		"printf '%s %d\\n' '" + token + "' \"$?\"\n" +
		"printf '%s\\n' '" + token + "' >&2\n"
	s.pending = append(s.pending, c)
	s.commands = append(s.commands, c)
	s.byID[c.id] = c
	s.forgetOldLocked()
	s.mu.Unlock()

	if _, err := io.WriteString(s.stdin, script); err != nil {
		s.mu.Lock()
		s.finishLocked(c, -1)
		for i, p := range s.pending {
			if p == c {
				s.pending = append(s.pending[:i], s.pending[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		return nil, codedf(http.StatusGone, wire.CodeSessionEnded, "session shell is gone: %v", err)
	}
	return c, nil
}

func (s *session) forgetOldLocked() {
	for len(s.commands) > maxSessionCommands {
		i := 0
		for i < len(s.commands) && s.commands[i].exit == nil {
			i++
		}
		if i == len(s.commands) {
			return
		}
		s.commands[i].release()
		delete(s.byID, s.commands[i].id)
		s.commands = append(s.commands[:i], s.commands[i+1:]...)
	}
}

func (s *session) command(id string) (*sessionCommand, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.byID[id]
	if !ok {
		return nil, codedf(http.StatusNotFound, wire.CodeProcessNotFound, "command not found")
	}
	return c, nil
}

func (s *session) view() wire.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := wire.Session{SessionID: s.id, Commands: make([]wire.SessionCommand, 0, len(s.commands))}
	for _, c := range s.commands {
		v.Commands = append(v.Commands, wire.SessionCommand{ID: c.id, Command: c.text, ExitCode: c.exit})
	}
	return v
}

// logSnapshot is a command's output at one moment: the bytes kept so far
// and, once the command has ended, the note of what was dropped. The slices
// stay valid after the session's lock is released, since buffers only ever
// append past them or are dropped whole.
type logSnapshot struct {
	output, stdout, stderr text
}

// logs are the command's output so far. The truncation note waits for the
// command's end: until then its count grows, and a client that follows a log
// by its length must only ever see it grow.
func (s *session) logs(c *sessionCommand) logSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.discarded {
		gone := text{[]byte(s.discardedNote())}
		return logSnapshot{output: gone, stdout: gone, stderr: gone}
	}
	snap := func(b *cappedBuffer) text {
		if c.exit == nil {
			return text{b.buf}
		}
		return text{b.buf, []byte(b.note())}
	}
	return logSnapshot{output: snap(&c.output), stdout: snap(&c.stdout), stderr: snap(&c.stderr)}
}

// discardedNote is what the logs of a command say once they were given up.
func (s *session) discardedNote() string {
	return fmt.Sprintf("[sandplane: the logs of this command were discarded to keep session logs within %d bytes]\n", s.all.budget.limit)
}

func (l logSnapshot) fields() []field {
	return []field{{"output", l.output}, {"stdout", l.stdout}, {"stderr", l.stderr}}
}

// readStream attributes one stream of the shell to the oldest command whose
// end marker it has not seen yet. Output with no command to own it
// (background jobs writing between commands) is dropped.
func (s *session) readStream(r *os.File, isStdout bool, eof chan struct{}) {
	defer close(eof)
	var pending []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			s.mu.Lock()
			pending = s.consumeLocked(pending, isStdout)
			s.mu.Unlock()
		}
		if err != nil {
			// No marker can follow: what is held back belongs to the
			// command the shell was running when it exited.
			s.mu.Lock()
			if c := s.currentLocked(isStdout); c != nil {
				s.writeLocked(c, pending, isStdout)
			}
			s.mu.Unlock()
			return
		}
	}
}

// consumeLocked moves what it can of pending into commands and returns what
// must wait for more input (a possible partial marker).
func (s *session) consumeLocked(pending []byte, isStdout bool) []byte {
	for {
		c := s.currentLocked(isStdout)
		if c == nil {
			return pending[:0]
		}
		i := bytes.Index(pending, c.marker)
		if i < 0 {
			keep := partialMarker(pending, c.marker)
			s.writeLocked(c, pending[:len(pending)-keep], isStdout)
			return append(pending[:0], pending[len(pending)-keep:]...)
		}
		s.writeLocked(c, pending[:i], isStdout)
		rest := pending[i+len(c.marker):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			// The marker line is incomplete; keep it for the next read.
			return append(pending[:0], pending[i:]...)
		}
		if isStdout {
			code, err := strconv.Atoi(strings.TrimSpace(string(rest[:nl])))
			if err != nil {
				code = -1
			}
			c.outDone = true
			c.code = code
		} else {
			c.errDone = true
		}
		if c.outDone && c.errDone {
			s.finishLocked(c, c.code)
			s.pending = s.pending[1:]
		}
		pending = rest[nl+1:]
	}
}

// partialMarker returns the length of the longest tail of p that could be the
// start of marker; only that much output is held back.
func partialMarker(p, marker []byte) int {
	for k := min(len(marker)-1, len(p)); k > 0; k-- {
		if bytes.Equal(p[len(p)-k:], marker[:k]) {
			return k
		}
	}
	return 0
}

func (s *session) currentLocked(isStdout bool) *sessionCommand {
	for _, c := range s.pending {
		if isStdout && !c.outDone || !isStdout && !c.errDone {
			return c
		}
	}
	return nil
}

func (s *session) finishLocked(c *sessionCommand, code int) {
	select {
	case <-c.done:
		return
	default:
	}
	c.exit = &code
	close(c.done)
	c.closeInput()
	c.notify()
}

// notify wakes the command's followers.
func (c *sessionCommand) notify() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// writeLocked adds output of c. When the toolbox's session logs are at
// their limit, the logs of the oldest finished commands are given up first,
// so that the newest output is what is kept.
func (s *session) writeLocked(c *sessionCommand, p []byte, isStdout bool) {
	if len(p) == 0 {
		return
	}
	stream := &c.stderr
	if isStdout {
		stream = &c.stdout
	}
	if need := stream.need(len(p)) + c.output.need(len(p)); need > 0 && s.all.budget.free() < need {
		s.all.reclaim(s, need)
	}
	start := len(stream.buf)
	stream.Write(p)
	c.output.Write(p)
	if len(stream.buf) > start {
		c.noteRun(isStdout, start)
	}
	c.notify()
}

// reclaim discards the logs of finished commands, oldest first across all
// sessions, until need bytes are free or none is left. The caller holds
// self.mu. Other sessions are only tried, never waited for: one that is
// busy keeps its logs this time, and no two sessions can deadlock.
func (ss *sessions) reclaim(self *session, need int64) {
	others := slices.DeleteFunc(ss.reg.values(), func(o *session) bool { return o == self })
	locked := []*session{self}
	for _, o := range others {
		if o.mu.TryLock() {
			locked = append(locked, o)
		}
	}
	defer func() {
		for _, o := range locked[1:] {
			o.mu.Unlock()
		}
	}()
	var done []*sessionCommand
	for _, o := range locked {
		for _, c := range o.commands {
			if c.exit != nil && !c.discarded {
				done = append(done, c)
			}
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].seq < done[j].seq })
	for _, c := range done {
		if ss.budget.free() >= need {
			return
		}
		c.release()
		c.discarded = true
	}
}

// release gives the command's log memory back to the budget.
func (c *sessionCommand) release() {
	c.stdout.release()
	c.stderr.release()
	c.output.release()
	c.runs = nil
}

func newCommandID() string {
	b := []byte(randomHex(16))
	return fmt.Sprintf("%s-%s-%s-%s-%s", b[0:8], b[8:12], b[12:16], b[16:20], b[20:32])
}
