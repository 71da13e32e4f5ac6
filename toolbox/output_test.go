package toolbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestWriteTextEqualsEncodingTheWhole(t *testing.T) {
	euro := "\u20ac" // three bytes
	tests := []struct {
		name   string
		pieces []string
	}{
		{"empty", nil},
		{"ascii", []string{"hello"}},
		{"controls and html", []string{"a\x00b\n\t<&>\"\\\u2028"}},
		{"rune across pieces", []string{"x" + euro[:1], euro[1:] + "y"}},
		{"rune across a chunk", []string{strings.Repeat("a", textChunk-1) + euro + strings.Repeat("b", textChunk)}},
		{"invalid byte at a chunk end", []string{strings.Repeat("a", textChunk-1) + "\xe2", "z"}},
		{"truncated rune at the very end", []string{"ok" + euro[:2]}},
		{"truncated rune before the note", []string{"ok" + euro[:2], "\n[note]\n"}},
		{"many chunks", []string{strings.Repeat("\x01\xff"+euro, 3*textChunk/5+7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pieces text
			for _, p := range tt.pieces {
				pieces = append(pieces, []byte(p))
			}
			var got bytes.Buffer
			require.NoError(t, writeText(&got, pieces))
			want, err := json.Marshal(strings.Join(tt.pieces, ""))
			require.NoError(t, err)
			assert.Equal(t, string(want), got.String())
		})
	}
}

func FuzzWriteText(f *testing.F) {
	f.Add([]byte("a\xe2\x82"), []byte("\xacb"), 3)
	f.Fuzz(func(t *testing.T, a, b []byte, split int) {
		// Stretch the input past a chunk so that chunk ends are exercised.
		long := append(bytes.Repeat([]byte{'.'}, textChunk-max(split%8, 0)), a...)
		var got bytes.Buffer
		if err := writeText(&got, text{long, b}); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(string(long) + string(b))
		if got.String() != string(want) {
			t.Fatalf("chunked encoding differs from the whole's")
		}
	})
}

func TestCappedBuffer(t *testing.T) {
	t.Run("keeps the first bytes and counts the rest", func(t *testing.T) {
		c := cappedBuffer{limit: 4}
		c.Write([]byte("ab"))
		c.Write([]byte("cdef"))
		c.Write([]byte("gh"))
		assert.Equal(t, "abcd", string(c.buf))
		assert.LessOrEqual(t, cap(c.buf), 4, "never allocates past its limit")
		assert.Equal(t, "\n[sandplane: output truncated, 4 more bytes dropped]\n", c.note())
	})
	t.Run("grows only as far as the budget grants", func(t *testing.T) {
		b := &logBudget{limit: minGrow + 10}
		c := cappedBuffer{limit: 4 * minGrow, budget: b}
		c.Write(bytes.Repeat([]byte("x"), minGrow+100))
		assert.Equal(t, minGrow+10, len(c.buf))
		assert.Equal(t, int64(cap(c.buf)), b.used, "the budget counts capacity")
		assert.Contains(t, c.note(), "90 more bytes dropped: the toolbox's session logs are at their memory limit")
		c.release()
		assert.Zero(t, b.used)
		c.Write([]byte("late"))
		assert.Empty(t, c.buf, "a released buffer keeps nothing")
	})
}

// sink counts a response body and keeps its end, so that reading a large
// answer costs the test nothing.
type sink struct {
	n    int64
	tail []byte
}

func (s *sink) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	s.tail = append(s.tail, p...)
	if len(s.tail) > 4096 {
		s.tail = append(s.tail[:0], s.tail[len(s.tail)-4096:]...)
	}
	return len(p), nil
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestExecuteHugeOutputIsCappedNotHeld(t *testing.T) {
	ts := newTestServer(t, Options{})
	const produced = 512 << 20 // 32 times the cap
	cmd := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", produced)
	var body sink
	var status int
	alloc := allocated(func() {
		req, err := http.NewRequest(http.MethodPost, ts.url+"/process/execute", jsonReader(t, wire.ExecuteRequest{Command: cmd}))
		require.NoError(t, err)
		ts.authorize(req, "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		status = resp.StatusCode
		_, err = io.Copy(&body, resp.Body)
		require.NoError(t, err)
	})
	require.Equal(t, http.StatusOK, status, "body ends: %s", body.tail)

	note := fmt.Sprintf("\n[sandplane: output truncated, %d more bytes dropped]\n", produced-DefaultMaxOutputBytes)
	escapedNote, err := json.Marshal(note)
	require.NoError(t, err)
	head := `{"exitCode":0,"result":"`
	assert.Equal(t, int64(len(head)+DefaultMaxOutputBytes+len(escapedNote)-1+len("}\n")), body.n,
		"the first %d bytes, then the note", DefaultMaxOutputBytes)
	assert.True(t, strings.HasSuffix(string(body.tail), "xxx"+string(escapedNote[1:])+"}\n"), "body ends: %q", body.tail)
	// What the toolbox allocates follows the cap, not the output: the
	// buffer's doublings and one escaping pass. The old way (a 64 MiB cap,
	// the output copied into a string, marshalled whole, copied again) took
	// most of the output's size.
	t.Logf("allocated %d MiB for %d MiB of output", alloc>>20, produced>>20)
	assert.Less(t, alloc, uint64(8*DefaultMaxOutputBytes), "allocated %d MiB for %d MiB of output", alloc>>20, produced>>20)
}

func TestSessionHugeOutputIsCapped(t *testing.T) {
	const limit = 1 << 20
	ts := newTestServer(t, Options{MaxOutputBytes: limit})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "big"}).status)
	const produced = 64 << 20
	resp, out := ts.sessionExec(t, "big", wire.SessionExecuteRequest{
		Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' y; echo done >&2", produced),
	})
	require.Equal(t, http.StatusOK, resp.status)
	require.NotNil(t, out.ExitCode)
	assert.Equal(t, 0, *out.ExitCode)
	note := fmt.Sprintf("\n[sandplane: output truncated, %d more bytes dropped]\n", produced-limit)
	require.NotNil(t, out.Stdout)
	assert.Equal(t, strings.Repeat("y", limit)+note, *out.Stdout)
	assert.Equal(t, "done\n", *out.Stderr, "the other stream has its own cap")
	assert.Len(t, *out.Output, limit+len(fmt.Sprintf("\n[sandplane: output truncated, %d more bytes dropped]\n", produced+5-limit)))

	logs := ts.get(t, "/process/session/big/command/"+out.CmdID+"/logs")
	require.Equal(t, http.StatusOK, logs.status)
	var got wire.SessionCommandLogs
	logs.json(t, &got)
	assert.Equal(t, *out.Stdout, got.Stdout, "the logs read later are the same capped text")
}

func TestSessionLogsShareOneBudget(t *testing.T) {
	const (
		perCommand = 64 << 10
		budget     = 512 << 10
	)
	ts := newTestServer(t, Options{MaxOutputBytes: perCommand, MaxSessionLogBytes: budget})
	for _, id := range []string{"a", "b"} {
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": id}).status)
	}
	big := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' z", perCommand)
	var ids []string
	for i := 0; i < 8; i++ { // 8 commands * (stdout + output) * 64 KiB: twice the budget
		resp, out := ts.sessionExec(t, "a", wire.SessionExecuteRequest{Command: big})
		require.Equal(t, http.StatusOK, resp.status)
		ids = append(ids, out.CmdID)
	}
	// Another session's command still gets its whole output: the oldest
	// finished logs, whichever session they are in, make room.
	resp, out := ts.sessionExec(t, "b", wire.SessionExecuteRequest{Command: big})
	require.Equal(t, http.StatusOK, resp.status)
	assert.Equal(t, strings.Repeat("z", perCommand), *out.Stdout)

	var kept int
	for i, id := range ids {
		var logs wire.SessionCommandLogs
		r := ts.get(t, "/process/session/a/command/"+id+"/logs")
		require.Equal(t, http.StatusOK, r.status)
		r.json(t, &logs)
		if strings.Contains(logs.Output, "discarded to keep session logs within") {
			assert.Less(t, i, len(ids)-1, "the newest logs are kept")
			continue
		}
		kept += len(logs.Stdout) + len(logs.Output)
		assert.Equal(t, strings.Repeat("z", perCommand), logs.Stdout)
	}
	assert.LessOrEqual(t, kept+2*perCommand, budget, "what is kept fits the budget")
	assert.LessOrEqual(t, ts.sessions.budget.used, int64(budget))

	var first wire.SessionCommandLogs
	ts.get(t, "/process/session/a/command/"+ids[0]+"/logs").json(t, &first)
	assert.Contains(t, first.Output, "discarded", "the oldest logs made room")

	// Deleting the sessions hands their memory back.
	for _, id := range []string{"a", "b"} {
		require.Equal(t, http.StatusNoContent, ts.do(t, http.MethodDelete, "/process/session/"+id, nil, "").status)
	}
	assert.Zero(t, ts.sessions.budget.used)
}

func TestStreamedAnswersDecodeAsTheirTypes(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSONStream(rec, http.StatusOK, field{"exitCode", 3}, field{"result", text{[]byte("a\"b"), []byte("\n[note]\n")}})
	var got wire.ExecuteResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.Equal(t, wire.ExecuteResponse{ExitCode: 3, Result: "a\"b\n[note]\n"}, got)
	assert.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"))
}
