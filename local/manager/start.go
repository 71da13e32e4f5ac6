package manager

import (
	"context"
	"errors"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// Start respawns a stopped sandbox. See provider.Provider.
func (m *Manager) Start(ctx context.Context, idOrName string) (provider.Sandbox, error) {
	e, err := m.lookup(idOrName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if err := m.available(e); err != nil {
		return provider.Sandbox{}, err
	}
	if err := e.op.lock(ctx); err != nil {
		return provider.Sandbox{}, err
	}
	defer e.op.unlock()
	ctx = detach(ctx)
	rec, err := m.settleBeforeStart(ctx, e, idOrName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	running, err := m.stillRuns(ctx, e, rec)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if running {
		return m.info(rec), nil
	}
	snap, err := m.resolve(rec.Runtime, rec.Snapshot)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if _, err := m.update(e, func(r *record) { r.State = provider.StateStarting; r.ErrorReason = "" }); err != nil {
		return provider.Sandbox{}, err
	}
	started := func(r *record) {
		r.State = provider.StateStarted
		r.LastActivityAt = m.clk.Now()
	}
	next, err := m.spawn(ctx, e, snap, started)
	if err != nil {
		m.markStartFailed(e, err)
		return provider.Sandbox{}, err
	}
	s, err := m.commit(e, next, started, startDurable(rec.Runtime), emission{provider.EventStarted, ""}, bumped)
	if err != nil {
		return provider.Sandbox{}, err
	}
	m.watch(e)
	return s, nil
}

// startDurable says whether the record of a start on runtime rt that says
// it started must be durable before the start answers.
//
// Not on native: a native workload is a process of this machine, so the
// machine crash that could undo the record's rename ends the workload too,
// and the restart that follows finds the record saying starting (durable
// before the spawn) or started, checks the workload either way (recoveryOf),
// finds it gone and records the sandbox stopped: the sync would buy
// nothing. A kill -9 of the daemon loses nothing the rename put in place.
// A create is another matter: its started record is its commit point (see
// Create).
//
// On docker it must: an engine on another machine keeps its container
// through the daemon's machine's crash, and a restart adopts it only by the
// handle that record makes durable.
func startDurable(rt provider.Runtime) bool { return rt != provider.RuntimeNative }

// settleBeforeStart returns e's record once no earlier workload of it may
// still run: a stop that never finished (say a daemon restarted mid-kill
// that could not check the workload) is finished first. not_found: deleted
// meanwhile. failed_precondition: the old workload cannot be killed yet.
// The caller holds e.op.
func (m *Manager) settleBeforeStart(ctx context.Context, e *entry, idOrName string) (*record, error) {
	m.mu.Lock()
	rec := e.rec
	deleted := !m.reg.has(e)
	m.mu.Unlock()
	if deleted {
		return nil, provider.Errorf(provider.NotFound, "sandbox %q was deleted", idOrName)
	}
	if rec.State == provider.StateStopping && e.killErr == nil {
		if _, err := m.stopLocked(ctx, e, ""); err != nil && e.killErr == nil {
			return nil, err
		}
		m.mu.Lock()
		rec = e.rec
		m.mu.Unlock()
	}
	if e.killErr != nil {
		return nil, provider.Errorf(provider.FailedPrecondition,
			"sandbox %s: its previous workload could not be killed yet (%v); the daemon keeps retrying, start again once it is stopped", rec.ID, e.killErr)
	}
	return rec, nil
}

// stillRuns reports whether a sandbox recorded as started still has its
// workload; one that ended is marked stopped, so that it can start again.
// unavailable: its runtime is not enabled. The caller holds e.op.
func (m *Manager) stillRuns(ctx context.Context, e *entry, rec *record) (bool, error) {
	rt, err := m.runtimeOf(rec)
	if err != nil || rec.State != provider.StateStarted {
		return false, err
	}
	st, err := rt.Status(ctx, *rec.Handle)
	if err != nil {
		return false, err
	}
	if !st.Running {
		m.markExited(e, *rec.Handle, st.Exit.Reason)
	}
	return st.Running, nil
}

// markStartFailed records a start whose workload did not come up as
// stopped, saying why.
func (m *Manager) markStartFailed(e *entry, cause error) {
	if _, err := m.update(e, func(r *record) {
		r.State = provider.StateStopped
		r.Port, r.ExtraPorts = 0, nil
		r.ErrorReason = "start failed: " + provider.Message(cause)
		if errors.Is(cause, driver.ErrWorkloadRemoved) {
			r.ErrorReason = driver.ReasonWorkloadRemoved
		}
	}, emission{provider.EventStopped, ""}); err != nil {
		m.log.Error("persist failed start", "sandbox", e.rec.ID, "err", err)
	}
}
