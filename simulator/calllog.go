package simulator

import (
	"sync"
	"time"
)

// Call is one request as the call log saw it.
type Call struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Operation string    `json:"operation"`
	SandboxID string    `json:"sandboxId,omitempty"`
	Status    int       `json:"status"`
	// Fault names the injected fault that shaped the answer, if any.
	Fault string `json:"fault,omitempty"`
}

// callLog is a ring buffer of the latest calls.
type callLog struct {
	mu    sync.Mutex
	buf   []Call
	next  int
	full  bool
	seq   uint64
	count map[string]uint64
}

func newCallLog(size int) *callLog {
	return &callLog{buf: make([]Call, size), count: map[string]uint64{}}
}

func (l *callLog) add(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	c.Seq = l.seq
	l.buf[l.next] = c
	l.next = (l.next + 1) % len(l.buf)
	if l.next == 0 {
		l.full = true
	}
	l.count[c.Operation]++
}

func (l *callLog) snapshot() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Call
	if l.full {
		out = append(out, l.buf[l.next:]...)
	}
	return append(out, l.buf[:l.next]...)
}

func (l *callLog) counts() map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]uint64, len(l.count))
	for k, v := range l.count {
		out[k] = v
	}
	return out
}

func (l *callLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.buf)
	l.next, l.full = 0, false
	l.count = map[string]uint64{}
}

// Calls returns the call log, oldest first.
func (s *Simulator) Calls() []Call { return s.calls.snapshot() }
