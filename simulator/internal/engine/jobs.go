package engine

import (
	"math"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// JobPeriod is how often Daytona's auto-stop, auto-archive and auto-delete
// crons run, in real minutes' terms (the simulator scales it with its
// minute).
const JobPeriod = 10 * time.Second

// Job is what the crons do to one sandbox.
type Job int

const (
	NoJob Job = iota
	// StopJob stops a started sandbox idle past its auto-stop interval (an
	// ephemeral one is deleted instead).
	StopJob
	// DeleteJob deletes a stopped sandbox idle past its auto-delete interval.
	DeleteJob
	// ArchiveJob archives a stopped sandbox idle past its auto-archive
	// interval.
	ArchiveJob
	// ExpireJob destroys a sandbox past its TTL deadline, whatever its
	// state or activity.
	ExpireJob
	// PauseJob pauses a started sandbox idle past its auto-pause interval.
	PauseJob
)

// Row is what the crons read of one sandbox.
type Row struct {
	State, Desired string
	// Settled is false while anything is pending or a step runs.
	Settled bool
	// Pool marks the warm pool's sandboxes, which the crons leave alone.
	Pool         bool
	LastActivity time.Time
	// The intervals in minutes, as the API stores them: AutoStop and
	// AutoPause 0 never stop or pause, AutoDelete below 0 never deletes.
	AutoStop, AutoArchive, AutoDelete, AutoPause int
	// AutoDestroyAt is the TTL deadline; zero for none.
	AutoDestroyAt time.Time
}

// Due is the job the crons owe r at now, when a minute lasts minute. Each
// cron compares lastActivityAt with now minus its interval, and only
// considers rows that are settled: state equals desired and nothing is
// pending. Auto-delete goes before auto-archive; the API keeps auto-stop
// and auto-pause from both being set, and should a row have both, the
// stop goes first. A paused sandbox is owed nothing but its TTL. The TTL goes first of
// all, and only asks that nothing be pending: a stopped sandbox the
// auto-archive set to archive expires too.
func Due(r Row, now time.Time, minute time.Duration) Job {
	if r.Pool || !r.Settled {
		return NoJob
	}
	if !r.AutoDestroyAt.IsZero() && !now.Before(r.AutoDestroyAt) && r.Desired != WantDestroyed {
		return ExpireJob
	}
	if r.State != r.Desired {
		return NoJob
	}
	idle := func(interval int) bool {
		// Daytona's intervals reach 2^31-1 minutes, beyond what a Duration
		// holds: one that saturates never runs out.
		d := provider.IntervalDuration(interval, minute)
		return d < math.MaxInt64 && r.LastActivity.Before(now.Add(-d))
	}
	switch {
	case r.State == Started && r.AutoStop != 0 && idle(r.AutoStop):
		return StopJob
	case r.State == Started && r.AutoPause != 0 && idle(r.AutoPause):
		return PauseJob
	case r.State == Stopped && r.AutoDelete >= 0 && idle(r.AutoDelete):
		return DeleteJob
	case r.State == Stopped && idle(r.AutoArchive):
		return ArchiveJob
	}
	return NoJob
}
