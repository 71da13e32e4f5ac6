package manager

import (
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// maxActivityFlush bounds the pause between a refresh-activity and the
// write that puts it on disk: at most that much activity time is lost when
// the daemon or the machine crashes.
const maxActivityFlush = 5 * time.Second

// activityFlushEvery is how long a refresh stays in memory before it is
// written: a twelfth of the interval minute (5 s of a real minute), so that
// auto-stop, which counts whole minutes, never acts on a time a crash lost
// by more than a small part of one.
func activityFlushEvery(minute time.Duration) time.Duration {
	return max(min(minute/12, maxActivityFlush), time.Millisecond)
}

// flusher writes the records whose lastActivityAt only moved, a few at a
// time instead of once per refresh. A state change writes its record at
// once, whole, with the latest activity, as ever.
type flusher struct {
	every time.Duration
	clk   clock.Clock

	mu    sync.Mutex // guards dirty and timer
	dirty map[*entry]struct{}
	timer clock.Timer

	// runMu is held while a flush runs; closed (guarded by it) makes a
	// flush that fires after Close do nothing.
	runMu  sync.Mutex
	closed bool
}

// refresh moves e's lastActivityAt to now, in memory at once, on disk with
// the next flush, and announces it with source. not_found: deleted
// meanwhile. failed_precondition: unreadable.
func (m *Manager) refresh(e *entry, source string) error {
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	m.mu.Lock()
	cur, registered := e.rec, m.reg.has(e)
	m.mu.Unlock()
	switch {
	case !registered:
		return provider.Errorf(provider.NotFound, "sandbox %q was deleted", cur.ID)
	case e.unreadable != nil:
		return unreadableErr(cur.ID, e.unreadable)
	}
	now := m.clk.Now()
	next := cur.clone()
	next.LastActivityAt, next.UpdatedAt = now, now
	m.install(e, next)
	if !e.activityDirty {
		e.activityDirty = true
		m.flush.add(e, m.flushActivity)
	}
	s := m.viewOf(e)
	s.Labels = cloneMap(s.Labels)
	m.emit(provider.EventActivity, s, source)
	return nil
}

// add schedules a flush unless one is pending.
func (f *flusher) add(e *entry, flush func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dirty[e] = struct{}{}
	if f.timer == nil {
		f.timer = f.clk.AfterFunc(f.every, flush)
	}
}

// take returns the entries to write and clears the set.
func (f *flusher) take() map[*entry]struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	dirty := f.dirty
	f.dirty = map[*entry]struct{}{}
	f.timer = nil
	return dirty
}

// flushActivity writes every record whose activity moved since it was
// last written. A record that cannot be written stays pending for the
// next flush; its state was written when it changed, so only activity
// time is at stake.
func (m *Manager) flushActivity() {
	m.flush.runMu.Lock()
	defer m.flush.runMu.Unlock()
	if m.flush.closed {
		return
	}
	for e := range m.flush.take() {
		if err := m.writeActivity(e); err != nil {
			m.log.Warn("write activity time; trying again with the next flush", "err", err)
			m.flush.add(e, m.flushActivity)
		}
	}
}

// writeActivity writes e's record if its activity is newer on disk than in
// memory. Only the activity time is new: the record's state is already on
// disk, durably, or, after a native start, where losing it changes nothing
// (see startDurable). So the write skips the directory's fsync, and a
// machine crash may bring back the previous record, with an older activity
// time and a state that recovers alike.
func (m *Manager) writeActivity(e *entry) error {
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	if !e.activityDirty {
		return nil
	}
	m.mu.Lock()
	rec, registered := e.rec, m.reg.has(e)
	m.mu.Unlock()
	if !registered || e.unreadable != nil {
		e.activityDirty = false
		return nil
	}
	if err := persistIn(m.dir(rec.ID), rec, false); err != nil {
		return err // names the sandbox
	}
	e.activityDirty = false
	return nil
}

// closeFlush writes what is pending and stops flushing: nothing writes
// the registry once Close returns.
func (m *Manager) closeFlush() {
	m.flush.mu.Lock()
	if m.flush.timer != nil {
		m.flush.timer.Stop()
	}
	m.flush.mu.Unlock()
	m.flushActivity()
	m.flush.runMu.Lock()
	m.flush.closed = true
	m.flush.runMu.Unlock()
}
