package toolbox

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// longAgo is a deadline that has passed: setting it interrupts a write
// blocked on a full FIFO.
var longAgo = time.Unix(1, 0)

// openInputLocked gives c a FIFO of its own as stdin, in a directory only
// the toolbox's user can enter. The toolbox holds it open for reading and
// writing, which never blocks and never fails for want of a reader: input
// sent before the command opens it waits in the pipe. Once the command
// ends the toolbox closes its end, and whatever the command left running
// reads end of file.
func (s *session) openInputLocked(c *sessionCommand) error {
	if s.inputDir == "" {
		dir, err := os.MkdirTemp("", "sandplane-session-")
		if err != nil {
			return err
		}
		s.inputDir = dir
	}
	path := filepath.Join(s.inputDir, c.id)
	if err := mkfifo(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		os.Remove(path)
		return err
	}
	c.stdin, c.stdinPath = f, path
	return nil
}

// closeInput ends the command's stdin. The caller holds the session's lock.
func (c *sessionCommand) closeInput() {
	if c.stdin == nil {
		return
	}
	c.stdin.Close()
	os.Remove(c.stdinPath)
	c.stdin = nil
}

func (s *session) removeInputDirLocked() {
	if s.inputDir != "" {
		os.RemoveAll(s.inputDir)
		s.inputDir = ""
	}
}

// sendInput writes data to the stdin of the running command c, and echoes
// it into the command's stdout first, as a terminal shows what is typed
// before the program answers it. A command that does not read blocks the
// write once the pipe is full; ctx ending (the client leaving) gives up.
// Errors: 410 COMMAND_ALREADY_COMPLETED when c has ended, before or during
// the write (SDK 0.218 raises DaytonaCommandAlreadyCompletedError for it);
// 409 when c reads no input because it was run sync.
func (s *session) sendInput(ctx context.Context, c *sessionCommand, data string) error {
	c.inputMu.Lock()
	defer c.inputMu.Unlock()
	s.mu.Lock()
	in, ended := c.stdin, c.exit != nil
	if !ended && in != nil && c.echo {
		s.writeLocked(c, []byte(data), true)
	}
	s.mu.Unlock()
	switch {
	case ended:
		return commandCompleted("command has already ended: input goes to a running command")
	case in == nil:
		return errorf(http.StatusConflict, "command reads no input: only a command run with runAsync takes input")
	}
	in.SetWriteDeadline(time.Time{}) // cleared after an earlier interrupted write
	stop := context.AfterFunc(ctx, func() { in.SetWriteDeadline(longAgo) })
	defer stop()
	if _, err := io.WriteString(in, data); err != nil {
		switch {
		case ctx.Err() != nil:
			return errorf(http.StatusRequestTimeout, "input interrupted: the command did not read it")
		case errors.Is(err, os.ErrClosed):
			return commandCompleted("command has ended before it read all input")
		}
		return errorf(http.StatusInternalServerError, "writing input: %v", err)
	}
	return nil
}

// commandCompleted is the daemon's answer to input for a command that has
// finished: gone, with the domain code the SDKs map to a class of its own.
func commandCompleted(msg string) error {
	return codedf(http.StatusGone, wire.CodeCommandAlreadyCompleted, "%s", msg)
}
