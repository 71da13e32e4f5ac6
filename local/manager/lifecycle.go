package manager

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/sandplane/sandplane/internal/redact"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// killRetry is how long a sandbox whose workload could not be killed waits
// before the next attempt.
const killRetry = 5 * time.Second

// Get returns the sandbox as the manager knows it. not_found.
func (m *Manager) Get(ctx context.Context, idOrName string) (provider.Sandbox, error) {
	e, err := m.lookup(idOrName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	m.settleSeen(ctx)
	s := m.viewOf(e)
	s.Labels = cloneMap(s.Labels)
	return s, nil
}

// List returns the sandboxes whose labels contain every pair in labels,
// oldest first.
func (m *Manager) List(ctx context.Context, f Filter) []provider.Sandbox {
	m.settleSeen(ctx)
	m.mu.Lock()
	var out []provider.Sandbox
	for _, e := range m.reg.order {
		if f.Match(e.view) {
			out = append(out, e.view)
		}
	}
	m.mu.Unlock()
	for i := range out {
		out[i].Labels = cloneMap(out[i].Labels)
	}
	return out
}

// ListJSON is the list of the sandboxes f matches, encoded as a JSON array
// as the API answers it. The bytes are shared: the caller must not change
// them.
func (m *Manager) ListJSON(ctx context.Context, f Filter) []byte {
	m.settleSeen(ctx)
	return m.encodedList(f)
}

// Filter picks sandboxes for a list or an event stream. The zero Filter
// picks every one.
type Filter struct {
	// Labels must all be on the sandbox, with these values.
	Labels map[string]string
	// SessionID, when set, is the session the sandbox must belong to.
	SessionID string
}

// IsZero reports whether f picks every sandbox.
func (f Filter) IsZero() bool { return len(f.Labels) == 0 && f.SessionID == "" }

// Match reports whether f picks s.
func (f Filter) Match(s provider.Sandbox) bool {
	if f.SessionID != "" && (s.SessionID == nil || *s.SessionID != f.SessionID) {
		return false
	}
	return matches(s.Labels, f.Labels)
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// settleSeen records the exits that watches learnt of but could not record
// (a failed write), so that a read never shows a workload that ended as
// started for longer than a write fails. Reads cost nothing more while
// every exit is recorded: the state of a sandbox is settled by its
// driver's signal (a pidfd, a container's wait), not by asking on read.
// It never waits for an operation in progress: that operation settles the
// state itself.
func (m *Manager) settleSeen(ctx context.Context) {
	m.mu.Lock()
	if m.reg.unsettled == 0 {
		m.mu.Unlock()
		return
	}
	var seen []*entry
	for _, e := range m.reg.order {
		if e.exitSeen != nil {
			seen = append(seen, e)
		}
	}
	m.mu.Unlock()
	for _, e := range seen {
		if !e.op.tryLock() {
			continue
		}
		m.mu.Lock()
		note := e.exitSeen
		m.mu.Unlock()
		if note != nil {
			m.markExited(e, note.h, note.reason)
		}
		e.op.unlock()
	}
}

// Stop stops the workload and keeps the directory. Stopping a stopped
// sandbox returns it unchanged. See provider.Provider.
func (m *Manager) Stop(ctx context.Context, idOrName string) (provider.Sandbox, error) {
	return m.StopWithReason(ctx, idOrName, "")
}

// StopWithReason is Stop recording reason as the errorReason, which the
// sandbox.stopped event carries; "" records provider.StopReasonManual.
// invalid_argument: the reason the daemon keeps for deletes.
func (m *Manager) StopWithReason(ctx context.Context, idOrName, reason string) (provider.Sandbox, error) {
	switch reason {
	case "":
		reason = provider.StopReasonManual
	case reasonDeleted:
		// A stop recorded with it would be finished as a delete.
		return provider.Sandbox{}, provider.Errorf(provider.InvalidArgument, "stop reason %q is reserved for deletes: pick another", reason)
	}
	e, err := m.lookup(idOrName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	return m.stop(ctx, e, reason)
}

func (m *Manager) stop(ctx context.Context, e *entry, reason string) (provider.Sandbox, error) {
	if err := m.available(e); err != nil {
		return provider.Sandbox{}, err
	}
	if err := e.op.lock(ctx); err != nil {
		return provider.Sandbox{}, err
	}
	defer e.op.unlock()
	return m.stopLocked(detach(ctx), e, reason)
}

// stopLocked is Stop for a caller that holds e.op. If the workload cannot be
// killed the sandbox stays stopping, reports why, and a retry is scheduled.
// If the stop cannot be recorded, the sandbox stays as it was.
func (m *Manager) stopLocked(ctx context.Context, e *entry, reason string) (provider.Sandbox, error) {
	m.mu.Lock()
	rec := e.rec
	m.mu.Unlock()
	if rec.State == provider.StateStopped || rec.Handle == nil {
		return m.info(rec), nil
	}
	rt, err := m.runtimeOf(rec)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if rec.State != provider.StateStopping {
		if _, err := m.update(e, func(r *record) { r.State, r.StopReason = provider.StateStopping, reason }); err != nil {
			return provider.Sandbox{}, notRecorded(rec.ID, "it was not stopped and is unchanged", err)
		}
	}
	m.unwatch(e)
	if err := rt.Stop(ctx, *rec.Handle, m.opts.StopGrace); err != nil {
		e.killErr = err
		s, _ := m.update(e, func(r *record) { r.ErrorReason = "kill failed: " + provider.Message(err) })
		m.retryKill(e, reason)
		return s, provider.Errorf(provider.Internal, "sandbox %s: the workload could not be killed (%v); the daemon retries every %s", rec.ID, err, killRetry)
	}
	e.killErr = nil
	s, err := m.update(e, func(r *record) {
		r.State = provider.StateStopped
		r.Port, r.ExtraPorts = 0, nil
		r.ErrorReason = reason
		r.StopReason = ""
		r.LastActivityAt = m.clk.Now()
	}, emission{provider.EventStopped, ""}, bumped)
	if err != nil {
		// The ports stay held: the record still names them.
		return provider.Sandbox{}, notRecorded(rec.ID, "its workload ended but it stays stopping; stop it again", err)
	}
	m.forgetExit(e)
	m.releasePorts(rec)
	if m.opts.LaunchHook != nil {
		m.opts.LaunchHook.AfterExit(rec.ID)
	}
	return s, nil
}

// notRecorded explains a transition whose record could not be written.
func notRecorded(id, outcome string, err error) error {
	if provider.Code(err) != provider.Internal {
		return err // not_found for a sandbox deleted meanwhile
	}
	return &provider.Error{Code: provider.Internal, Err: err,
		Message: fmt.Sprintf("sandbox %s: %s, because its state could not be saved: %s", id, outcome, provider.Message(err))}
}

// unwatch ends the goroutine that notices e's workload exit.
func (m *Manager) unwatch(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.stopWatch != nil {
		e.stopWatch()
		e.stopWatch = nil
	}
}

// retryKill schedules another stop of e unless one is pending. The retry
// belongs to the manager: Close ends a pending one and waits for a running
// one, so nothing writes the registry after Close. The caller holds e.op.
func (m *Manager) retryKill(e *entry, reason string) {
	if e.retryPending {
		return
	}
	e.retryPending = true
	t := m.clk.NewTimer(killRetry)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer t.Stop()
		select {
		case <-m.ctx.Done():
			return
		case <-t.C():
		}
		if e.op.lock(m.ctx) != nil {
			return
		}
		defer e.op.unlock()
		e.retryPending = false
		if m.ctx.Err() != nil {
			return
		}
		if reason == reasonDeleted {
			if err := m.deleteLocked(detach(m.ctx), e); err != nil {
				m.mu.Lock()
				id := e.rec.ID
				m.mu.Unlock()
				m.log.Error("finish a delete after a kill retry", "sandbox", id, "err", err)
			}
			return
		}
		_, _ = m.stopLocked(detach(m.ctx), e, reason)
	}()
}

// Delete stops and removes the sandbox and its directory. A missing sandbox
// is not an error.
func (m *Manager) Delete(ctx context.Context, idOrName string) error {
	e, err := m.lookup(idOrName)
	if provider.IsNotFound(err) {
		return nil
	}
	if e.unreadable == nil {
		if err := m.available(e); err != nil {
			return err
		}
	}
	if err := e.op.lock(ctx); err != nil {
		return err
	}
	defer e.op.unlock()
	ctx = detach(ctx)
	m.mu.Lock()
	gone := !m.reg.has(e)
	m.mu.Unlock()
	if gone {
		return nil
	}
	if e.unreadable != nil {
		return m.deleteUnreadable(ctx, e)
	}
	return m.deleteLocked(ctx, e)
}

// reasonDeleted marks a stop that is part of a delete, so that a kill retry
// finishes the delete rather than leaving the sandbox merely stopped.
const reasonDeleted = "deleted"

// deleteLocked is Delete for a caller that holds e.op.
func (m *Manager) deleteLocked(ctx context.Context, e *entry) error {
	s, err := m.stopLocked(ctx, e, reasonDeleted)
	if err != nil {
		return err
	}
	m.mu.Lock()
	rec := e.rec
	m.mu.Unlock()
	if rec.Handle != nil {
		rt, err := m.runtimeOf(rec)
		if err != nil {
			return err
		}
		if err := rt.Remove(ctx, *rec.Handle); err != nil {
			return err
		}
	}
	// The rename into the trash is the commit point: before it the sandbox
	// is still whole, after it the sandbox is gone even if we crash.
	// Under the persist lock, so that no update that looked the sandbox up
	// earlier writes once the directory is gone.
	e.persistMu.Lock()
	trashed, err := m.trash(rec.ID)
	if err != nil {
		e.persistMu.Unlock()
		return provider.Errorf(provider.Internal, "remove sandbox directory: %w", err)
	}
	m.mu.Lock()
	m.reg.remove(e)
	m.mu.Unlock()
	// Why it is gone, whatever stopped it before: a sandbox stopped by
	// auto-stop and deleted later is deleted, not auto_stopped.
	s.State, s.ErrorReason = provider.StateDestroyed, reasonDeleted
	m.emit(provider.EventDeleted, s, "") // under the persist lock: nothing of this sandbox follows it
	e.persistMu.Unlock()
	// Outside the lock, which an activity flush of every sandbox may wait
	// for: a large workspace takes seconds to remove.
	if trashed != "" {
		if err := os.RemoveAll(trashed); err != nil {
			m.log.Warn("remove a deleted sandbox's files; the next start removes what is left", "sandbox", rec.ID, "err", err)
		}
	}
	return nil
}

// RefreshActivity resets the idle clock. It costs what a read does: the
// new time is written with the next activity flush, a twelfth of an
// interval minute later at most. not_found.
func (m *Manager) RefreshActivity(ctx context.Context, idOrName string) error {
	return m.RefreshActivityFrom(ctx, idOrName, provider.SourceRefresh)
}

// RefreshActivityFrom resets the idle clock for source, which the activity
// event carries (provider.SourceProxy for preview traffic). not_found.
func (m *Manager) RefreshActivityFrom(ctx context.Context, idOrName, source string) error {
	e, err := m.lookup(idOrName)
	if err != nil {
		return err
	}
	if err := m.available(e); err != nil {
		return err
	}
	return m.refresh(e, source)
}

// SetAutoStopInterval sets the idle minutes before auto-stop (0 disables)
// without touching the idle clock, as on Daytona.
func (m *Manager) SetAutoStopInterval(ctx context.Context, idOrName string, minutes int) (provider.Sandbox, error) {
	if minutes < 0 {
		return provider.Sandbox{}, provider.Errorf(provider.InvalidArgument, "interval must be 0 (never) or a positive number of minutes, got %d", minutes)
	}
	e, err := m.lookup(idOrName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if err := m.available(e); err != nil {
		return provider.Sandbox{}, err
	}
	return m.update(e, func(r *record) { r.AutoStopInterval = minutes }, emission{provider.EventUpdated, ""})
}

// Resize validates the request and changes nothing: a local workload has no
// resource envelope (trait ResizeIsNoop).
func (m *Manager) Resize(ctx context.Context, idOrName string, req provider.ResizeRequest) (provider.Sandbox, error) {
	if req.CPU < 0 || req.Memory < 0 || req.Disk < 0 {
		return provider.Sandbox{}, provider.Errorf(provider.InvalidArgument, "cpu, memory and disk must be positive")
	}
	return m.Get(ctx, idOrName)
}

// EntrypointLogs returns the workload's output with env values redacted.
func (m *Manager) EntrypointLogs(ctx context.Context, idOrName string) (provider.EntrypointLogs, error) {
	e, err := m.lookup(idOrName)
	if err != nil {
		return provider.EntrypointLogs{}, err
	}
	if e.unreadable != nil {
		return provider.EntrypointLogs{}, unreadableErr(idOrName, e.unreadable)
	}
	m.mu.Lock()
	rec := e.rec
	m.mu.Unlock()
	var h driver.Handle
	if rec.Handle != nil {
		h = *rec.Handle
	}
	env, err := m.readEnv(rec.ID)
	if err != nil {
		return provider.EntrypointLogs{}, provider.Errorf(provider.Internal, "read sandbox env: %w", err)
	}
	if env[TokenEnv], err = m.readToken(rec.ID); err != nil {
		return provider.EntrypointLogs{}, provider.Errorf(provider.Internal, "read sandbox token: %w", err)
	}
	rt, err := m.runtimeOf(rec)
	if err != nil {
		return provider.EntrypointLogs{}, err
	}
	stdout, stderr, err := rt.Logs(ctx, h, m.dir(rec.ID))
	if err != nil {
		return provider.EntrypointLogs{}, err
	}
	redact := redact.Env(env)
	out, errOut := redact(string(stdout)), redact(string(stderr))
	return provider.EntrypointLogs{Stdout: out, Stderr: errOut, Output: out + errOut}, nil
}

// detach keeps a lifecycle operation going when its caller goes away, so a
// disconnecting client never leaves a sandbox half-created or half-stopped.
// Every wait inside an operation is bounded by a clock timer (ReadyTimeout,
// StopGrace), so a detached operation still ends.
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

func sortSandboxes(s []provider.Sandbox) {
	sort.Slice(s, func(i, j int) bool {
		if !s[i].CreatedAt.Equal(s[j].CreatedAt) {
			return s[i].CreatedAt.Before(s[j].CreatedAt)
		}
		return s[i].ID < s[j].ID
	})
}
