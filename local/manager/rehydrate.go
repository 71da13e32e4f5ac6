package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// reasonGone is the errorReason of a sandbox whose workload died while no
// daemon was watching.
const reasonGone = "daemon restart: process gone"

// recoveryWorkers bounds how many sandboxes a restart recovers at once: each
// may wait a whole StopGrace for a workload that ignores SIGTERM.
const recoveryWorkers = 4

// What a restart still does to a sandbox, as the refusal of an operation
// on it says ("sandbox x is still stopping after the daemon restart").
const (
	doingCheck    = "being checked"
	doingStop     = "stopping"
	doingDelete   = "being deleted"
	doingRollback = "being rolled back (its create was interrupted)"
)

// recoveryJob is one sandbox a restart must make true again.
type recoveryJob struct {
	e     *entry
	doing string
}

// rehydrate rebuilds the registry from disk, as recorded, and starts the
// work that makes it true again in the background: live workloads are
// adopted, dead ones marked stopped with a reason, creates and deletes that
// a crash interrupted are rolled back or finished, and workloads nobody owns
// are killed. Until its work is done a sandbox refuses operations, and
// reads show it as recorded, so the daemon answers at once.
func (m *Manager) rehydrate() error {
	m.clearLeftovers()
	reg, err := m.loadRecords()
	if err != nil {
		return provider.Errorf(provider.Internal, "read registry in %s: %w", m.opts.Root, err)
	}
	var checks, finishes []recoveryJob
	for _, r := range reg.records {
		e := m.newEntry(r)
		m.reg.add(e)
		for _, p := range hostPorts(r) {
			m.ports.Reserve(p) // its workload may still serve there
		}
		if _, ok := m.opts.Runtimes[r.Runtime]; !ok {
			m.log.Warn("sandbox uses a runtime that is not enabled; keeping it as it is", "sandbox", r.ID, "runtime", r.Runtime)
			continue
		}
		switch doing := recoveryOf(r); doing {
		case "":
		case doingCheck:
			e.recovering = doing
			checks = append(checks, recoveryJob{e, doing})
		default:
			e.recovering = doing
			finishes = append(finishes, recoveryJob{e, doing})
		}
	}
	for name, cause := range reg.unreadable {
		m.addUnreadable(name, cause)
	}
	m.foreign = reg.foreign
	for _, name := range reg.foreign {
		m.log.Warn("folder in the root is not a sandbox; leaving it alone", "path", m.dir(name))
	}
	m.recovered = make(chan struct{})
	m.wg.Add(1)
	go m.recover(append(checks, finishes...)) // the quick checks first
	return nil
}

// recoveryOf says what a restart must do to the sandbox recorded as r.
func recoveryOf(r *record) string {
	switch {
	case r.Creating:
		return doingRollback // the client never got an answer
	case r.State == provider.StateStopping && r.StopReason == reasonDeleted,
		r.State == provider.StateStopped && r.ErrorReason == reasonDeleted:
		return doingDelete // interrupted before its commit point
	case r.State == provider.StateStopping:
		return doingStop
	case r.State != provider.StateStopped:
		return doingCheck
	}
	return ""
}

// addUnreadable registers the sandbox whose record in directory name cannot
// be read: visible in state error, its workloads spared, until deleted.
func (m *Manager) addUnreadable(name string, cause error) {
	path := filepath.Join(m.dir(name), recordFile)
	m.log.Error("unreadable sandbox record; the sandbox is shown in state error and its workload left running until it is deleted", "sandbox", name, "path", path, "err", cause)
	var created = m.clk.Now()
	if fi, err := os.Stat(m.dir(name)); err == nil {
		created = fi.ModTime()
	}
	rec := &record{
		Version:     recordVersion,
		ID:          name,
		Name:        name,
		State:       provider.StateError,
		Runtime:     m.opts.DefaultRuntime,
		Labels:      map[string]string{},
		CreatedAt:   created,
		UpdatedAt:   created,
		ErrorReason: fmt.Sprintf("unreadable record %s: %v; its workload, if any, is left running: delete the sandbox to end it", path, cause),
	}
	rec.LastActivityAt = created
	e := m.newEntry(rec)
	e.unreadable = cause
	m.reg.add(e)
}

// recover does the restart's work: orphans are listed first (no create can
// spawn meanwhile), then every job runs on a few workers, then the orphans
// are ended. Close drops the jobs not yet begun.
func (m *Manager) recover(jobs []recoveryJob) {
	defer m.wg.Done()
	defer close(m.recovered)
	ctx := detach(m.ctx) // work under way finishes even when Close comes
	orphans := m.orphans(ctx)

	queue := make(chan recoveryJob)
	var workers sync.WaitGroup
	for range min(recoveryWorkers, len(jobs)) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range queue {
				if m.ctx.Err() == nil { // closing: leave the rest to the next daemon
					m.recoverOne(ctx, j)
				}
			}
		}()
	}
	for _, j := range jobs {
		if m.ctx.Err() != nil {
			break
		}
		queue <- j
	}
	close(queue)
	workers.Wait()
	if m.ctx.Err() == nil {
		_ = m.endAll(orphans)
		m.sweepRuntimes(ctx)
	}
}

func (m *Manager) recoverOne(ctx context.Context, j recoveryJob) {
	e := j.e
	if e.op.lock(m.ctx) != nil {
		return
	}
	defer e.op.unlock()
	defer func() {
		m.mu.Lock()
		e.recovering = ""
		m.mu.Unlock()
	}()
	m.mu.Lock()
	r := e.rec
	m.mu.Unlock()
	rt := m.opts.Runtimes[r.Runtime]
	switch j.doing {
	case doingRollback:
		m.rollBack(e, r, rt)
	case doingDelete:
		if err := m.deleteLocked(ctx, e); err != nil {
			m.log.Error("finish interrupted delete", "sandbox", r.ID, "err", err)
		}
	case doingStop, doingCheck:
		m.check(ctx, e, r, rt)
	}
}

// rollBack undoes a create that a crash interrupted before it answered.
func (m *Manager) rollBack(e *entry, r *record, rt driver.Driver) {
	if r.Handle != nil {
		m.discard(rt, *r.Handle)
	}
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	if err := m.removeDir(r.ID); err != nil {
		m.log.Error("roll back interrupted create", "sandbox", r.ID, "err", err)
		return
	}
	m.mu.Lock()
	m.reg.remove(e)
	m.mu.Unlock()
	m.releasePorts(r)
	s := m.info(r)
	s.State = provider.StateDestroyed
	m.emit(provider.EventDeleted, s, "")
	m.log.Info("rolled back a create interrupted by a crash", "sandbox", r.ID)
}

// check finds out whether the workload of a sandbox recorded as running (or
// stopping) still runs: adopted if so, and a stop in flight finished;
// marked stopped if not. A workload that cannot be checked is left as
// recorded, its port held.
func (m *Manager) check(ctx context.Context, e *entry, r *record, rt driver.Driver) {
	if r.Handle == nil {
		m.settle(e, reasonGone)
		return
	}
	st, err := rt.Status(ctx, *r.Handle)
	switch {
	case err != nil:
		m.log.Error("cannot tell whether a workload runs; leaving the sandbox as recorded", "sandbox", r.ID, "err", err)
		return
	case !st.Running:
		m.settle(e, reasonGone)
		return
	case r.State == provider.StateStopping:
		if _, err := m.stopLocked(ctx, e, r.StopReason); err != nil {
			m.log.Error("finish interrupted stop", "sandbox", r.ID, "err", err)
		}
		return
	case r.State != provider.StateStarted:
		if _, err := m.update(e, func(r *record) { r.State = provider.StateStarted }, emission{provider.EventStarted, ""}); err != nil {
			m.log.Error("persist adopted workload", "sandbox", r.ID, "err", err)
		}
	}
	m.watch(e)
}

// settle marks a sandbox whose workload is gone as stopped.
func (m *Manager) settle(e *entry, reason string) {
	m.mu.Lock()
	rec := e.rec
	m.mu.Unlock()
	if _, err := m.update(e, func(r *record) {
		r.State = provider.StateStopped
		r.Port, r.ExtraPorts = 0, nil
		r.ErrorReason = reason
		r.StopReason = ""
	}, emission{provider.EventStopped, ""}); err != nil {
		m.log.Error("persist reconciled state", "sandbox", rec.ID, "err", err)
		return
	}
	m.releasePorts(rec)
}

// orphans lists, by runtime, the workloads marked with the root that no
// sandbox owns and that may be ended. Spared are the workloads of sandboxes
// whose record is unreadable (unless being deleted), and, on a runtime that
// cannot tell which sandbox a workload belongs to, every unknown workload
// while any record is unreadable. No spawn runs while the list is made, so
// every live workload either is on record or is an orphan.
func (m *Manager) orphans(ctx context.Context) map[provider.Runtime][]driver.Handle {
	m.spawnMu.Lock()
	defer m.spawnMu.Unlock()
	known, spared := m.owned()
	out := map[provider.Runtime][]driver.Handle{}
	for name := range m.opts.Runtimes {
		list, err := m.orphansOf(ctx, name, known, spared)
		if err != nil {
			m.log.Warn("cannot look for orphaned workloads", "runtime", name, "err", err)
			continue
		}
		if len(list) > 0 {
			out[name] = list
		}
	}
	return out
}

// owned are the handles on record, and the sandboxes whose workloads stay
// though no handle of theirs can be read.
func (m *Manager) owned() (known []driver.Handle, spared map[string]bool) {
	spared = map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.reg.order {
		if e.rec.Handle != nil {
			known = append(known, *e.rec.Handle)
		}
		if e.unreadable != nil && !e.released {
			spared[e.rec.ID] = true
		}
	}
	return known, spared
}

// orphansOf is orphans on runtime name alone; known are the handles on
// record, spared the sandboxes whose workloads stay. The caller holds
// spawnMu. An error says the runtime cannot tell.
func (m *Manager) orphansOf(ctx context.Context, name provider.Runtime, known []driver.Handle, spared map[string]bool) ([]driver.Handle, error) {
	rt := m.opts.Runtimes[name]
	list, err := rt.Orphans(ctx, m.opts.Root, known)
	if err != nil {
		return nil, err
	}
	marker, _ := rt.(driver.Marker)
	var out []driver.Handle
	for _, h := range list {
		switch {
		case marker != nil:
			id, err := marker.SandboxOf(ctx, h)
			if err != nil || spared[id] {
				m.log.Warn("leaving a workload of a sandbox whose record is unreadable running", "runtime", name, "sandbox", id, "pid", h.PID, "container", h.ContainerID, "err", err)
				continue
			}
		case len(spared) > 0:
			m.log.Warn("leaving an unknown workload running: this runtime cannot tell whether it belongs to a sandbox whose record is unreadable", "runtime", name, "pid", h.PID, "container", h.ContainerID)
			continue
		}
		out = append(out, h)
	}
	return out, nil
}

// endAll kills and removes the workloads listed, a few at a time, and says
// which could not be killed.
func (m *Manager) endAll(list map[provider.Runtime][]driver.Handle) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	limit := make(chan struct{}, recoveryWorkers)
	for name, handles := range list {
		rt := m.opts.Runtimes[name]
		for _, h := range handles {
			wg.Add(1)
			limit <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-limit }()
				m.log.Warn("removing orphaned workload", "runtime", name, "pid", h.PID, "container", h.ContainerID)
				if err := m.end(rt, h); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sweepRuntimes lets the runtimes remove what interrupted operations left
// besides workloads, while no spawn runs.
func (m *Manager) sweepRuntimes(ctx context.Context) {
	m.spawnMu.Lock()
	defer m.spawnMu.Unlock()
	for name, rt := range m.opts.Runtimes {
		if s, ok := rt.(driver.Sweeper); ok {
			if err := s.Sweep(ctx, m.opts.Root); err != nil {
				m.log.Warn("cannot sweep what interrupted operations left", "runtime", name, "err", err)
			}
		}
	}
}

// deleteUnreadable deletes a sandbox whose record cannot be read: it ends
// the workloads marked with its id (the orphan sweep spared them so far),
// then moves its directory into .corrupt, out of the root's namespace but
// kept. The caller holds e.op.
func (m *Manager) deleteUnreadable(ctx context.Context, e *entry) error {
	id := e.rec.ID
	m.mu.Lock()
	e.released = true
	m.mu.Unlock()
	if err := m.endAll(m.orphans(ctx)); err != nil {
		m.mu.Lock()
		e.released = false
		m.mu.Unlock()
		return provider.Errorf(provider.Internal, "sandbox %s: its workload could not be killed (%v); delete it again", id, err)
	}
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	dst, err := m.quarantine(id)
	if err != nil {
		m.mu.Lock()
		e.released = false
		m.mu.Unlock()
		return provider.Errorf(provider.Internal, "sandbox %s: move its directory into %s: %v", id, m.dir(corruptDir), err)
	}
	m.log.Warn("deleted a sandbox whose record was unreadable; its directory is kept", "sandbox", id, "to", dst)
	m.mu.Lock()
	m.reg.remove(e)
	m.mu.Unlock()
	s := m.info(e.rec)
	s.State = provider.StateDestroyed
	m.emit(provider.EventDeleted, s, "")
	return nil
}
