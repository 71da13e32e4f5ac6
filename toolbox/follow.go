package toolbox

import (
	"math"
	"net/http"

	"github.com/coder/websocket"
)

// The SDKs demultiplex a followed log by these 3-byte markers: each one
// says that the bytes after it, up to the next marker, are of that stream.
var (
	stdoutMarker = []byte{0x01, 0x01, 0x01}
	stderrMarker = []byte{0x02, 0x02, 0x02}
)

const (
	// followChunk bounds the payload of one message. The TypeScript SDK
	// spreads every message into an array's push(), which overflows the
	// JavaScript stack for a large one.
	followChunk = 16 << 10
	// maxRuns bounds the stream switches a command records. Past it, a
	// follower sends what each wake-up brings, stdout first.
	maxRuns = 1024
)

// A streamRun is output of one stream, from offset at of that stream's
// log to where the next run of the same stream begins. Runs alternate.
type streamRun struct {
	stdout bool
	at     int
}

// noteRun records that kept output of a stream starts at at, when the
// other stream wrote last.
func (c *sessionCommand) noteRun(stdout bool, at int) {
	if n := len(c.runs); n < maxRuns && (n == 0 || c.runs[n-1].stdout != stdout) {
		c.runs = append(c.runs, streamRun{stdout: stdout, at: at})
	}
}

// followPos is how far a follower has sent each stream, and the first
// run that may still grow.
type followPos struct{ out, err, run int }

// followPiece is bytes of one stream.
type followPiece struct {
	stdout bool
	data   []byte
}

// followStep is what a follower sends next: the output since its last
// step in arrival order, and once the command has ended, the truncation
// notes. wake is closed on the next change while the command runs.
type followStep struct {
	pieces []followPiece
	ended  bool
	wake   <-chan struct{}
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
		st.pieces = []followPiece{{true, []byte(s.discardedNote())}}
		return st
	}
	take := func(stdout bool, end int) {
		buf, p := c.stderr.buf, &pos.err
		if stdout {
			buf, p = c.stdout.buf, &pos.out
		}
		end = min(end, len(buf))
		if *p < end {
			st.pieces = append(st.pieces, followPiece{stdout, buf[*p:end]})
			*p = end
		}
	}
	for i := pos.run; i < len(c.runs); i++ {
		end := math.MaxInt // the run is the stream's last so far
		if i+2 < len(c.runs) {
			end = c.runs[i+2].at
		}
		take(c.runs[i].stdout, end)
	}
	pos.run = max(pos.run, len(c.runs)-2)
	// Past maxRuns, or before any run: whatever is left.
	take(true, len(c.stdout.buf))
	take(false, len(c.stderr.buf))
	if c.exit != nil {
		st.ended = true
		st.pieces = append(st.pieces,
			followPiece{true, []byte(c.stdout.note())},
			followPiece{false, []byte(c.stderr.note())})
		return st
	}
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	st.wake = c.changed
	return st
}

// followLogs streams the command's output over a WebSocket as it is
// produced, the way Daytona's daemon answers logs?follow=true: binary
// messages of a stream marker and that stream's bytes, in the order they
// reached the toolbox (stdout and stderr are two pipes, so output written
// to both at nearly the same time may swap, as on Daytona). It starts with what the logs already hold and closes
// normally once the command has ended and everything is sent; output past
// the log's limit is not sent, the truncation note is.
func (s *server) followLogs(w http.ResponseWriter, r *http.Request, sess *session, c *sessionCommand) {
	conn, err := acceptWebSocket(w, r)
	if err != nil {
		return // Accept has answered
	}
	defer conn.CloseNow()
	// The client sends nothing; reading handles its pings and its close.
	ctx := conn.CloseRead(r.Context())
	msg := make([]byte, 0, len(stdoutMarker)+followChunk)
	send := func(piece followPiece) error {
		marker := stderrMarker
		if piece.stdout {
			marker = stdoutMarker
		}
		for p := piece.data; len(p) > 0; {
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
		for _, piece := range st.pieces {
			if send(piece) != nil {
				return
			}
		}
		if st.ended {
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
