package manager

import (
	"errors"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// reapLoop stops idle sandboxes. Like Daytona's auto-stop job it is blind to
// the workload: idleness is the time since lastActivityAt, which only
// mutations and refresh-activity move. A sandbox busy with work that nobody
// reports stops on schedule, on purpose.
func (m *Manager) reapLoop(t clock.Ticker) {
	defer m.wg.Done()
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C():
			m.reapIdle()
		}
	}
}

// reapIdle stops every idle sandbox and deletes every one stopped past its
// auto-delete interval, concurrently, and returns when all are done; ticks
// that arrive meanwhile are dropped, which only delays the next look.
func (m *Manager) reapIdle() {
	now := m.clk.Now()
	var wg sync.WaitGroup
	for _, e := range m.entries() {
		m.mu.Lock()
		idle, expired := m.idle(e.rec, now), m.expired(e.rec, now)
		m.mu.Unlock()
		switch {
		case idle:
			wg.Go(func() { m.autoStop(e) })
		case expired:
			wg.Go(func() { m.autoDelete(e) })
		}
	}
	wg.Wait()
}

// expired reports whether r is a stopped sandbox past its auto-delete
// interval. As on Daytona the clock is lastActivityAt, which reaching
// stopped moves, so the interval runs from the stop or the last refresh.
func (m *Manager) expired(r *record, now time.Time) bool {
	if r.State != provider.StateStopped || r.AutoDeleteInterval == nil {
		return false
	}
	return now.Sub(r.LastActivityAt) >= provider.IntervalDuration(*r.AutoDeleteInterval, m.opts.Minute)
}

// autoDelete deletes e if it is still expired once no operation holds it:
// a start or a refresh meanwhile saves it.
func (m *Manager) autoDelete(e *entry) {
	if e.op.lock(m.ctx) != nil {
		return
	}
	defer e.op.unlock()
	m.mu.Lock()
	expired := m.reg.has(e) && m.expired(e.rec, m.clk.Now())
	id := e.rec.ID
	m.mu.Unlock()
	if !expired {
		return
	}
	if err := m.deleteLocked(detach(m.ctx), e); err != nil {
		m.log.Error("auto-delete", "sandbox", id, "err", err)
		return
	}
	m.log.Info("auto-deleted", "sandbox", id)
}

// idle reports whether r is a started sandbox past its auto-stop interval.
// A starting sandbox is never idle.
func (m *Manager) idle(r *record, now time.Time) bool {
	if r.State != provider.StateStarted || r.AutoStopInterval <= 0 {
		return false
	}
	return now.Sub(r.LastActivityAt) >= provider.IntervalDuration(r.AutoStopInterval, m.opts.Minute)
}

func (m *Manager) autoStop(e *entry) {
	// Whatever operation holds the lock may be activity, so idleness is
	// judged again once it is done.
	if e.op.lock(m.ctx) != nil {
		return
	}
	defer e.op.unlock()
	m.mu.Lock()
	rec := e.rec
	idle := m.reg.has(e) && m.idle(rec, m.clk.Now())
	m.mu.Unlock()
	if !idle {
		return
	}
	// Judged again where the stop is recorded, under the lock a refresh
	// takes: one that came since counts, and a refresh answered before the
	// stop never sees its sandbox auto-stopped.
	_, err := m.commitIf(e, nil, func(cur *record) error {
		if !m.idle(cur, m.clk.Now()) {
			return errActiveAgain
		}
		return nil
	}, func(r *record) { r.State, r.StopReason = provider.StateStopping, provider.ErrorReasonAutoStopped }, true)
	switch {
	case errors.Is(err, errActiveAgain):
		return
	case err != nil:
		m.log.Error("auto-stop", "sandbox", rec.ID, "err", notRecorded(rec.ID, "it was not stopped and is unchanged", err))
		return
	}
	// Detached: a Close arriving mid-kill waits for it (bounded by
	// StopGrace) instead of failing it into a spurious "kill failed".
	if _, err := m.stopLocked(detach(m.ctx), e, provider.ErrorReasonAutoStopped); err != nil {
		m.log.Error("auto-stop", "sandbox", rec.ID, "err", err)
	}
}

// errActiveAgain: a sandbox found idle was refreshed before its stop was
// recorded.
var errActiveAgain = errors.New("active again")
