package simulator

import (
	"context"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/cost"
	"github.com/sandplane/sandplane/simulator/internal/engine"
)

// reconciler moves sandboxes through their transitions, keeps the warm
// pools filled (warmpools.go), and runs the auto-stop, auto-archive and auto-delete jobs
// (jobs.go), over the simulator's store and backend. The lifecycle itself
// (which step comes next, how long it takes, which job is due, running a
// step on the clock) is internal/engine's; the reconciler applies it to
// the records.
type reconciler struct{ *Simulator }

// step is the next move of one sandbox: engine's Step with the backend's
// part bound to the sandbox.
type step struct {
	engine.Step
	// work returns the toolbox URL when it started a workload; nil for
	// none.
	work func(ctx context.Context) (string, error)
	// network is the network settings a start applies, as they were when
	// it was planned.
	network NetworkPolicy
}

func (st step) startsWorkload() bool { return st.Work == engine.Start }
func (st step) builds() bool         { return st.Work == engine.Build }

// plan picks the next step towards the desired state. Called with s.mu held.
func (s reconciler) plan(sb *sandbox) (step, bool) {
	next, ok := engine.Plan(sb.State, sb.Desired, s.cfg.Profile)
	if !ok {
		return step{}, false
	}
	st := step{Step: next}
	id := sb.ID
	switch next.Work {
	case engine.Remove:
		st.work = func(ctx context.Context) (string, error) { return "", s.backend.Remove(ctx, id) }
	case engine.Build:
		st.work = s.buildWork(sb)
	case engine.Start:
		w := s.workloadLocked(sb)
		st.network = w.Network
		st.work = func(ctx context.Context) (string, error) { return s.backend.Start(ctx, w) }
	case engine.Stop:
		force := sb.forceStop
		st.work = func(ctx context.Context) (string, error) { return "", s.backend.Stop(ctx, id, force) }
	case engine.Pause, engine.Resume:
		st.work = s.freezeWork(id, next.Work == engine.Pause)
	}
	return st, true
}

// freezeWork pauses or resumes the sandbox's workload where the backend
// can; elsewhere (the none backend) a pause is a change of state only.
func (s reconciler) freezeWork(id string, pause bool) func(ctx context.Context) (string, error) {
	pb, ok := s.backend.(PauseBackend)
	if !ok {
		return nil
	}
	if pause {
		return func(ctx context.Context) (string, error) { return "", pb.Pause(ctx, id) }
	}
	return func(ctx context.Context) (string, error) { return "", pb.Resume(ctx, id) }
}

// kick moves sb towards its desired state as far as it can go right now.
// Called with s.mu held.
func (s reconciler) kick(sb *sandbox) {
	for !sb.busy && !sb.gone && !s.closed {
		st, ok := s.plan(sb)
		if !ok {
			return
		}
		if !s.begin(sb, st) {
			return
		}
	}
}

// begin starts st. It reports whether st already completed, so that kick
// can take the next step at once; a step that completes later takes the
// next one itself. Called with s.mu held.
func (s reconciler) begin(sb *sandbox, st step) (done bool) {
	sb.busy = true
	sb.gen++
	gen := sb.gen
	if st.Via != "" {
		sb.setState(s.clk, st.Via)
	}
	var fail *failure
	if (st.startsWorkload() || st.builds()) && sb.failNext != nil {
		fail, sb.failNext = sb.failNext, nil
	}
	return s.runner().Begin(st.Delay.Draw(s.rng), st.work, func(res engine.Result) {
		s.finish(sb, st, gen, res.URL, res.Err, fail)
		if res.Later {
			s.kick(sb)
		}
	})
}

// runner runs steps under the store's lock, inline when the backend's work
// is free.
func (s reconciler) runner() engine.Runner {
	return engine.Runner{Clock: s.clk, Lock: &s.mu, Inline: s.syncWork, Ctx: s.bg, WG: &s.wg}
}

// finish lands a step, unless the sandbox moved on without it. Called with
// s.mu held.
func (s reconciler) finish(sb *sandbox, st step, gen uint64, url string, err error, fail *failure) {
	if sb.gen != gen || sb.gone {
		return
	}
	sb.busy = false
	if s.closed {
		return
	}
	if err == nil && fail != nil {
		if st.work != nil && url != "" && !s.syncWork {
			id := sb.ID
			s.goBackground(func(ctx context.Context) { _ = s.backend.Stop(ctx, id, true) })
		}
		url = ""
	}
	if err != nil || fail != nil {
		reason := ""
		if fail != nil {
			reason = fail.Reason
			sb.Recoverable = fail.Recoverable
		} else {
			reason = err.Error()
			s.cfg.Logger.Warn("sandbox workload failed", "sandbox", sb.ID, "step", st.To, "err", err)
		}
		sb.ErrorReason = &reason
		sb.toolboxURL = ""
		s.poolFailedLocked(sb, reason)
		if st.builds() {
			sb.setState(s.clk, stBuildFailed)
		} else {
			sb.setState(s.clk, stError)
		}
		return
	}
	switch st.To {
	case stUnknown:
		if st.builds() {
			sb.imageRef = url
		}
	case stStarted:
		sb.ErrorReason = nil
		if st.Work == engine.Resume {
			// The same workload runs on, at the same toolbox.
			break
		}
		sb.toolboxURL = url
		if sb.policy() != st.network {
			// Changed while the workload started, which applied the
			// settings it was planned with.
			id := sb.ID
			s.goBackground(func(ctx context.Context) { _, _ = s.enforceNetwork(ctx, id) })
		}
		runner := "sandplane-sim-runner"
		daemon := "sandplane-sim"
		sb.RunnerID, sb.DaemonVersion = &runner, &daemon
	case stStopped, stArchived:
		sb.toolboxURL = ""
	}
	sb.setState(s.clk, st.To)
	if st.To == stDestroyed {
		sb.gone = true
		s.forgetSecretsLocked(sb.ID)
		s.rows.Drop(sb)
		sb.notify()
		s.leavePoolLocked(sb)
	}
}

// waitStarted holds a create or start request until sb is started, errored
// or gone, for at most d on the clock, like the API's 30 s wait, or until
// the simulator closes. A start
// failure inside the window is Daytona's 400.
func (s reconciler) waitStarted(ctx context.Context, sb *sandbox, d time.Duration) *apiError {
	var timer interface{ Stop() bool }
	var expired <-chan time.Time
	for {
		s.mu.Lock()
		switch {
		case sb.State == stStarted, sb.gone:
			s.mu.Unlock()
			return nil
		case sb.errored():
			reason := ""
			if sb.ErrorReason != nil {
				reason = *sb.ErrorReason
			}
			s.mu.Unlock()
			return errorf(400, "Sandbox failed to start: %s", reason)
		}
		ch := sb.changed
		s.mu.Unlock()
		if expired == nil {
			t := s.clk.NewTimer(d)
			timer, expired = t, t.C()
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-expired:
			return nil
		case <-ctx.Done():
			return nil
		case <-s.bg.Done():
			return nil
		}
	}
}

// newSandboxLocked builds a row as Daytona inserts it: unknown, desired
// started, pending.
func (s reconciler) newSandboxLocked(org, name string, snap Snapshot) *sandbox {
	now := s.clk.Now()
	id := s.newID()
	if name == "" {
		name = id
	}
	snapName := snap.Name
	sb := &sandbox{
		ID: id, OrgID: org, Name: name,
		Snapshot:    &snapName,
		User:        "daytona",
		Env:         map[string]string{},
		Labels:      map[string]string{},
		Target:      s.cfg.Regions[0],
		CPU:         snap.CPU,
		GPU:         snap.GPU,
		Memory:      snap.Memory,
		Disk:        snap.Disk,
		State:       stUnknown,
		Desired:     dsStarted,
		Pending:     true,
		BackupState: "None",
		AutoStop:    15,
		AutoArchive: 10080,
		AutoDelete:  -1,
		Volumes:     []volume{},
		CreatedAt:   now,
		UpdatedAt:   now,
		// Daytona inserts the activity row with createdAt.
		LastActivity: now,
		AuthToken:    newToken(32, authTokenAlphabet),
		changed:      make(chan struct{}),
		events:       s.events,
		sim:          s.Simulator,
	}
	sb.ledger = &cost.Ledger{ID: id, OrgID: org, Name: name, CPU: sb.CPU, Memory: sb.Memory, Disk: sb.Disk}
	s.costs.Open(sb.ledger, now, cost.None)
	return sb
}
