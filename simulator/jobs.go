package simulator

import (
	"math"
	"time"
)

// jobPeriod is how often Daytona's auto-stop, auto-archive and auto-delete
// crons run.
const jobPeriod = 10 * time.Second

func (s *Simulator) startJobs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = s.clk.AfterFunc(s.cfg.scaled(jobPeriod), s.tick)
}

// tick runs the three jobs and re-arms itself. It runs on an AfterFunc, so
// with a fake clock the jobs have run by the time Advance returns.
func (s *Simulator) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.runJobsLocked(everyOrg)
	s.jobs = s.clk.AfterFunc(s.cfg.scaled(jobPeriod), s.tick)
}

// RunJobs runs the auto-stop, auto-archive and auto-delete jobs once, now,
// for every organization.
func (s *Simulator) RunJobs() { s.runJobs(everyOrg) }

// runJobs runs the jobs now for the sandboxes of sc only.
func (s *Simulator) runJobs(sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runJobsLocked(sc)
}

// runJobsLocked applies Daytona's three crons. Each compares lastActivityAt
// with now minus the interval, and only considers rows that are settled
// (state equals desired and nothing pending), of sc. Called with s.mu held.
func (s *Simulator) runJobsLocked(sc scope) {
	now := s.clk.Now()
	minute := s.cfg.Minute
	idle := func(sb *sandbox, interval int) bool {
		// Daytona's intervals reach 2^31-1 minutes, beyond what a Duration
		// holds: one that overflows never runs out.
		if interval > int(math.MaxInt64/minute) {
			return false
		}
		return sb.LastActivity.Before(now.Add(-time.Duration(interval) * minute))
	}
	var touched []*sandbox
	for _, sb := range s.byID {
		if sb.OrgID == warmPoolOrg || !sc.owns(sb.OrgID) || sb.Pending || sb.busy || sb.State != sb.Desired {
			continue
		}
		switch {
		case sb.State == stStarted && sb.AutoStop != 0 && idle(sb, sb.AutoStop):
			if sb.ephemeral() {
				s.softDeleteLocked(sb)
			} else {
				sb.Desired = dsStopped
				sb.Pending = true
				sb.forceStop = false
				sb.notify()
			}
			touched = append(touched, sb)
		case sb.State == stStopped && sb.AutoDelete >= 0 && idle(sb, sb.AutoDelete):
			s.softDeleteLocked(sb)
			touched = append(touched, sb)
		case sb.State == stStopped && idle(sb, sb.AutoArchive):
			// Daytona's auto-archive sets only the desired state, so the
			// sandbox shows as archiving until the archive runs.
			sb.Desired = dsArchived
			sb.notify()
			touched = append(touched, sb)
		}
	}
	for _, sb := range touched {
		s.kick(sb)
	}
}
