package store

import (
	"sync"
	"sync/atomic"
)

// Lock is a read-write lock that counts its writes, so that a reader can
// tell whether anything changed since it last looked (the list item cache
// does) with one load.
type Lock struct {
	sync.RWMutex
	writes atomic.Uint64
}

// Lock takes the lock for writing and counts the write.
func (l *Lock) Lock() {
	l.RWMutex.Lock()
	l.writes.Add(1)
}

// WriteCount is the number of writes so far. Called with the lock held
// (shared is enough), so that it stands still until the caller lets go.
func (l *Lock) WriteCount() uint64 { return l.writes.Load() }
