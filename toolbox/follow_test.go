package toolbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// follower is a test client of logs?follow=true. It keeps every message
// as received, and checks each against the framing the SDKs demultiplex:
// a binary message, a 3-byte stream marker, that stream's bytes.
type follower struct {
	t    *testing.T
	conn *websocket.Conn
	mu   sync.Mutex
	raw  [][]byte // every message's bytes, as sent
	msgs []followed
	done chan struct{}
	err  error
}

type followed struct {
	stream string // "stdout" or "stderr"
	data   string
}

func (ts *testServer) follow(t *testing.T, path string) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.url, "http")+path+"?follow=true",
		&websocket.DialOptions{HTTPHeader: http.Header{TokenHeader: {testToken}}})
	require.NoError(t, err)
	if resp.Body != nil {
		resp.Body.Close()
	}
	conn.SetReadLimit(64 << 20)
	f := &follower{t: t, conn: conn, done: make(chan struct{})}
	go f.read()
	t.Cleanup(func() { conn.CloseNow(); <-f.done })
	return f
}

func (f *follower) read() {
	defer close(f.done)
	for {
		typ, b, err := f.conn.Read(context.Background())
		f.mu.Lock()
		if err != nil {
			f.err = err
			f.mu.Unlock()
			return
		}
		f.raw = append(f.raw, b)
		msg := followed{data: "<bad frame>"}
		switch {
		case typ != websocket.MessageBinary:
			msg.data = "<text message>"
		case len(b) > 3 && bytes.Equal(b[:3], []byte{1, 1, 1}):
			msg = followed{"stdout", string(b[3:])}
		case len(b) > 3 && bytes.Equal(b[:3], []byte{2, 2, 2}):
			msg = followed{"stderr", string(b[3:])}
		}
		f.msgs = append(f.msgs, msg)
		f.mu.Unlock()
	}
}

// streams joins consecutive messages of one stream: how much output one
// message carries depends on how the pipe's reads fell.
func (f *follower) streams() []followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []followed
	for _, m := range f.msgs {
		if n := len(out); n > 0 && out[n-1].stream == m.stream {
			out[n-1].data += m.data
			continue
		}
		out = append(out, m)
	}
	return out
}

func (f *follower) stream(name string) string {
	var b strings.Builder
	for _, m := range f.streams() {
		if m.stream == name {
			b.WriteString(m.data)
		}
	}
	return b.String()
}

func (f *follower) waitStdout(substr string) {
	f.t.Helper()
	waitFor(f.t, "followed stdout "+substr, func() bool { return strings.Contains(f.stream("stdout"), substr) })
}

// closed waits for the server's close and returns its status.
func (f *follower) closed() websocket.StatusCode {
	f.t.Helper()
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		f.t.Fatal("the server did not close the follow connection")
	}
	var ce websocket.CloseError
	require.True(f.t, errors.As(f.err, &ce), "closed with %v", f.err)
	return ce.Code
}

func TestFollowCommandLogs(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "f"}).status)

	t.Run("output arrives as it is produced, the socket closes at the end", func(t *testing.T) {
		id := ts.execAsync(t, "f", wire.SessionExecuteRequest{Command: `echo first; read -r line; echo "second $line" >&2; read -r more; printf 'третий'`, SuppressInputEcho: true})
		f := ts.follow(t, "/process/session/f/command/"+id+"/logs")
		// The command waits for input: what arrives now was streamed live.
		f.waitStdout("first\n")
		f.mu.Lock()
		assert.Equal(t, []byte("\x01\x01\x01first\n"), f.raw[0], "the exact bytes the SDKs demultiplex")
		f.mu.Unlock()
		select {
		case <-f.done:
			t.Fatal("the follow ended while the command still runs")
		default:
		}
		require.Equal(t, http.StatusNoContent, ts.sendInput(t, "f", id, wire.SessionSendInputRequest{Data: ref("go\n")}).status)
		waitFor(t, "followed stderr", func() bool { return f.stream("stderr") == "second go\n" })
		require.Equal(t, http.StatusNoContent, ts.sendInput(t, "f", id, wire.SessionSendInputRequest{Data: ref("\n")}).status)
		assert.Equal(t, websocket.StatusNormalClosure, f.closed())
		assert.Equal(t, []followed{
			{"stdout", "first\n"},
			{"stderr", "second go\n"},
			{"stdout", "третий"},
		}, f.streams())
	})

	t.Run("an ended command's logs, then close", func(t *testing.T) {
		resp, out := ts.sessionExec(t, "f", wire.SessionExecuteRequest{Command: "echo out; echo err >&2"})
		require.Equal(t, http.StatusOK, resp.status)
		f := ts.follow(t, "/process/session/f/command/"+out.CmdID+"/logs")
		assert.Equal(t, websocket.StatusNormalClosure, f.closed())
		assert.Equal(t, "out\n", f.stream("stdout"))
		assert.Equal(t, "err\n", f.stream("stderr"))
	})

	t.Run("a deleted session ends the follow", func(t *testing.T) {
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "doomed"}).status)
		id := ts.execAsync(t, "doomed", wire.SessionExecuteRequest{Command: "echo up; sleep 300"})
		f := ts.follow(t, "/process/session/doomed/command/"+id+"/logs")
		f.waitStdout("up\n")
		require.Equal(t, http.StatusNoContent, ts.do(t, http.MethodDelete, "/process/session/doomed", nil, "").status)
		assert.Equal(t, websocket.StatusNormalClosure, f.closed())
	})

	t.Run("follow needs a WebSocket", func(t *testing.T) {
		id := ts.execAsync(t, "f", wire.SessionExecuteRequest{Command: "true"})
		for _, q := range []string{"?follow=true", "?follow=maybe"} {
			resp := ts.get(t, "/process/session/f/command/"+id+"/logs"+q)
			require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", q, resp.body)
			resp.apiErr(t)
		}
		// follow=false is a plain read.
		require.Equal(t, http.StatusOK, ts.get(t, "/process/session/f/command/"+id+"/logs?follow=false").status)
	})

	t.Run("follow is guarded like every route", func(t *testing.T) {
		id := ts.execAsync(t, "f", wire.SessionExecuteRequest{Command: "true"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.url, "http")+"/process/session/f/command/"+id+"/logs?follow=true", nil)
		require.Error(t, err)
		require.NotNil(t, resp)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
}

func TestFollowLargeAndTruncatedOutput(t *testing.T) {
	ts := newTestServer(t, Options{MaxOutputBytes: 100 << 10})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "big"}).status)
	id := ts.execAsync(t, "big", wire.SessionExecuteRequest{Command: "head -c 150000 /dev/zero | tr '\\000' a"})
	f := ts.follow(t, "/process/session/big/command/"+id+"/logs")
	assert.Equal(t, websocket.StatusNormalClosure, f.closed())

	out := f.stream("stdout")
	assert.Equal(t, strings.Repeat("a", 100<<10)+"\n[sandplane: output truncated, 47600 more bytes dropped]\n", out)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.msgs {
		assert.LessOrEqual(t, len(m.data), followChunk, "one message stays small enough for the TypeScript SDK's demultiplexer")
	}
}

func TestCommandLogsAsPlainTextForOldSDKs(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "old"}).status)
	_, out := ts.sessionExec(t, "old", wire.SessionExecuteRequest{Command: "echo out; echo err >&2"})
	path := "/process/session/old/command/" + out.CmdID + "/logs"

	for _, tt := range []struct {
		version   string
		wantPlain bool
	}{
		{"0.166.9", true},
		{"v0.100.0", true},
		{"0.167.0", false},
		{"0.218.0-rc.1", false},
		{"", false},
		{"dev", false},
	} {
		t.Run("version "+tt.version, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, ts.url+path, nil)
			require.NoError(t, err)
			ts.authorize(req, "")
			if tt.version != "" {
				req.Header.Set(sdkVersionHeader, tt.version)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var body bytes.Buffer
			_, err = body.ReadFrom(resp.Body)
			require.NoError(t, err)
			if tt.wantPlain {
				assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
				assert.ElementsMatch(t, []byte("out\nerr\n"), body.Bytes())
				return
			}
			assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
			assert.Contains(t, body.String(), `"stdout":"out\n"`)
		})
	}
}

// TestFollowKeepsArrivalOrder drives one command's logs directly: the
// follower sends each stream's output in the order it arrived, whether it
// keeps up or falls behind, and past maxRuns it still sends everything.
func TestFollowKeepsArrivalOrder(t *testing.T) {
	newCmd := func() (*session, *sessionCommand) {
		all := &sessions{budget: &logBudget{limit: 1 << 20}, reg: newRegistry[string, *session]()}
		s := &session{all: all}
		c := &sessionCommand{
			stdout: cappedBuffer{limit: 1 << 16, budget: all.budget},
			stderr: cappedBuffer{limit: 1 << 16, budget: all.budget},
			output: cappedBuffer{limit: 1 << 16, budget: all.budget},
		}
		return s, c
	}
	write := func(s *session, c *sessionCommand, stdout bool, data string) {
		s.mu.Lock()
		s.writeLocked(c, []byte(data), stdout)
		s.mu.Unlock()
	}
	render := func(st followStep) string {
		var b strings.Builder
		for _, p := range st.pieces {
			if p.stdout {
				b.WriteString("O:")
			} else {
				b.WriteString("E:")
			}
			b.Write(p.data)
			b.WriteString(" ")
		}
		return b.String()
	}

	t.Run("a follower that fell behind", func(t *testing.T) {
		s, c := newCmd()
		for _, w := range []struct {
			stdout bool
			data   string
		}{{true, "a"}, {true, "b"}, {false, "1"}, {true, "c"}, {false, "2"}, {false, "3"}} {
			write(s, c, w.stdout, w.data)
		}
		var pos followPos
		assert.Equal(t, "O:ab E:1 O:c E:23 ", render(s.follow(c, &pos)))
		assert.Empty(t, render(s.follow(c, &pos)), "nothing is sent twice")
		write(s, c, false, "4")
		write(s, c, true, "d")
		assert.Equal(t, "E:4 O:d ", render(s.follow(c, &pos)))
	})

	t.Run("a follower that keeps up", func(t *testing.T) {
		s, c := newCmd()
		var pos followPos
		var got strings.Builder
		for i := range 6 {
			write(s, c, i%3 != 2, fmt.Sprint(i))
			got.WriteString(render(s.follow(c, &pos)))
		}
		assert.Equal(t, "O:0 O:1 E:2 O:3 O:4 E:5 ", got.String())
	})

	t.Run("past maxRuns", func(t *testing.T) {
		s, c := newCmd()
		var want strings.Builder
		for i := range maxRuns + 10 {
			write(s, c, i%2 == 0, "x")
			want.WriteString("x")
		}
		var pos followPos
		st := s.follow(c, &pos)
		var got strings.Builder
		for _, p := range st.pieces {
			got.Write(p.data)
		}
		assert.Equal(t, want.String(), got.String())
		assert.Len(t, c.runs, maxRuns)
	})
}
