package simulator

import (
	"context"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/cost"
)

// engine moves sandboxes through their transitions on the clock, keeps the
// warm pool filled, and runs the auto-stop, auto-archive and auto-delete
// jobs (jobs.go), over the simulator's store and backend.
type engine struct{ *Simulator }

// step is one move of the reconciler: the raw state shows via while the
// step runs, then to. work is the backend's part; a step completes when both
// its delay has passed and its work has returned.
type step struct {
	via   string
	to    string
	delay Range
	// work returns the toolbox URL when it started a workload.
	work func(ctx context.Context) (string, error)
	// startsWorkload marks steps towards started, where injected start
	// failures land.
	startsWorkload bool
	// builds marks the image build, whose failure is build_failed.
	builds bool
	// network is the network settings a start applies, as they were when
	// it was planned.
	network NetworkPolicy
}

// plan picks the next step towards the desired state. Called with s.mu held.
func (s engine) plan(sb *sandbox) (step, bool) {
	if sb.State == sb.Desired || sb.errored() && sb.Desired != dsDestroyed {
		return step{}, false
	}
	p := s.cfg.Profile
	id := sb.ID
	switch sb.Desired {
	case dsDestroyed:
		remove := func(ctx context.Context) (string, error) { return "", s.backend.Remove(ctx, id) }
		switch sb.State {
		case stStarted, stStopped, stDestroying:
			return step{via: stDestroying, to: stDestroyed, delay: p.Destroy, work: remove}, true
		case stDestroyed:
			return step{}, false
		}
		// error, build_failed, archived, pending_build: straight to
		// destroyed, with no destroying in between.
		return step{to: stDestroyed, delay: p.Destroy, work: remove}, true
	case dsStarted:
		w := s.workloadLocked(sb)
		start := func(ctx context.Context) (string, error) { return s.backend.Start(ctx, w) }
		switch sb.State {
		case stPendingBuild:
			return step{via: stBuildingSnapshot, to: stUnknown, delay: p.Build, builds: true, work: s.buildWork(sb)}, true
		case stUnknown, stCreating:
			return step{via: stCreating, to: stStarted, delay: p.Create, work: start, startsWorkload: true, network: w.Network}, true
		case stStopped, stStarting:
			return step{via: stStarting, to: stStarted, delay: p.Start, work: start, startsWorkload: true, network: w.Network}, true
		case stArchived, stRestoring:
			return step{via: stRestoring, to: stStarted, delay: p.Restore, work: start, startsWorkload: true, network: w.Network}, true
		}
	case dsStopped:
		if sb.State == stStarted || sb.State == stStopping {
			force := sb.forceStop
			stop := func(ctx context.Context) (string, error) { return "", s.backend.Stop(ctx, id, force) }
			return step{via: stStopping, to: stStopped, delay: p.Stop, work: stop}, true
		}
	case dsArchived:
		if sb.State == stStopped || sb.State == stArchiving {
			return step{via: stArchiving, to: stArchived, delay: p.Archive}, true
		}
	}
	return step{}, false
}

// kick moves sb towards its desired state as far as it can go right now.
// Called with s.mu held.
func (s engine) kick(sb *sandbox) {
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
// can take the next step at once. Called with s.mu held.
func (s engine) begin(sb *sandbox, st step) (done bool) {
	sb.busy = true
	sb.gen++
	gen := sb.gen
	if st.via != "" {
		sb.setState(s.clk, st.via)
	}
	var fail *failure
	if (st.startsWorkload || st.builds) && sb.failNext != nil {
		fail, sb.failNext = sb.failNext, nil
	}
	delay := st.delay.draw(s.rng)
	if delay <= 0 && (st.work == nil || s.syncWork) {
		var url string
		var err error
		if st.work != nil {
			url, err = st.work(s.bg)
		}
		s.finish(sb, st, gen, url, err, fail)
		return true
	}

	// Both halves report here; the last one finishes the step.
	remaining := 1
	var url string
	var werr error
	complete := func() {
		remaining--
		if remaining == 0 {
			s.finish(sb, st, gen, url, werr, fail)
			s.kick(sb)
		}
	}
	if delay > 0 {
		remaining++
		s.clk.AfterFunc(delay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			complete()
		})
	}
	if st.work != nil && !s.syncWork {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			u, err := st.work(s.bg)
			s.mu.Lock()
			defer s.mu.Unlock()
			url, werr = u, err
			complete()
		}()
	} else {
		if st.work != nil {
			url, werr = st.work(s.bg)
		}
		complete()
	}
	return false
}

// finish lands a step, unless the sandbox moved on without it. Called with
// s.mu held.
func (s engine) finish(sb *sandbox, st step, gen uint64, url string, err error, fail *failure) {
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
			s.cfg.Logger.Warn("sandbox workload failed", "sandbox", sb.ID, "step", st.to, "err", err)
		}
		sb.ErrorReason = &reason
		sb.toolboxURL = ""
		if st.builds {
			sb.setState(s.clk, stBuildFailed)
		} else {
			sb.setState(s.clk, stError)
		}
		return
	}
	switch st.to {
	case stUnknown:
		if st.builds {
			sb.imageRef = url
		}
	case stStarted:
		sb.ErrorReason = nil
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
	sb.setState(s.clk, st.to)
	if st.to == stDestroyed {
		sb.gone = true
		s.rows.Drop(sb)
		sb.notify()
	}
	if sb.OrgID == warmPoolOrg && sb.State == stStarted {
		s.pool = append(s.pool, sb)
	}
}

// waitStarted holds a create or start request until sb is started, errored
// or gone, for at most d on the clock, like the API's 30 s wait, or until
// the simulator closes. A start
// failure inside the window is Daytona's 400.
func (s engine) waitStarted(ctx context.Context, sb *sandbox, d time.Duration) *apiError {
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

// fillPoolLocked tops the warm pool up to its size. Called with s.mu held.
func (s engine) fillPoolLocked() {
	if s.cfg.WarmPool <= 0 || s.closed {
		return
	}
	// The pool's sandboxes, started or still starting, are the indexed
	// rows of its organization.
	for n := s.rows.Count(warmPoolOrg); n < s.cfg.WarmPool; n++ {
		snap := s.snapshots[s.cfg.DefaultSnapshot]
		sb := s.newSandboxLocked(warmPoolOrg, "", snap)
		s.rows.Insert(sb)
		s.kick(sb)
	}
}

// takePoolLocked hands a warm sandbox over, or returns nil.
func (s engine) takePoolLocked() *sandbox {
	for len(s.pool) > 0 {
		sb := s.pool[0]
		s.pool = s.pool[1:]
		if sb.gone || sb.State != stStarted {
			continue
		}
		s.rows.Drop(sb)
		return sb
	}
	return nil
}

// newSandboxLocked builds a row as Daytona inserts it: unknown, desired
// started, pending.
func (s engine) newSandboxLocked(org, name string, snap Snapshot) *sandbox {
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
		AuthToken:    s.token(32, authTokenAlphabet),
		changed:      make(chan struct{}),
		events:       s.events,
		sim:          s.Simulator,
	}
	sb.ledger = &cost.Ledger{ID: id, OrgID: org, Name: name, CPU: sb.CPU, Memory: sb.Memory, Disk: sb.Disk}
	s.costs.Open(sb.ledger, now, cost.None)
	return sb
}
