package simulator

import (
	"time"

	"github.com/sandplane/sandplane/simulator/internal/engine"
)

// startJobs runs Daytona's crons (auto-stop, auto-pause, auto-archive,
// auto-delete and the TTL) every engine.JobPeriod (scaled
// with the minute) until Close.
func (s reconciler) startJobs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopJobs = engine.Every(s.clk, s.cfg.scaled(engine.JobPeriod), func() { s.runJobs(everyOrg) })
}

// RunJobs runs the auto-stop, auto-archive and auto-delete jobs once, now,
// for every organization.
func (s *Simulator) RunJobs() { s.eng.runJobs(everyOrg) }

// runJobs applies Daytona's three crons, now, to the sandboxes of sc. It
// looks for the sandboxes they reach under the lock shared, beside gets
// and lists, and takes it exclusively only to act on those, checking each
// again: it may have moved on in between.
func (s reconciler) runJobs(sc scope) {
	now := s.clk.Now()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return
	}
	var due []*sandbox
	for sb := range s.rows.All() {
		if sc.owns(sb.OrgID) && s.jobFor(sb, now) != engine.NoJob {
			due = append(due, sb)
		}
	}
	s.mu.RUnlock()
	if len(due) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	var touched []*sandbox
	for _, sb := range due {
		if s.runJobLocked(sb, now) {
			touched = append(touched, sb)
		}
	}
	for _, sb := range touched {
		s.kick(sb)
	}
}

// jobFor is the job the crons owe sb at now (engine.Due). Called with s.mu
// held (shared is enough).
func (s reconciler) jobFor(sb *sandbox, now time.Time) engine.Job {
	return engine.Due(engine.Row{
		State: sb.State, Desired: sb.Desired,
		Settled:      !sb.Pending && !sb.busy,
		Pool:         sb.pool != nil,
		LastActivity: sb.LastActivity,
		AutoStop:     sb.AutoStop, AutoArchive: sb.AutoArchive, AutoDelete: sb.AutoDelete, AutoPause: sb.AutoPause,
		AutoDestroyAt: sb.autoDestroyAt(),
	}, now, s.cfg.Minute)
}

// runJobLocked does the job the crons owe sb at now, if any, and reports
// whether it did one. Called with s.mu held.
func (s reconciler) runJobLocked(sb *sandbox, now time.Time) bool {
	switch s.jobFor(sb, now) {
	case engine.StopJob:
		if sb.ephemeral() {
			s.softDeleteLocked(sb)
		} else {
			sb.Desired = dsStopped
			sb.Pending = true
			sb.forceStop = false
			sb.notify()
		}
	case engine.PauseJob:
		s.pauseLocked(sb)
	case engine.DeleteJob:
		s.softDeleteLocked(sb)
	case engine.ExpireJob:
		// As a delete: the sandbox goes, and what links to it with it.
		s.softDeleteLocked(sb)
		s.cascadeDeleteLocked(sb)
	case engine.ArchiveJob:
		// Daytona's auto-archive sets only the desired state, so the
		// sandbox shows as archiving until the archive runs.
		sb.Desired = dsArchived
		sb.notify()
	default:
		return false
	}
	return true
}
