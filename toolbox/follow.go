package toolbox

import (
	"net/http"

	"github.com/coder/websocket"
)

// The SDKs demultiplex a followed log by these 3-byte markers: each one
// says that the bytes after it, up to the next marker, are of that stream.
var (
	stdoutMarker = []byte{0x01, 0x01, 0x01}
	stderrMarker = []byte{0x02, 0x02, 0x02}
)

// followChunk bounds the payload of one message. The TypeScript SDK
// spreads every message into an array's push(), which overflows the
// JavaScript stack for a large one.
const followChunk = 16 << 10

// followPos is how far a follower has sent each stream.
type followPos struct{ out, err int }

// followStep is what a follower sends next: the bytes each stream gained
// since pos, and once the command has ended, the truncation notes. wake
// is closed on the next change while the command runs.
type followStep struct {
	out, err         []byte
	outNote, errNote string
	ended            bool
	wake             <-chan struct{}
}

// follow advances pos over the command's logs. The returned slices stay
// valid after the lock is released: buffers only ever append past them or
// are dropped whole.
func (s *session) follow(c *sessionCommand, pos *followPos) followStep {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st followStep
	if c.discarded {
		st.ended = true
		st.outNote = s.discardedNote()
		return st
	}
	st.out, pos.out = past(c.stdout.buf, pos.out)
	st.err, pos.err = past(c.stderr.buf, pos.err)
	if c.exit != nil {
		st.ended = true
		st.outNote, st.errNote = c.stdout.note(), c.stderr.note()
		return st
	}
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	st.wake = c.changed
	return st
}

// past is b past from, and the new position.
func past(b []byte, from int) ([]byte, int) {
	if from >= len(b) {
		return nil, from
	}
	return b[from:], len(b)
}

// followLogs streams the command's output over a WebSocket as it is
// produced, the way Daytona's daemon answers logs?follow=true: binary
// messages of a stream marker and that stream's bytes. It starts with
// what the logs already hold and closes normally once the command has
// ended and everything is sent. Within one wake-up stdout is sent before
// stderr, so the two keep their order only as closely as the follower
// keeps up (Daytona's two output labelers give no stronger promise).
func (s *server) followLogs(w http.ResponseWriter, r *http.Request, sess *session, c *sessionCommand) {
	conn, err := acceptWebSocket(w, r)
	if err != nil {
		return // Accept has answered
	}
	defer conn.CloseNow()
	// The client sends nothing; reading handles its pings and its close.
	ctx := conn.CloseRead(r.Context())
	msg := make([]byte, 0, len(stdoutMarker)+followChunk)
	send := func(marker, p []byte) error {
		for len(p) > 0 {
			n := min(len(p), followChunk)
			msg = append(append(msg[:0], marker...), p[:n]...)
			if err := conn.Write(ctx, websocket.MessageBinary, msg); err != nil {
				return err
			}
			p = p[n:]
		}
		return nil
	}
	var pos followPos
	for {
		st := sess.follow(c, &pos)
		if send(stdoutMarker, st.out) != nil || send(stderrMarker, st.err) != nil {
			return
		}
		if st.ended {
			if send(stdoutMarker, []byte(st.outNote)) != nil || send(stderrMarker, []byte(st.errNote)) != nil {
				return
			}
			conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-st.wake:
		case <-ctx.Done():
			return
		}
	}
}
