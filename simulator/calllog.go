package simulator

import (
	"sync"
	"time"
)

// Call is one request as the call log saw it.
type Call struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Org is the organization of the request's API key, or of the sandbox
	// a preview request reached; empty when neither is known (a request
	// without valid credentials).
	Org       string `json:"organizationId,omitempty"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	Operation string `json:"operation"`
	SandboxID string `json:"sandboxId,omitempty"`
	Status    int    `json:"status"`
	// Fault names the injected fault that shaped the answer, if any.
	Fault string `json:"fault,omitempty"`
}

// callLog is a ring buffer of the latest calls, with per-organization
// counts of every call ever made.
type callLog struct {
	mu    sync.Mutex
	buf   []Call
	next  int
	full  bool
	seq   uint64
	count map[string]map[string]uint64 // org → operation → calls
	// observe, when set, sees every call (the metrics).
	observe func(Call)
}

func newCallLog(size int) *callLog {
	return &callLog{buf: make([]Call, size), count: map[string]map[string]uint64{}}
}

func (l *callLog) add(c Call) {
	if l.observe != nil {
		l.observe(c)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	c.Seq = l.seq
	l.push(c)
	ops := l.count[c.Org]
	if ops == nil {
		ops = map[string]uint64{}
		l.count[c.Org] = ops
	}
	ops[c.Operation]++
}

func (l *callLog) push(c Call) {
	l.buf[l.next] = c
	l.next = (l.next + 1) % len(l.buf)
	if l.next == 0 {
		l.full = true
	}
}

func (l *callLog) entriesLocked() []Call {
	var out []Call
	if l.full {
		out = append(out, l.buf[l.next:]...)
	}
	return append(out, l.buf[:l.next]...)
}

// snapshot returns the calls of sc, oldest first.
func (l *callLog) snapshot(sc scope) []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := l.entriesLocked()
	out := all[:0]
	for _, c := range all {
		if sc.owns(c.Org) {
			out = append(out, c)
		}
	}
	return out
}

// counts sums the calls of sc by operation.
func (l *callLog) counts(sc scope) map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]uint64{}
	for org, ops := range l.count {
		if !sc.owns(org) {
			continue
		}
		for op, n := range ops {
			out[op] += n
		}
	}
	return out
}

// reset forgets the calls of sc and keeps everyone else's.
func (l *callLog) reset(sc scope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var kept []Call
	for _, c := range l.entriesLocked() {
		if !sc.owns(c.Org) {
			kept = append(kept, c)
		}
	}
	clear(l.buf)
	l.next, l.full = 0, false
	for _, c := range kept {
		l.push(c)
	}
	for org := range l.count {
		if sc.owns(org) {
			delete(l.count, org)
		}
	}
}

// Calls returns the call log of every organization, oldest first.
func (s *Simulator) Calls() []Call { return s.calls.snapshot(everyOrg) }
