package manager

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// killRetry is how long a sandbox whose workload could not be killed waits
// before the next attempt.
const killRetry = 5 * time.Second

var identRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

func validateCreate(req *provider.CreateRequest) error {
	if req.ID != "" && !identRE.MatchString(req.ID) {
		return provider.Errorf(provider.InvalidArgument, "id %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.ID)
	}
	if req.Name != "" && !identRE.MatchString(req.Name) {
		return provider.Errorf(provider.InvalidArgument, "name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name)
	}
	if req.AutoStopInterval != nil && *req.AutoStopInterval < 0 {
		return provider.Errorf(provider.InvalidArgument, "autoStopInterval must be 0 (never) or a positive number of minutes, got %d", *req.AutoStopInterval)
	}
	if req.Runtime != "" && !req.Runtime.Valid() {
		return provider.Errorf(provider.InvalidArgument, "runtime %q is unknown: use native or docker", req.Runtime)
	}
	if len(req.Labels) > MaxLabels {
		return provider.Errorf(provider.InvalidArgument, "%d labels is too many: a sandbox takes at most %d", len(req.Labels), MaxLabels)
	}
	for k := range req.Labels {
		if k == "" || len(k) > MaxLabelKeyLen || strings.ContainsAny(k, "=&") {
			return provider.Errorf(provider.InvalidArgument, "label key %.80q is invalid: it must be 1-%d bytes and contain no '=' or '&'", k, MaxLabelKeyLen)
		}
	}
	for k, v := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return provider.Errorf(provider.InvalidArgument, "env var name %q is invalid", k)
		}
		if k == "PORT" {
			return provider.Errorf(provider.InvalidArgument, "env var PORT is set by the daemon to the sandbox port; remove it from envVars")
		}
		if k == TokenEnv {
			return provider.Errorf(provider.InvalidArgument, "env var %s is set by the daemon to the sandbox's token; remove it from envVars", TokenEnv)
		}
		if strings.ContainsRune(v, 0) {
			// Values are secret: name the variable only.
			return provider.Errorf(provider.InvalidArgument, "env var %s contains a NUL byte, which no process environment can hold", k)
		}
	}
	return nil
}

// Label bounds. Values are bounded by the contract (1024 bytes); keys and
// the count are bounded here, so that one sandbox cannot make every list
// and event stream heavy.
const (
	MaxLabels      = 64
	MaxLabelKeyLen = 256
)

// Create starts a sandbox and returns it started. See provider.Provider.
func (m *Manager) Create(ctx context.Context, req provider.CreateRequest) (provider.Sandbox, error) {
	ctx = detach(ctx)
	if err := validateCreate(&req); err != nil {
		return provider.Sandbox{}, err
	}
	rtName := req.Runtime
	if rtName == "" {
		rtName = m.opts.DefaultRuntime
	}
	snapName := req.Snapshot
	if snapName == "" {
		snapName = DefaultSnapshot
	}
	snap, err := m.resolve(rtName, snapName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	now := m.clk.Now()
	rec := &record{
		Version:          recordVersion,
		ID:               req.ID,
		Name:             req.Name,
		State:            provider.StateStarting,
		Runtime:          rtName,
		Snapshot:         snapName,
		Labels:           cloneMap(req.Labels),
		CreatedAt:        now,
		UpdatedAt:        now,
		LastActivityAt:   now,
		AutoStopInterval: *m.opts.AutoStopMinutes,
		Creating:         true,
	}
	if rec.ID == "" {
		rec.ID = uuid.NewString()
	}
	if rec.Name == "" {
		rec.Name = rec.ID
	}
	if req.AutoStopInterval != nil {
		rec.AutoStopInterval = *req.AutoStopInterval
	}

	e := newEntry(rec)
	e.op.lock(ctx)
	defer e.op.unlock()
	// The persist lock is held until the first record is on disk, and again
	// while rolling back, so that an update racing the create (a refresh by
	// id) never writes into a directory that is not, or no longer, this
	// sandbox's.
	e.persistMu.Lock()
	persistLocked := true
	defer func() {
		if persistLocked {
			e.persistMu.Unlock()
		}
	}()
	if err := m.insert(e); err != nil {
		return provider.Sandbox{}, err
	}
	rollback := func(cause error) (provider.Sandbox, error) {
		if !persistLocked {
			e.persistMu.Lock()
			persistLocked = true
		}
		m.mu.Lock()
		delete(m.sandboxes, rec.ID)
		m.mu.Unlock()
		if err := m.removeDir(rec.ID); err != nil {
			m.log.Error("rollback: remove sandbox directory", "sandbox", rec.ID, "err", err)
		}
		return provider.Sandbox{}, cause
	}
	if err := m.makeDir(rec, sandboxEnv(snap.Env, m.opts.PassEnv, req.EnvVars)); err != nil {
		m.mu.Lock()
		delete(m.sandboxes, rec.ID)
		m.mu.Unlock()
		return provider.Sandbox{}, err
	}
	persistLocked = false
	e.persistMu.Unlock()
	if err := m.spawn(ctx, e, snap); err != nil {
		return rollback(err)
	}
	s, err := m.update(e, func(r *record) {
		r.State = provider.StateStarted
		r.Creating = false
		r.LastActivityAt = m.clk.Now()
	}, emission{provider.EventCreated, ""}, emission{provider.EventStarted, ""}, bumped)
	if err != nil {
		// spawn handed the port and the launch hook over with the workload.
		m.killQuietly(e)
		m.ports.release(s.Port)
		if hook := m.opts.LaunchHook; hook != nil {
			hook.AfterExit(rec.ID)
		}
		return rollback(provider.Errorf(provider.CreateFailed, "%s; the create was rolled back", provider.Message(err)))
	}
	m.watch(e)
	return s, nil
}

// insert registers e unless its id or name is taken. A name may not equal
// another sandbox's id either, since lookups accept both.
func (m *Manager) insert(e *entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.sandboxes {
		switch {
		case o.recovering == doingRollback && (o.rec.ID == e.rec.ID || o.rec.Name == e.rec.Name):
			return provider.Errorf(provider.FailedPrecondition, "sandbox %s is still %s after the daemon restart; retry in a few seconds", o.rec.ID, doingRollback)
		case o.rec.ID == e.rec.ID:
			return provider.Errorf(provider.AlreadyExists, "a sandbox with id %q already exists: pick another id or delete it first", e.rec.ID)
		case o.rec.Name == e.rec.Name || o.rec.ID == e.rec.Name || o.rec.Name == e.rec.ID:
			return provider.Errorf(provider.AlreadyExists, "a sandbox named %q already exists: pick another name or delete it first", e.rec.Name)
		}
	}
	m.sandboxes[e.rec.ID] = e
	return nil
}

// makeDir makes the directory of a new sandbox with its env and first
// record, under a staging name, and renames it into place: a directory in
// the root is a sandbox's from the moment it exists, so anything else found
// there is never the daemon's to remove. On error nothing is left.
func (m *Manager) makeDir(rec *record, env map[string]string) error {
	staged, err := m.stage(rec.ID)
	if err != nil {
		return provider.Errorf(provider.Internal, "create sandbox directory: %w", err)
	}
	err = writeEnvIn(staged, env)
	if err != nil {
		err = provider.Errorf(provider.Internal, "write %s: %w", envFile, err)
	} else if err = persistIn(staged, rec); err == nil {
		err = m.publish(staged, rec.ID)
	}
	if err != nil {
		_ = os.RemoveAll(staged)
	}
	return err
}

func (m *Manager) resolve(rtName provider.Runtime, snapName string) (Snapshot, error) {
	if _, ok := m.opts.Runtimes[rtName]; !ok {
		return Snapshot{}, provider.Errorf(provider.PreflightFailed, "runtime %q is not enabled on this daemon (enabled: %v)", rtName, m.Runtimes())
	}
	snap, ok := m.opts.Snapshots[snapName]
	if !ok {
		return Snapshot{}, provider.Errorf(provider.PreflightFailed, "snapshot %q is not configured (configured: %s): add it to the daemon config file", snapName, strings.Join(m.Snapshots(), ", "))
	}
	if rtName == provider.RuntimeDocker && snap.Image == "" {
		return Snapshot{}, provider.Errorf(provider.PreflightFailed, "snapshot %q has no image, so it cannot run on the docker runtime: set its image in the daemon config", snapName)
	}
	if rtName != provider.RuntimeDocker && len(snap.Command) == 0 {
		return Snapshot{}, provider.Errorf(provider.PreflightFailed, "snapshot %q has no command, so it cannot run on the %s runtime", snapName, rtName)
	}
	return snap, nil
}

// spawn launches e's workload on a fresh port and waits until it is ready.
// The handle is persisted as soon as it exists so that a crash from then on
// finds the workload. On error nothing runs and the port is free again.
// The caller holds e.op.
func (m *Manager) spawn(ctx context.Context, e *entry, snap Snapshot) error {
	m.mu.Lock()
	rec := e.rec.clone()
	m.mu.Unlock()
	rt := m.opts.Runtimes[rec.Runtime]
	env, err := m.readEnv(rec.ID)
	if err != nil {
		return provider.Errorf(provider.Internal, "read sandbox env: %w", err)
	}
	// The token joins the sandbox env, so that neither the daemon's env nor
	// a snapshot's can replace it and every redaction of env values hides it.
	if env[TokenEnv], err = m.sandboxToken(rec.ID); err != nil {
		return provider.Errorf(provider.Internal, "sandbox token: %w", err)
	}
	port, err := m.ports.allocate(rec.LastPort)
	if err != nil {
		return err
	}
	base, command := m.opts.BaseEnv, snap.Command
	if rec.Runtime == provider.RuntimeDocker {
		base, command = nil, snap.ImageCommand // the image brings its own
	}
	spec := driver.Spec{
		SandboxID: rec.ID,
		Root:      m.opts.Root,
		Dir:       m.dir(rec.ID),
		Command:   append([]string(nil), command...),
		Image:     snap.Image,
		WorkDir:   snap.WorkDir,
		User:      snap.User,
		Env:       spawnEnv(base, env, port),
		Port:      port,
		Labels:    cloneMap(rec.Labels),
		Isolation: snap.Isolation,
	}
	if hook := m.opts.LaunchHook; hook != nil {
		if err := hook.BeforeSpawn(ctx, &spec); err != nil {
			m.ports.release(port)
			return provider.Errorf(provider.CreateFailed, "launch hook refused the spawn: %v", err)
		}
	}
	fail := func(err error) error {
		m.ports.release(port)
		if m.opts.LaunchHook != nil {
			m.opts.LaunchHook.AfterExit(rec.ID)
		}
		return err
	}
	if err := rt.Preflight(ctx, spec); err != nil {
		return fail(err)
	}
	h, err := m.startRecorded(ctx, e, rt, spec)
	if err != nil {
		return fail(err)
	}
	if snap.Ready != "none" {
		if err := m.waitReady(ctx, rt, h, port); err != nil {
			// Logs first: removing a container takes its logs with it.
			stdout, stderr, _ := rt.Logs(ctx, h, spec.Dir)
			m.discard(rt, h)
			return fail(provider.Errorf(provider.CreateFailed, "%v%s", err, logTail(newRedactor(env), stdout, stderr)))
		}
	}
	return nil
}

// startRecorded starts spec's workload and records its handle and port, so
// that from then on a crash finds it. Both happen under spawnMu, so that an
// orphan sweep never sees the workload without its record. On error nothing
// runs.
func (m *Manager) startRecorded(ctx context.Context, e *entry, rt driver.Driver, spec driver.Spec) (driver.Handle, error) {
	m.spawnMu.RLock()
	defer m.spawnMu.RUnlock()
	h, err := rt.Start(ctx, spec)
	if err != nil {
		if c := provider.Code(err); c != provider.PreflightFailed && c != provider.Unavailable {
			err = provider.Errorf(provider.CreateFailed, "start workload: %s", provider.Message(err))
		}
		return driver.Handle{}, err
	}
	if _, err := m.update(e, func(r *record) { r.Handle = &h; r.Port = spec.Port; r.LastPort = spec.Port }); err != nil {
		m.discard(rt, h)
		return driver.Handle{}, err
	}
	return h, nil
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
	if err := m.end(rt, h); err != nil {
		m.log.Error("kill failed workload", "pid", h.PID, "container", h.ContainerID, "err", err)
	}
}

// end kills and removes a workload no sandbox keeps. An error means it may
// still run; a failed removal of what is left is only logged.
func (m *Manager) end(rt driver.Driver, h driver.Handle) error {
	ctx := context.Background()
	if err := rt.Stop(ctx, h, m.opts.StopGrace); err != nil {
		return err
	}
	if err := rt.Remove(ctx, h); err != nil {
		m.log.Error("remove ended workload", "container", h.ContainerID, "err", err)
	}
	return nil
}

func (m *Manager) killQuietly(e *entry) {
	m.mu.Lock()
	rec := e.rec.clone()
	m.mu.Unlock()
	if rec.Handle != nil {
		m.discard(m.opts.Runtimes[rec.Runtime], *rec.Handle)
	}
}

// waitReady polls until the workload accepts connections on port, it exits,
// or ReadyTimeout passes.
func (m *Manager) waitReady(ctx context.Context, rt driver.Driver, h driver.Handle, port int) error {
	deadline := m.clk.NewTimer(m.opts.ReadyTimeout)
	defer deadline.Stop()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	prober, _ := rt.(driver.Prober)
	// A refused connect costs microseconds; polling often keeps create
	// close to the workload's own start-up time.
	backoff := 500 * time.Microsecond
	for {
		var ready bool
		if prober != nil {
			ok, err := prober.Probe(ctx, h, port)
			if err != nil {
				return err
			}
			ready = ok
		} else if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			ready = true
		}
		if ready {
			return nil
		}
		st, err := rt.Status(ctx, h)
		if err != nil {
			return err
		}
		if !st.Running {
			return fmt.Errorf("workload ended before it listened on port %d (%s)", port, st.Exit.Reason)
		}
		t := m.clk.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-deadline.C():
			t.Stop()
			return fmt.Errorf("workload did not listen on port %d within %s: it must serve on $PORT", port, m.opts.ReadyTimeout)
		case <-t.C():
		}
		if backoff < 5*time.Millisecond {
			backoff *= 2
		}
	}
}

// logTail returns the end of the workload's output for an error message.
func logTail(redact func(string) string, stdout, stderr []byte) string {
	const max = 2048
	out := strings.TrimSpace(string(stderr))
	if out == "" {
		out = strings.TrimSpace(string(stdout))
	}
	if out == "" {
		return ""
	}
	if len(out) > max {
		out = "..." + out[len(out)-max:]
	}
	return "; workload output: " + redact(out)
}

// watch notices the workload's exit without anyone reading the sandbox.
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
		exit, err := rt.Wait(ctx, h)
		if err != nil {
			return // cancelled: someone else is handling this workload
		}
		if e.op.lock(ctx) != nil {
			return
		}
		defer e.op.unlock()
		m.markExited(e, h, exit.Reason)
	}()
}

// markExited records that the workload behind h ended on its own. The caller
// holds e.op. It does nothing unless h is still the sandbox's live workload.
func (m *Manager) markExited(e *entry, h driver.Handle, reason string) {
	m.mu.Lock()
	rec := e.rec
	live := m.sandboxes[rec.ID] == e && rec.State == provider.StateStarted && rec.Handle != nil && *rec.Handle == h
	m.mu.Unlock()
	if !live {
		return
	}
	if _, err := m.update(e, func(r *record) {
		r.State = provider.StateStopped
		r.Port = 0
		r.ErrorReason = reason
		r.LastActivityAt = m.clk.Now()
	}, emission{provider.EventStopped, ""}, bumped); err != nil {
		// Still started on record, and in memory: the next read tries again.
		m.log.Error("persist exit", "sandbox", rec.ID, "err", err)
		return
	}
	m.ports.release(rec.Port)
	if m.opts.LaunchHook != nil {
		m.opts.LaunchHook.AfterExit(rec.ID)
	}
}

// Get returns the sandbox, reconciled with its workload. not_found.
func (m *Manager) Get(ctx context.Context, idOrName string) (provider.Sandbox, error) {
	e, err := m.lookup(idOrName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	return m.reconcile(ctx, e), nil
}

// List returns the sandboxes whose labels contain every pair in labels,
// oldest first.
func (m *Manager) List(ctx context.Context, labels map[string]string) []provider.Sandbox {
	var out []provider.Sandbox
	for _, e := range m.entries() {
		s := m.reconcile(ctx, e)
		if matches(s.Labels, labels) {
			out = append(out, s)
		}
	}
	sortSandboxes(out)
	return out
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// reconcile checks that a started sandbox's workload still runs, so a read
// never reports a dead child as started. It never waits for an operation in
// progress: that operation will settle the state itself.
func (m *Manager) reconcile(ctx context.Context, e *entry) provider.Sandbox {
	m.mu.Lock()
	rec, recovering := e.rec, e.recovering != ""
	m.mu.Unlock()
	rt, rtErr := m.runtimeOf(rec)
	if recovering || rec.State != provider.StateStarted || rec.Handle == nil || rtErr != nil || !e.op.tryLock() {
		return m.info(rec)
	}
	defer e.op.unlock()
	st, err := rt.Status(ctx, *rec.Handle)
	if err == nil && !st.Running {
		m.markExited(e, *rec.Handle, st.Exit.Reason)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.info(e.rec)
}

// Start respawns a stopped sandbox. See provider.Provider.
func (m *Manager) Start(ctx context.Context, idOrName string) (provider.Sandbox, error) {
	e, err := m.lookup(idOrName)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if err := m.available(e); err != nil {
		return provider.Sandbox{}, err
	}
	if err := e.op.lock(ctx); err != nil {
		return provider.Sandbox{}, err
	}
	defer e.op.unlock()
	ctx = detach(ctx)
	m.mu.Lock()
	rec := e.rec
	deleted := m.sandboxes[rec.ID] != e
	m.mu.Unlock()
	if deleted {
		return provider.Sandbox{}, provider.Errorf(provider.NotFound, "sandbox %q was deleted", idOrName)
	}
	if rec.State == provider.StateStopping && e.killErr == nil {
		// A stop that never finished, say a daemon restarted mid-kill that
		// could not check the workload: finish it before spawning another.
		if _, err := m.stopLocked(ctx, e, ""); err != nil && e.killErr == nil {
			return provider.Sandbox{}, err
		}
		m.mu.Lock()
		rec = e.rec
		m.mu.Unlock()
	}
	if e.killErr != nil {
		return provider.Sandbox{}, provider.Errorf(provider.FailedPrecondition,
			"sandbox %s: its previous workload could not be killed yet (%v); the daemon keeps retrying, start again once it is stopped", rec.ID, e.killErr)
	}
	rt, err := m.runtimeOf(rec)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if rec.State == provider.StateStarted {
		st, err := rt.Status(ctx, *rec.Handle)
		if err != nil {
			return provider.Sandbox{}, err
		}
		if st.Running {
			return m.info(rec), nil
		}
		m.markExited(e, *rec.Handle, st.Exit.Reason)
	}
	snap, err := m.resolve(rec.Runtime, rec.Snapshot)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if _, err := m.update(e, func(r *record) { r.State = provider.StateStarting; r.ErrorReason = "" }); err != nil {
		return provider.Sandbox{}, err
	}
	if err := m.spawn(ctx, e, snap); err != nil {
		if _, perr := m.update(e, func(r *record) {
			r.State = provider.StateStopped
			r.Port = 0
			r.ErrorReason = "start failed: " + provider.Message(err)
		}, emission{provider.EventStopped, ""}); perr != nil {
			m.log.Error("persist failed start", "sandbox", rec.ID, "err", perr)
		}
		return provider.Sandbox{}, err
	}
	s, err := m.update(e, func(r *record) {
		r.State = provider.StateStarted
		r.LastActivityAt = m.clk.Now()
	}, emission{provider.EventStarted, ""}, bumped)
	if err != nil {
		return provider.Sandbox{}, err
	}
	m.watch(e)
	return s, nil
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
		r.Port = 0
		r.ErrorReason = reason
		r.StopReason = ""
		r.LastActivityAt = m.clk.Now()
	}, emission{provider.EventStopped, ""}, bumped)
	if err != nil {
		// The port stays held: the record still names it.
		return provider.Sandbox{}, notRecorded(rec.ID, "its workload ended but it stays stopping; stop it again", err)
	}
	m.ports.release(rec.Port)
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
	gone := m.sandboxes[e.rec.ID] != e
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
	if err := m.removeDir(rec.ID); err != nil {
		e.persistMu.Unlock()
		return provider.Errorf(provider.Internal, "remove sandbox directory: %w", err)
	}
	m.mu.Lock()
	delete(m.sandboxes, rec.ID)
	m.mu.Unlock()
	s.State = provider.StateDestroyed
	m.emit(provider.EventDeleted, s, "") // under the persist lock: nothing of this sandbox follows it
	e.persistMu.Unlock()
	return nil
}

// RefreshActivity resets the idle clock. not_found.
func (m *Manager) RefreshActivity(ctx context.Context, idOrName string) error {
	e, err := m.lookup(idOrName)
	if err != nil {
		return err
	}
	if err := m.available(e); err != nil {
		return err
	}
	_, err = m.update(e, func(r *record) { r.LastActivityAt = m.clk.Now() }, emission{provider.EventActivity, provider.SourceRefresh})
	return err
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

// PreviewURL returns where port of the sandbox is reachable from the host,
// 0 meaning the sandbox port, and the sandbox's token. failed_precondition
// when not started.
func (m *Manager) PreviewURL(ctx context.Context, idOrName string, port int) (provider.Preview, error) {
	if port < 0 || port > 65535 {
		return provider.Preview{}, provider.Errorf(provider.InvalidArgument, "port %d is out of range 1-65535", port)
	}
	s, err := m.Get(ctx, idOrName)
	if err != nil {
		return provider.Preview{}, err
	}
	if s.State != provider.StateStarted {
		return provider.Preview{}, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s: start it first", s.ID, s.State)
	}
	if port != 0 && port != s.Port && s.Runtime == provider.RuntimeDocker {
		return provider.Preview{}, provider.Errorf(provider.InvalidArgument, "only the sandbox port %d is published for docker sandboxes", s.Port)
	}
	if port == 0 {
		port = s.Port
	}
	// A workload started before sandboxes had tokens has none yet ("").
	tok, err := m.readToken(s.ID)
	if err != nil {
		return provider.Preview{}, provider.Errorf(provider.Internal, "read sandbox token: %w", err)
	}
	return provider.Preview{URL: m.previewURL(port), Token: tok}, nil
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
	redact := newRedactor(env)
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
