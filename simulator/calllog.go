package simulator

import (
	"net/http"
	"strings"
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
	l.push(c.owned())
	ops := l.count[c.Org]
	if ops == nil {
		ops = map[string]uint64{}
		l.count[c.Org] = ops
	}
	ops[c.Operation]++
}

// owned is c with strings that hold nothing else alive. A request's Method
// and Path are slices of its whole request line, and the log outlives the
// request by thousands of calls: each entry kept the line, and a create's
// entry the id of its sandbox, as allocations of their own, long after
// the sandbox was deleted. Method becomes one of net/http's constants,
// Path and SandboxID share one allocation sized for them (the id inside the
// path when it is there).
func (c Call) owned() Call {
	c.Method = knownMethod(c.Method)
	if i := strings.Index(c.Path, c.SandboxID); c.SandboxID != "" && i >= 0 {
		c.Path = strings.Clone(c.Path)
		c.SandboxID = c.Path[i : i+len(c.SandboxID)]
		return c
	}
	var b strings.Builder
	b.Grow(len(c.Path) + len(c.SandboxID))
	b.WriteString(c.Path)
	b.WriteString(c.SandboxID)
	packed := b.String()
	c.Path, c.SandboxID = packed[:len(c.Path)], packed[len(c.Path):]
	return c
}

// knownMethod is m as net/http's constant when it is one, else a copy.
func knownMethod(m string) string {
	for _, k := range [...]string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut,
		http.MethodPatch, http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace} {
		if m == k {
			return k
		}
	}
	return strings.Clone(m)
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
