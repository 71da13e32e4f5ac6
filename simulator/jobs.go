package simulator

import (
	"math"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// jobPeriod is how often Daytona's auto-stop, auto-archive and auto-delete
// crons run.
const jobPeriod = 10 * time.Second

func (s engine) startJobs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = s.clk.AfterFunc(s.cfg.scaled(jobPeriod), s.tick)
}

// tick runs the three jobs and re-arms itself. It runs on an AfterFunc, so
// with a fake clock the jobs have run by the time Advance returns.
func (s engine) tick() {
	s.runJobs(everyOrg)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.jobs = s.clk.AfterFunc(s.cfg.scaled(jobPeriod), s.tick)
	}
}

// RunJobs runs the auto-stop, auto-archive and auto-delete jobs once, now,
// for every organization.
func (s *Simulator) RunJobs() { s.eng.runJobs(everyOrg) }

// runJobs applies Daytona's three crons, now, to the sandboxes of sc. It
// looks for the sandboxes they reach under the lock shared, beside gets
// and lists, and takes it exclusively only to act on those, checking each
// again: it may have moved on in between.
func (s engine) runJobs(sc scope) {
	now := s.clk.Now()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return
	}
	var due []*sandbox
	for sb := range s.rows.All() {
		if sc.owns(sb.OrgID) && s.jobFor(sb, now) != jobNone {
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

// job is what the crons do to one sandbox.
type job int

const (
	jobNone job = iota
	jobStop
	jobDelete
	jobArchive
)

// jobFor is the job the crons owe sb at now. Each compares lastActivityAt
// with now minus the interval, and only considers rows that are settled
// (state equals desired and nothing pending). Called with s.mu held
// (shared is enough).
func (s engine) jobFor(sb *sandbox, now time.Time) job {
	idle := func(interval int) bool {
		// Daytona's intervals reach 2^31-1 minutes, beyond what a Duration
		// holds: one that saturates never runs out.
		d := provider.IntervalDuration(interval, s.cfg.Minute)
		return d < math.MaxInt64 && sb.LastActivity.Before(now.Add(-d))
	}
	if sb.OrgID == warmPoolOrg || sb.Pending || sb.busy || sb.State != sb.Desired {
		return jobNone
	}
	switch {
	case sb.State == stStarted && sb.AutoStop != 0 && idle(sb.AutoStop):
		return jobStop
	case sb.State == stStopped && sb.AutoDelete >= 0 && idle(sb.AutoDelete):
		return jobDelete
	case sb.State == stStopped && idle(sb.AutoArchive):
		return jobArchive
	}
	return jobNone
}

// runJobLocked does the job the crons owe sb at now, if any, and reports
// whether it did one. Called with s.mu held.
func (s engine) runJobLocked(sb *sandbox, now time.Time) bool {
	switch s.jobFor(sb, now) {
	case jobStop:
		if sb.ephemeral() {
			s.softDeleteLocked(sb)
		} else {
			sb.Desired = dsStopped
			sb.Pending = true
			sb.forceStop = false
			sb.notify()
		}
	case jobDelete:
		s.softDeleteLocked(sb)
	case jobArchive:
		// Daytona's auto-archive sets only the desired state, so the
		// sandbox shows as archiving until the archive runs.
		sb.Desired = dsArchived
		sb.notify()
	default:
		return false
	}
	return true
}
