package engine

// Work is the backend's part of a step.
type Work int

const (
	// NoWork is a step that only takes time, such as an archive.
	NoWork Work = iota
	// Build builds the sandbox's image; its failure is build_failed.
	Build
	// Start runs the workload; injected start failures land on it.
	Start
	// Stop ends the workload and keeps its files.
	Stop
	// Remove deletes the workload and everything it had.
	Remove
	// Pause freezes the running workload, which keeps its memory.
	Pause
	// Resume lets a paused workload run on.
	Resume
)

// Step is one move towards the desired state: the raw state shows Via
// (unless empty) while the step runs, then To. A step completes when both
// its delay has passed and its Work has returned.
type Step struct {
	Via, To string
	Delay   Range
	Work    Work
}

// Plan picks the next step of a sandbox in state towards desired, with the
// delays of p. It reports false when there is none: the sandbox is settled,
// or errored and not asked to be destroyed, or in a state from which
// desired is not reached (a stopped sandbox asked to stop, say).
func Plan(state, desired string, p Profile) (Step, bool) {
	if state == desired || Errored(state) && desired != WantDestroyed {
		return Step{}, false
	}
	switch desired {
	case WantDestroyed:
		return planDestroy(state, p)
	case WantStarted:
		return planStart(state, p)
	case WantPaused:
		if state == Started || state == Pausing {
			return Step{Via: Pausing, To: Paused, Delay: p.Pause, Work: Pause}, true
		}
	case WantStopped:
		// A paused sandbox stops as a started one does: the backend thaws
		// it first.
		if state == Started || state == Stopping || state == Paused {
			return Step{Via: Stopping, To: Stopped, Delay: p.Stop, Work: Stop}, true
		}
	case WantArchived:
		if state == Stopped || state == Archiving {
			return Step{Via: Archiving, To: Archived, Delay: p.Archive}, true
		}
	}
	return Step{}, false
}

// planDestroy passes through destroying from the states that have a
// workload to end; the others (error, build_failed, archived,
// pending_build) go straight to destroyed.
func planDestroy(state string, p Profile) (Step, bool) {
	switch state {
	case Started, Stopped, Paused, Destroying:
		return Step{Via: Destroying, To: Destroyed, Delay: p.Destroy, Work: Remove}, true
	case Destroyed:
		return Step{}, false
	}
	return Step{To: Destroyed, Delay: p.Destroy, Work: Remove}, true
}

// planStart builds first when the snapshot is still to be built, and
// otherwise starts through the state that says where the sandbox comes
// from: creating, starting or restoring.
func planStart(state string, p Profile) (Step, bool) {
	switch state {
	case PendingBuild:
		return Step{Via: BuildingSnapshot, To: Unknown, Delay: p.Build, Work: Build}, true
	case Unknown, Creating:
		return Step{Via: Creating, To: Started, Delay: p.Create, Work: Start}, true
	case Stopped, Starting:
		return Step{Via: Starting, To: Started, Delay: p.Start, Work: Start}, true
	case Archived, Restoring:
		return Step{Via: Restoring, To: Started, Delay: p.Restore, Work: Start}, true
	case Paused, Resuming:
		return Step{Via: Resuming, To: Started, Delay: p.Resume, Work: Resume}, true
	}
	return Step{}, false
}
