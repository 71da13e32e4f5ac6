package simulator

import (
	"net/http"
	"sync"
)

// liveLog is what a pull or build prints while it runs: readers that
// follow it (build-logs?follow=true, as the SDKs' onSnapshotCreateLogs and
// onLogs read it) get each write as it comes, until it is finished.
type liveLog struct {
	mu      sync.Mutex
	buf     []byte
	done    bool
	changed chan struct{} // closed and replaced at every write and at finish
}

func newLiveLog() *liveLog { return &liveLog{changed: make(chan struct{})} }

func (l *liveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return len(p), nil
	}
	l.buf = append(l.buf, p...)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// finish ends the log: followers get the rest and their stream ends.
func (l *liveLog) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done = true
		close(l.changed)
	}
}

// from returns what was written past offset, whether the log is finished,
// and a channel closed at the next change.
func (l *liveLog) from(offset int) (data []byte, done bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf[min(offset, len(l.buf)):], l.done, l.changed
}

func (l *liveLog) String() string {
	b, _, _ := l.from(0)
	return string(b)
}

// serveLogs answers a build-logs route as plain text: what l holds, or,
// with follow, every write until l is finished or the client leaves. A nil
// l (nothing ever ran) is logs alone.
func serveLogs(w http.ResponseWriter, r *http.Request, l *liveLog, logs string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if l == nil || r.URL.Query().Get("follow") != "true" {
		if l != nil {
			logs = l.String()
		}
		_, _ = w.Write([]byte(logs))
		return
	}
	flusher, _ := w.(http.Flusher)
	offset := 0
	for {
		data, done, changed := l.from(offset)
		if len(data) > 0 {
			if _, err := w.Write(data); err != nil {
				return
			}
			offset += len(data)
			if flusher != nil {
				flusher.Flush()
			}
		}
		if done {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}
