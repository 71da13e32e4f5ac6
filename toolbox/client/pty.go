package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	// ptyExitControl is the subprotocol that makes the toolbox report a
	// terminal's exit in a control message before it closes.
	ptyExitControl = "X-Daytona-Pty-Exit-Control"
	// maxHiddenPrelude bounds what RunTerminal holds back before its
	// command starts (the shell's greeting, prompt and echo); past it the
	// bytes go out as they are.
	maxHiddenPrelude = 256 << 10
)

// Terminal is the local end of RunTerminal.
type Terminal struct {
	// Cols and Rows are the terminal's size; 0 takes the toolbox's default.
	Cols, Rows int
	// Env is added to the remote shell's environment (TERM, typically).
	Env map[string]string
	// Stdin is what is typed. RunTerminal may return while a Read of it is
	// still blocked, which the caller ends by closing it or by exiting.
	Stdin io.Reader
	// Stdout receives what the terminal shows.
	Stdout io.Writer
	// Resize delivers new sizes, {cols, rows}, while the command runs.
	Resize <-chan [2]int
}

// RunTerminal runs command (a shell command line that replaces the shell,
// `exec ...`) on a pseudo-terminal of the sandbox (the toolbox's
// /process/pty), with t's input and output, and returns its exit code once
// it ends. What the shell prints before the command starts is hidden. When
// ctx ends first, the terminal is deleted, which kills the command.
func (c *Client) RunTerminal(ctx context.Context, command string, t Terminal) (int, error) {
	id := "sandplane-exec-" + randomHex(8)
	req := wire.PtyCreateRequest{ID: id, Envs: t.Env, LazyStart: true}
	if t.Cols > 0 && t.Rows > 0 {
		req.Cols, req.Rows = &t.Cols, &t.Rows
	}
	if err := c.do(ctx, http.MethodPost, "/process/pty", req, nil); err != nil {
		return -1, err
	}
	defer func() {
		cctx, cancel := c.detached(ctx, cleanupTimeout)
		defer cancel()
		_ = c.do(cctx, http.MethodDelete, "/process/pty/"+url.PathEscape(id), nil, nil)
	}()
	conn, err := c.dialPty(ctx, id)
	if err != nil {
		return -1, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxFollowMessage)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	marker := "__sandplane_exec_" + randomHex(8)
	// The marker is printed in two halves, so that the shell's echo of
	// this line never contains it whole.
	half := len(marker) / 2
	line := "printf '%s%s\\n' '" + marker[:half] + "' '" + marker[half:] + "'; " + command + "\n"
	if err := conn.Write(ctx, websocket.MessageBinary, []byte(line)); err != nil {
		return -1, provider.Errorf(provider.Unavailable, "toolbox at %s: writing to the terminal: %v", c.base, err)
	}
	go c.typeInto(ctx, conn, t.Stdin)
	go c.resizeOn(ctx, id, t.Resize)
	return c.showTerminal(ctx, conn, &prelude{marker: []byte(marker), w: t.Stdout})
}

func (c *Client) dialPty(ctx context.Context, id string) (*websocket.Conn, error) {
	path := "/process/pty/" + url.PathEscape(id) + "/connect"
	u, err := url.Parse(c.base + path)
	if err != nil {
		return nil, provider.Errorf(provider.InvalidArgument, "toolbox terminal: %v", err)
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient: c.hc, HTTPHeader: c.header, Subprotocols: []string{ptyExitControl},
	})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			return nil, c.fail(http.MethodGet, path, resp)
		}
		return nil, provider.Errorf(provider.Unavailable, "toolbox at %s: connecting to the terminal: %v", c.base, err)
	}
	return conn, nil
}

// typeInto sends what is typed until stdin ends or ctx does.
func (c *Client) typeInto(ctx context.Context, conn *websocket.Conn, stdin io.Reader) {
	if stdin == nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := stdin.Read(buf)
		if n > 0 && conn.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
			return
		}
		if err != nil || ctx.Err() != nil {
			return
		}
	}
}

// resizeOn passes size changes on to the remote terminal.
func (c *Client) resizeOn(ctx context.Context, id string, sizes <-chan [2]int) {
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-sizes:
			if !ok {
				return
			}
			cols, rows := sz[0], sz[1]
			// A failed resize leaves the old size; the command goes on.
			_ = c.do(ctx, http.MethodPost, "/process/pty/"+url.PathEscape(id)+"/resize", wire.PtyResizeRequest{Cols: &cols, Rows: &rows}, nil)
		}
	}
}

// ptyControl is a text message of the terminal's WebSocket.
type ptyControl struct {
	Type       string `json:"type"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exitCode"`
	ExitReason string `json:"exitReason"`
	Error      string `json:"error"`
}

// showTerminal copies the terminal's output until it exits, and returns
// the exit code.
func (c *Client) showTerminal(ctx context.Context, conn *websocket.Conn, out *prelude) (int, error) {
	exit := -1
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			switch {
			case errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure:
				if exit < 0 {
					exit = closeExitCode(ce.Reason)
				}
				return exit, out.flush()
			case errors.As(err, &ce):
				return -1, provider.Errorf(provider.Unavailable, "toolbox at %s: the terminal closed: %s", c.base, ce.Reason)
			case ctx.Err() != nil:
				return -1, ctx.Err()
			}
			return -1, provider.Errorf(provider.Unavailable, "toolbox at %s: the terminal's connection broke: %v", c.base, err)
		}
		if typ == websocket.MessageBinary {
			if _, err := out.Write(msg); err != nil {
				return -1, provider.Errorf(provider.Internal, "writing the terminal's output: %w", err)
			}
			continue
		}
		var ctl ptyControl
		if json.Unmarshal(msg, &ctl) != nil || ctl.Type != "control" {
			continue
		}
		switch ctl.Status {
		case "exited":
			if ctl.ExitCode != nil {
				exit = *ctl.ExitCode
			}
		case "error":
			return -1, provider.Errorf(provider.Unavailable, "toolbox at %s: the terminal failed: %s", c.base, ctl.Error)
		}
	}
}

// closeExitCode reads the exit code from a close reason
// {"exitCode":N,...}; -1 when it holds none.
func closeExitCode(reason string) int {
	var r struct {
		ExitCode *int `json:"exitCode"`
	}
	if json.Unmarshal([]byte(reason), &r) != nil || r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// prelude hides what a terminal shows before marker (the shell's greeting,
// its prompt, the echo of the command line) and the line marker ends, then
// lets everything through.
type prelude struct {
	marker []byte
	w      io.Writer
	held   []byte
	passed bool
}

func (p *prelude) Write(b []byte) (int, error) {
	if p.passed {
		return p.w.Write(b)
	}
	p.held = append(p.held, b...)
	i := bytes.Index(p.held, p.marker)
	if i < 0 {
		if len(p.held) > maxHiddenPrelude {
			return len(b), p.flush()
		}
		return len(b), nil
	}
	rest := p.held[i+len(p.marker):]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return len(b), nil // the end of the marker's line is still to come
	}
	p.passed = true
	rest = rest[nl+1:]
	p.held = nil
	if len(rest) == 0 {
		return len(b), nil
	}
	_, err := p.w.Write(rest)
	return len(b), err
}

// flush lets what is held through, for a terminal that ended, or said too
// much, before its command started.
func (p *prelude) flush() error {
	p.passed = true
	held := p.held
	p.held = nil
	if len(held) == 0 {
		return nil
	}
	_, err := p.w.Write(held)
	return err
}
