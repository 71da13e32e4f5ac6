package manager

import (
	"context"
	"time"

	"github.com/sandplane/sandplane/internal/redact"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/provider"
)

// spawn launches e's workload on a fresh port (its last one when free) and
// waits until it is ready. The handle is recorded as soon as it exists so
// that a crash from then on finds the workload; then what up makes of that
// record is prepared (see prepare) while the workload starts, for the
// caller to commit once it is up. On error nothing runs, nothing is
// prepared, and the port is free again. The caller holds e.op.
func (m *Manager) spawn(ctx context.Context, e *entry, snap Snapshot, up func(r *record)) (*prepared, error) {
	m.mu.Lock()
	rec := e.rec.clone()
	m.mu.Unlock()
	env, err := m.workloadEnv(rec.ID)
	if err != nil {
		return nil, err
	}
	j := &spawnJob{m: m, e: e, rec: rec, snap: snap, env: env, up: up, declared: snap.declared()}
	if _, err := m.launchers[rec.Runtime].Launch(ctx, j.request()); err != nil {
		j.next.discard()
		return nil, err
	}
	return j.next, nil
}

// spawnJob is one spawn: what it launches, and what the launcher's hooks
// learn on the way (the host ports, the prepared record).
type spawnJob struct {
	m        *Manager
	e        *entry
	rec      *record // a copy of e's record before the spawn
	snap     Snapshot
	env      map[string]string // the sandbox's own, with its token
	up       func(r *record)
	declared []int // the snapshot's ports inside the sandbox, workload first

	extra map[int]int // the host ports of the declared ports but the first
	addr  string      // their address (record.HostIP)
	next  *prepared
}

// request is the launch of j's workload.
func (j *spawnJob) request() launcher.Request {
	command := j.snap.Command
	if j.rec.Runtime == provider.RuntimeDocker {
		command = j.snap.ImageCommand // the image brings its own
	}
	prefer := cloneInts(j.rec.LastExtraPorts)
	if prefer == nil {
		prefer = map[int]int{}
	}
	prefer[j.declared[0]] = j.rec.LastPort
	return launcher.Request{
		Spec: driver.Spec{
			SandboxID: j.rec.ID,
			Root:      j.m.opts.Root,
			Dir:       j.m.dir(j.rec.ID),
			Command:   append([]string(nil), command...),
			Image:     j.snap.Image,
			WorkDir:   j.snap.WorkDir,
			User:      j.snap.User,
			Labels:    cloneMap(j.rec.Labels),
			Isolation: j.snap.Isolation,
			Network:   j.snap.Network,
			CPU:       j.rec.CPU,
			MemoryGiB: j.rec.Memory,
			Ran:       j.rec.Handle != nil,
		},
		PreferPort:   j.rec.LastPort,
		SandboxPorts: j.declared,
		PreferPorts:  prefer,
		Ready:        readiness(j.snap.Ready),
		Prepare:      j.prepare,
		Record:       j.record,
		Undo:         j.undo,
		Redact:       redact.Env(j.env),
	}
}

// prepare completes the spec once the launcher has chosen its ports: the
// environment, the host ports of the extra declared ports, and the launch
// hook's say.
func (j *spawnJob) prepare(ctx context.Context, spec *driver.Spec) error {
	base := j.m.opts.BaseEnv
	if j.rec.Runtime == provider.RuntimeDocker {
		base = nil // the image brings its own
	}
	// The launcher adds PORT and PORT_<port>, which only it sets.
	spec.Env = spawnEnv(base, j.env)
	j.addr = ""
	if spec.HostIP.IsValid() {
		j.addr = spec.HostIP.String()
	}
	j.extra = nil
	for _, pm := range spec.ExtraPorts {
		if j.extra == nil {
			j.extra = map[int]int{}
		}
		j.extra[pm.Sandbox] = pm.Host
	}
	hook := j.m.opts.LaunchHook
	if hook == nil {
		return nil
	}
	if err := hook.BeforeSpawn(ctx, spec); err != nil {
		return provider.Errorf(provider.CreateFailed, "launch hook refused the spawn: %v", err)
	}
	return nil
}

// record writes the workload's handle and ports the moment it exists, then
// prepares what up makes of the record.
//
// On disk before anything waits for the workload, so that a daemon killed
// now finds it. Not durable against a machine crash: the write of the state
// that follows is (but for a native start's, whose loss changes nothing: see
// startDurable), and until it the record says the sandbox is not started
// yet, so a machine crash before it rolls a create back, and the workload,
// marked with the root, is an orphan.
func (j *spawnJob) record(h driver.Handle, port int) error {
	if _, err := j.m.write(j.e, func(r *record) {
		r.Handle = &h
		r.Port, r.LastPort, r.SandboxPort = port, port, j.declared[0]
		r.ExtraPorts, r.LastExtraPorts = cloneInts(j.extra), cloneInts(j.extra)
		r.HostIP = j.addr
	}, false); err != nil {
		return err
	}
	j.next = j.m.prepare(j.e, j.up)
	return nil
}

// undo tells the launch hook that a workload it let spawn is gone.
func (j *spawnJob) undo() {
	if hook := j.m.opts.LaunchHook; hook != nil {
		hook.AfterExit(j.rec.ID)
	}
}

// workloadEnv is the sandbox's own environment with its token: the token
// joins it so that neither the daemon's env nor a snapshot's can replace it
// and every redaction of env values hides it.
func (m *Manager) workloadEnv(id string) (map[string]string, error) {
	env, err := m.readEnv(id)
	if err != nil {
		return nil, provider.Errorf(provider.Internal, "read sandbox env: %w", err)
	}
	if env[TokenEnv], err = m.sandboxToken(id); err != nil {
		return nil, provider.Errorf(provider.Internal, "sandbox token: %w", err)
	}
	return env, nil
}

// runtimeOf returns the runtime a sandbox was created on. A daemon restarted
// without it (docker disabled, say) keeps the sandbox as recorded but cannot
// act on it. unavailable.
func (m *Manager) runtimeOf(r *record) (driver.Driver, error) {
	if rt, ok := m.opts.Runtimes[r.Runtime]; ok {
		return rt, nil
	}
	return nil, provider.Errorf(provider.Unavailable,
		"sandbox %s runs on the %s runtime, which is not enabled on this daemon (enabled: %v): restart the daemon with %s available", r.ID, r.Runtime, m.Runtimes(), r.Runtime)
}

// discard kills and removes a workload that never became a started sandbox.
func (m *Manager) discard(rt driver.Driver, h driver.Handle) {
	m.launcherOf(rt).Discard(h)
}

// end kills and removes a workload no sandbox keeps. An error means it may
// still run; a failed removal of what is left is only logged.
func (m *Manager) end(rt driver.Driver, h driver.Handle) error {
	return m.launcherOf(rt).End(context.Background(), h)
}

// launcherOf is the launcher of driver rt.
func (m *Manager) launcherOf(rt driver.Driver) *launcher.Launcher {
	for _, l := range m.launchers {
		if l.Driver() == rt {
			return l
		}
	}
	panic("manager: a driver that is not among Options.Runtimes")
}

// abandon ends the workload of a create that cannot be recorded as started,
// with the port and the launch hook that went with it.
func (m *Manager) abandon(e *entry) {
	m.mu.Lock()
	rec := e.rec.clone()
	m.mu.Unlock()
	if rec.Handle != nil {
		m.discard(m.opts.Runtimes[rec.Runtime], *rec.Handle)
	}
	m.releasePorts(rec)
	if hook := m.opts.LaunchHook; hook != nil {
		hook.AfterExit(rec.ID)
	}
}

// watch notices the workload's exit without anyone reading the sandbox:
// the driver's signal (a pidfd, a container's wait) settles the state, so
// reads never ask the workload.
func (m *Manager) watch(e *entry) {
	m.mu.Lock()
	rec := e.rec
	if rec.Handle == nil {
		m.mu.Unlock()
		return
	}
	h := *rec.Handle
	ctx, cancel := context.WithCancel(m.ctx)
	if e.stopWatch != nil {
		e.stopWatch()
	}
	e.stopWatch = cancel
	m.mu.Unlock()
	rt := m.opts.Runtimes[rec.Runtime]
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		exit, err := m.waitFor(ctx, rt, h, rec.ID)
		if err != nil {
			return // cancelled: someone else is handling this workload
		}
		m.noteExit(e, h, exit.Reason)
		if e.op.lock(ctx) != nil {
			return
		}
		defer e.op.unlock()
		m.markExited(e, h, exit.Reason)
	}()
}

// Bounds of the pause before a watch asks its driver again.
const (
	watchRetryMin = time.Second
	watchRetryMax = 30 * time.Second
)

// waitFor waits until the workload behind h ends. A driver error (an
// engine that went away, a process table that cannot be read) is not an
// end: the signal was lost, so the wait starts again on the clock, and a
// workload that ended meanwhile is found at once. Only ctx's end stops it.
func (m *Manager) waitFor(ctx context.Context, rt driver.Driver, h driver.Handle, id string) (driver.Exit, error) {
	pause := watchRetryMin
	for {
		exit, err := rt.Wait(ctx, h)
		if err == nil {
			return exit, nil
		}
		if ctx.Err() != nil {
			return driver.Exit{}, ctx.Err()
		}
		m.log.Warn("lost track of a workload; asking its runtime again", "sandbox", id, "in", pause, "err", err)
		t := m.clk.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return driver.Exit{}, ctx.Err()
		case <-t.C():
		}
		pause = min(2*pause, watchRetryMax)
	}
}

// noteExit remembers that the workload behind h ended, until markExited
// records it, so that reads can finish the job should the record fail.
func (m *Manager) noteExit(e *entry, h driver.Handle, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.reg.has(e) || e.rec.Handle == nil || *e.rec.Handle != h {
		return
	}
	if e.exitSeen == nil {
		m.reg.unsettled++
	}
	e.exitSeen = &exitNote{h: h, reason: reason}
}

// forgetExit drops what noteExit remembered.
func (m *Manager) forgetExit(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.exitSeen != nil {
		e.exitSeen = nil
		if m.reg.has(e) {
			m.reg.unsettled--
		}
	}
}

// markExited records that the workload behind h ended on its own. The caller
// holds e.op. It does nothing unless h is still the sandbox's live workload.
func (m *Manager) markExited(e *entry, h driver.Handle, reason string) {
	m.mu.Lock()
	rec := e.rec
	live := m.reg.has(e) && rec.State == provider.StateStarted && rec.Handle != nil && *rec.Handle == h
	m.mu.Unlock()
	if !live {
		m.forgetExit(e)
		return
	}
	if _, err := m.update(e, func(r *record) {
		r.State = provider.StateStopped
		r.Port, r.ExtraPorts = 0, nil
		r.ErrorReason = reason
		r.LastActivityAt = m.clk.Now()
	}, emission{provider.EventStopped, ""}, bumped); err != nil {
		// Still started on record, and in memory: the next read tries again.
		m.log.Error("persist exit", "sandbox", rec.ID, "err", err)
		return
	}
	m.forgetExit(e)
	m.releasePorts(rec)
	if m.opts.LaunchHook != nil {
		m.opts.LaunchHook.AfterExit(rec.ID)
	}
}

// readiness is how a launch of a snapshot whose ready is this waits for its
// workload: an HTTP answer unless the snapshot says otherwise (config
// validates the word).
func readiness(ready string) launcher.Readiness {
	switch ready {
	case "port":
		return launcher.ReadyPort
	case "none":
		return launcher.ReadyNone
	}
	return launcher.ReadyHTTP("/")
}
