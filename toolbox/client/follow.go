package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/toolbox/wire"
)

// maxFollowMessage bounds one message of a followed log.
const maxFollowMessage = 64 << 20

// SendInput writes data to the stdin of a command started with ExecAsync.
// not_found: no such session or command; failed_precondition: the command
// has ended or reads no input.
func (c *Client) SendInput(ctx context.Context, sessionID, cmdID, data string) error {
	return c.do(ctx, http.MethodPost, commandPath(sessionID, cmdID)+"/input", wire.SessionSendInputRequest{Data: &data}, nil)
}

// Entrypoint returns the sandbox's entrypoint session. not_found: the
// sandbox has none.
func (c *Client) Entrypoint(ctx context.Context) (wire.Session, error) {
	var out wire.Session
	err := c.do(ctx, http.MethodGet, "/process/session/entrypoint", nil, &out)
	return out, err
}

// Follow copies the command's output to stdout and stderr as it is
// produced, from its beginning, and returns once the command has ended and
// everything is written. It uses the logs' WebSocket (follow=true), as the
// SDKs' log callbacks do. Errors: not_found, unavailable (the connection
// broke before the end), and ctx's error.
func (c *Client) Follow(ctx context.Context, sessionID, cmdID string, stdout, stderr io.Writer) error {
	return c.follow(ctx, commandPath(sessionID, cmdID)+"/logs", stdout, stderr)
}

// FollowEntrypoint is Follow for the entrypoint session's command.
func (c *Client) FollowEntrypoint(ctx context.Context, stdout, stderr io.Writer) error {
	return c.follow(ctx, "/process/session/entrypoint/logs", stdout, stderr)
}

func (c *Client) follow(ctx context.Context, path string, stdout, stderr io.Writer) error {
	conn, err := c.dialLogs(ctx, path)
	if err != nil {
		return err
	}
	return c.copyLogs(ctx, conn, path, &demux{stdout: stdout, stderr: stderr})
}

// dialLogs opens the WebSocket that follows the logs at path.
func (c *Client) dialLogs(ctx context.Context, path string) (*websocket.Conn, error) {
	u, err := url.Parse(c.base + path + "?follow=true")
	if err != nil {
		return nil, provider.Errorf(provider.InvalidArgument, "toolbox follow: %v", err)
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: c.header})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if resp != nil && resp.StatusCode >= 300 {
			return nil, c.fail(http.MethodGet, path, resp)
		}
		return nil, provider.Errorf(provider.Unavailable, "toolbox at %s: following %s: %v", c.base, path, err)
	}
	return conn, nil
}

// copyLogs demultiplexes the followed logs on conn with d until the
// toolbox closes it, and closes it.
func (c *Client) copyLogs(ctx context.Context, conn *websocket.Conn, path string, d *demux) error {
	defer conn.CloseNow()
	conn.SetReadLimit(maxFollowMessage)
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return d.flush()
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return provider.Errorf(provider.Unavailable, "toolbox at %s: following %s ended before the command did: %v", c.base, path, err)
		}
		if err := d.write(msg); err != nil {
			return err
		}
	}
}

// The 3-byte markers of a followed log: the bytes after one, up to the
// next, are of that stream.
var (
	stdoutMarker = []byte{0x01, 0x01, 0x01}
	stderrMarker = []byte{0x02, 0x02, 0x02}
)

// demux splits a followed log into its streams. A marker may be split
// across messages, so a tail that could start one waits for the next.
type demux struct {
	stdout, stderr io.Writer
	// skipOut and skipErr are how many bytes of each stream are dropped
	// first: they were written already, from the logs' JSON.
	skipOut, skipErr int
	current          int // 0 until the first marker (bytes before it are dropped), then 1 (stdout) or 2 (stderr)
	pending          []byte
}

func (d *demux) write(p []byte) error {
	d.pending = append(d.pending, p...)
	for {
		i, marker := nextMarker(d.pending)
		if i < 0 {
			keep := markerPrefix(d.pending)
			err := d.emit(d.pending[:len(d.pending)-keep])
			d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
			return err
		}
		if err := d.emit(d.pending[:i]); err != nil {
			return err
		}
		d.current = 2
		if bytes.Equal(marker, stdoutMarker) {
			d.current = 1
		}
		d.pending = d.pending[i+len(marker):]
	}
}

func (d *demux) emit(p []byte) error {
	w, skip := d.stdout, &d.skipOut
	switch d.current {
	case 0:
		return nil
	case 2:
		w, skip = d.stderr, &d.skipErr
	}
	n := min(len(p), *skip)
	*skip -= n
	if p = p[n:]; len(p) == 0 || w == nil {
		return nil
	}
	if _, err := w.Write(p); err != nil {
		return provider.Errorf(provider.Internal, "writing followed output: %w", err)
	}
	return nil
}

// flush writes what was held back for a marker that never came.
func (d *demux) flush() error {
	err := d.emit(d.pending)
	d.pending = nil
	return err
}

// nextMarker finds the earliest marker in p.
func nextMarker(p []byte) (int, []byte) {
	o, e := bytes.Index(p, stdoutMarker), bytes.Index(p, stderrMarker)
	switch {
	case o >= 0 && (e < 0 || o < e):
		return o, stdoutMarker
	case e >= 0:
		return e, stderrMarker
	}
	return -1, nil
}

// markerPrefix is the length of the longest tail of p that begins a
// marker.
func markerPrefix(p []byte) int {
	for k := min(len(stdoutMarker)-1, len(p)); k > 0; k-- {
		tail := p[len(p)-k:]
		if bytes.Equal(tail, stdoutMarker[:k]) || bytes.Equal(tail, stderrMarker[:k]) {
			return k
		}
	}
	return 0
}
