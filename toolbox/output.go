package toolbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"unicode/utf8"
)

// minGrow is the smallest allocation of a capped buffer: most commands
// print a line or two.
const minGrow = 512

// logBudget bounds the bytes that session logs hold together. It counts
// allocated capacity, not just content, so the bound is on memory.
type logBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

// take grants up to n bytes, fewer when the budget is short.
func (b *logBudget) take(n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = max(min(n, b.limit-b.used), 0)
	b.used += n
	return n
}

func (b *logBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *logBudget) free() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit - b.used
}

// cappedBuffer keeps the first limit bytes written and counts the rest. It
// grows by itself, never past limit, and with a budget only as far as the
// budget grants. It is not safe for concurrent use.
type cappedBuffer struct {
	limit    int
	budget   *logBudget // nil: only limit applies
	buf      []byte
	dropped  int64
	starved  bool // bytes were dropped because the budget was spent
	released bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.released {
		c.dropped += int64(len(p))
		return len(p), nil
	}
	want := min(len(p), c.limit-len(c.buf))
	if want > cap(c.buf)-len(c.buf) {
		c.grow(len(c.buf) + want)
	}
	keep := min(want, cap(c.buf)-len(c.buf))
	c.buf = append(c.buf, p[:keep]...)
	c.dropped += int64(len(p) - keep)
	return len(p), nil
}

// need is how many more bytes of memory writing n bytes would take.
func (c *cappedBuffer) need(n int) int64 {
	if c.released {
		return 0
	}
	return int64(max(min(n, c.limit-len(c.buf))-(cap(c.buf)-len(c.buf)), 0))
}

// grow makes room for size bytes, doubling when it can so that appends
// stay amortised, and copying once per growth.
func (c *cappedBuffer) grow(size int) {
	newCap := min(max(2*cap(c.buf), size, minGrow), c.limit)
	extra := int64(newCap - cap(c.buf))
	if c.budget != nil {
		got := c.budget.take(extra)
		if got < int64(size-cap(c.buf)) {
			c.starved = true
		}
		newCap = cap(c.buf) + int(got)
	}
	if newCap == cap(c.buf) {
		return
	}
	nb := make([]byte, len(c.buf), newCap)
	copy(nb, c.buf)
	c.buf = nb
}

// release hands the buffer's memory back to its budget; later writes are
// counted and dropped.
func (c *cappedBuffer) release() {
	if c.budget != nil {
		c.budget.give(int64(cap(c.buf)))
	}
	c.buf, c.released = nil, true
}

// note says what was dropped, or nothing when nothing was.
func (c *cappedBuffer) note() string {
	switch {
	case c.dropped == 0:
		return ""
	case c.starved:
		return fmt.Sprintf("\n[sandplane: output truncated, %d more bytes dropped: the toolbox's session logs are at their memory limit]\n", c.dropped)
	}
	return fmt.Sprintf("\n[sandplane: output truncated, %d more bytes dropped]\n", c.dropped)
}

// text is a JSON string value given in pieces, written without ever being
// joined or copied whole.
type text [][]byte

// field is one member of a streamed JSON object; value is text or anything
// json.Marshal takes.
type field struct {
	name  string
	value any
}

// textChunk is how much of a text is escaped at a time.
const textChunk = 32 << 10

// writeJSONStream answers a JSON object whose text members may be large:
// they are escaped chunk by chunk straight into the response, so that the
// answer costs no more memory than the output it carries. A write error
// means the client is gone; there is nobody to tell.
func writeJSONStream(w http.ResponseWriter, status int, fields ...field) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	bw := bufio.NewWriterSize(w, textChunk)
	bw.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := writeMarshaled(bw, f.name); err != nil {
			return
		}
		bw.WriteByte(':')
		var err error
		if t, ok := f.value.(text); ok {
			err = writeText(bw, t)
		} else {
			err = writeMarshaled(bw, f.value)
		}
		if err != nil {
			return
		}
	}
	bw.WriteString("}\n")
	bw.Flush()
}

func writeMarshaled(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writeText writes pieces as one JSON string, escaped by encoding/json a
// chunk at a time into one reused buffer. A chunk never ends inside a UTF-8
// sequence that the next bytes may complete, so the result equals the
// encoding of the whole.
func writeText(w io.Writer, pieces text) error {
	if _, err := io.WriteString(w, `"`); err != nil {
		return err
	}
	scratch := make([]byte, 0, textChunk+utf8.UTFMax)
	var escaped bytes.Buffer
	enc := json.NewEncoder(&escaped)
	flush := func(final bool) error {
		cut := len(scratch)
		if !final {
			cut = completeRunes(scratch)
		}
		escaped.Reset()
		if err := enc.Encode(string(scratch[:cut])); err != nil {
			return err
		}
		// Encode wrote "...", then a newline.
		b := escaped.Bytes()
		if _, err := w.Write(b[1 : len(b)-2]); err != nil {
			return err
		}
		scratch = append(scratch[:0], scratch[cut:]...)
		return nil
	}
	for _, p := range pieces {
		for len(p) > 0 {
			n := min(len(p), textChunk-len(scratch))
			scratch, p = append(scratch, p[:n]...), p[n:]
			if len(scratch) >= textChunk {
				if err := flush(false); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(true); err != nil {
		return err
	}
	_, err := io.WriteString(w, `"`)
	return err
}

// completeRunes returns the length of b without a trailing UTF-8 sequence
// that is still incomplete.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
