package manager

import (
	"context"
	"os"

	"github.com/sandplane/sandplane/local/runtime"
	"github.com/sandplane/sandplane/provider"
)

// reasonGone is the errorReason of a sandbox whose workload died while no
// daemon was watching.
const reasonGone = "daemon restart: process gone"

// rehydrate rebuilds the registry from disk and makes it true again: live
// workloads are adopted, dead ones are marked stopped with a reason, creates
// and deletes that a crash interrupted are finished or rolled back, and
// workloads nobody owns are killed.
func (m *Manager) rehydrate(ctx context.Context) error {
	_ = os.RemoveAll(m.dir(trashDir)) // deletes that crashed after their commit point
	recs, err := m.loadRecords()
	if err != nil {
		return provider.Errorf(provider.Internal, "read registry in %s: %w", m.opts.Root, err)
	}
	var known []runtime.Handle
	for _, r := range recs {
		rt, ok := m.opts.Runtimes[r.Runtime]
		if !ok {
			m.log.Warn("sandbox uses a runtime that is not enabled; keeping it as it is", "sandbox", r.ID, "runtime", r.Runtime)
			m.sandboxes[r.ID] = newEntry(r)
			m.ports.reserve(r.Port) // its workload may still serve there
			continue
		}
		if r.Creating {
			// The client never got an answer: roll the create back whole.
			if r.Handle != nil {
				m.discard(rt, *r.Handle)
			}
			if err := m.removeDir(r.ID); err != nil {
				m.log.Error("roll back interrupted create", "sandbox", r.ID, "err", err)
			}
			m.log.Info("rolled back a create interrupted by a crash", "sandbox", r.ID)
			continue
		}
		e := newEntry(r)
		m.sandboxes[r.ID] = e
		if r.Handle != nil {
			known = append(known, *r.Handle)
		}
		if (r.State == provider.StateStopping && r.StopReason == reasonDeleted) ||
			(r.State == provider.StateStopped && r.ErrorReason == reasonDeleted) {
			// A delete the crash interrupted before its commit point.
			if err := m.deleteLocked(ctx, e); err != nil {
				m.log.Error("finish interrupted delete", "sandbox", r.ID, "err", err)
			}
			continue
		}
		if r.State == provider.StateStopped || r.Handle == nil {
			if r.State != provider.StateStopped {
				m.settle(e, reasonGone)
			}
			continue
		}
		st, err := rt.Status(ctx, *r.Handle)
		switch {
		case err != nil:
			m.log.Error("cannot tell whether a workload runs; leaving the sandbox as recorded", "sandbox", r.ID, "err", err)
			m.ports.reserve(r.Port)
			continue
		case !st.Running:
			m.settle(e, reasonGone)
			continue
		}
		// Alive. A stop that was in flight when the daemon died is finished.
		m.ports.reserve(r.Port)
		if r.State == provider.StateStopping {
			if _, err := m.stopLocked(ctx, e, r.StopReason); err != nil {
				m.log.Error("finish interrupted stop", "sandbox", r.ID, "err", err)
			}
			continue
		}
		if r.State != provider.StateStarted {
			_, _ = m.update(e, func(r *record) { r.State = provider.StateStarted })
		}
		m.watch(e)
	}
	for name, rt := range m.opts.Runtimes {
		orphans, err := rt.Orphans(ctx, m.opts.Root, known)
		if err != nil {
			m.log.Warn("cannot look for orphaned workloads", "runtime", name, "err", err)
			continue
		}
		for _, h := range orphans {
			m.log.Warn("removing orphaned workload left by a crash", "runtime", name, "pid", h.PID, "container", h.ContainerID)
			m.discard(rt, h)
		}
	}
	return nil
}

// settle marks a sandbox whose workload is gone as stopped.
func (m *Manager) settle(e *entry, reason string) {
	if _, err := m.update(e, func(r *record) {
		r.State = provider.StateStopped
		r.Port = 0
		r.ErrorReason = reason
	}); err != nil {
		m.log.Error("persist reconciled state", "sandbox", e.rec.ID, "err", err)
	}
}
