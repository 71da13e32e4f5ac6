package manager

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/sandplane/sandplane/provider"
)

// identRE is what a new sandbox's id (its name too) may be: a DNS label
// that still is one in its preview host, <port>-<id>.localhost, whose
// port takes up to six of a label's 63 characters. Sandboxes of daemons
// before this rule keep their ids: the registry is never renamed.
var identRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,55}[a-z0-9])?$`)

const identRule = "use 1-57 lowercase letters, digits or '-', starting and ending with a letter or digit: it is part of the preview host <port>-<id>.localhost, a DNS label"

var sessionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

func validateCreate(req *provider.CreateRequest) error {
	if err := validateIdentity(req); err != nil {
		return err
	}
	if req.SessionID != nil && !sessionRE.MatchString(*req.SessionID) {
		return provider.Errorf(provider.InvalidArgument, "sessionId %.140q is invalid: use 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", *req.SessionID)
	}
	if req.AutoStopInterval != nil && *req.AutoStopInterval < 0 {
		return provider.Errorf(provider.InvalidArgument, "autoStopInterval must be 0 (never) or a positive number of minutes, got %d", *req.AutoStopInterval)
	}
	if err := validateDaytonaFields(req); err != nil {
		return err
	}
	if err := refuseUnsupported(req); err != nil {
		return err
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
			return provider.Errorf(provider.InvalidArgument, "env var name %q is invalid: a name is not empty and holds no '=' or NUL byte", k)
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

// validateIdentity checks the one identity a create asks for: id and name
// are the same string, so a request may give either, or both when equal.
func validateIdentity(req *provider.CreateRequest) error {
	if req.ID != "" && req.Name != "" && req.ID != req.Name {
		return provider.Errorf(provider.InvalidArgument, "id %q and name %q differ: a sandbox's id is its name, so give one of them (or both the same)", req.ID, req.Name)
	}
	if req.ID != "" && !identRE.MatchString(req.ID) {
		return provider.Errorf(provider.InvalidArgument, "id %q is invalid: %s", req.ID, identRule)
	}
	if req.Name != "" && !identRE.MatchString(req.Name) {
		return provider.Errorf(provider.InvalidArgument, "name %q is invalid: %s", req.Name, identRule)
	}
	return nil
}

// validateDaytonaFields checks the fields a create body shares with
// Daytona's, which the daemon accepts whether or not it honours them
// (IgnoredFields).
func validateDaytonaFields(req *provider.CreateRequest) error {
	if req.AutoDeleteInterval != nil && *req.AutoDeleteInterval < -1 {
		return provider.Errorf(provider.InvalidArgument, "autoDeleteInterval must be -1 (never), 0 (at once when stopped) or a positive number of minutes, got %d", *req.AutoDeleteInterval)
	}
	if req.AutoArchiveInterval != nil && *req.AutoArchiveInterval < 0 {
		return provider.Errorf(provider.InvalidArgument, "autoArchiveInterval must be 0 or a positive number of minutes, got %d", *req.AutoArchiveInterval)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"cpu", req.CPU}, {"memory", req.Memory}, {"disk", req.Disk}, {"gpu", req.GPU}} {
		if f.v < 0 {
			return provider.Errorf(provider.InvalidArgument, "%s must not be negative, got %d", f.name, f.v)
		}
	}
	return nil
}

// refuseUnsupported refuses the Daytona fields the daemon does not honour
// and must not ignore, unlike IgnoredFields': a host that asked for a TTL,
// auto-pause or secrets relies on them (a sandbox that outlives its TTL,
// a workload without its credentials), so their absence is an error, not
// a warning. 0 and empty are what not asking is.
func refuseUnsupported(req *provider.CreateRequest) error {
	switch {
	case req.TTLMinutes < 0:
		return provider.Errorf(provider.InvalidArgument, "ttlMinutes must not be negative, got %d", req.TTLMinutes)
	case req.AutoPauseInterval != nil && *req.AutoPauseInterval < 0:
		return provider.Errorf(provider.InvalidArgument, "autoPauseInterval must not be negative, got %d", *req.AutoPauseInterval)
	case req.TTLMinutes > 0:
		return provider.Errorf(provider.Unsupported, "the local control plane has no TTL: leave ttlMinutes 0 and delete the sandbox yourself, or use autoStopInterval with autoDeleteInterval")
	case req.AutoPauseInterval != nil && *req.AutoPauseInterval > 0:
		return provider.Errorf(provider.Unsupported, "the local control plane does not pause sandboxes: leave autoPauseInterval 0 and use autoStopInterval")
	case len(req.Secrets) > 0:
		return provider.Errorf(provider.Unsupported, "the local control plane keeps no secrets: pass values in envVars (they never reach a log)")
	}
	return nil
}

// IgnoredFields names the fields of req that the daemon accepts, as
// Daytona's create body has them, but does not honour for a sandbox on
// runtime rt, in the order of the contract: cpu and memory are limits on
// docker only. The daemon names them in the create's Warning header.
func IgnoredFields(req provider.CreateRequest, rt provider.Runtime) []string {
	limits := rt == provider.RuntimeDocker
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"autoArchiveInterval", req.AutoArchiveInterval != nil},
		{"target", req.Target != ""},
		{"cpu", req.CPU != 0 && !limits},
		{"memory", req.Memory != 0 && !limits},
		{"disk", req.Disk != 0},
		{"gpu", req.GPU != 0},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
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
	e, snap, err := m.plan(req)
	if err != nil {
		return provider.Sandbox{}, err
	}
	if err := e.op.lock(ctx); err != nil {
		return provider.Sandbox{}, err
	}
	defer e.op.unlock()
	durable, err := m.register(e, sandboxEnv(snap.Env, m.opts.PassEnv, req.EnvVars))
	if err != nil {
		return provider.Sandbox{}, err
	}
	started := func(r *record) {
		r.State = provider.StateStarted
		r.Creating = false
		r.LastActivityAt = m.clk.Now()
	}
	next, err := m.spawn(ctx, e, snap, started)
	if err != nil {
		<-durable // its syncs outlive no create
		err = m.rollBackCreate(e, err)
		if provider.Code(err) == provider.Unavailable {
			// Its runtime may not have answered the removal of what it
			// made either; the record that owned it is gone now.
			m.reapLater(e.rec.Runtime)
		}
		return provider.Sandbox{}, err
	}
	if err := <-durable; err != nil {
		next.discard()
		m.abandon(e)
		return provider.Sandbox{}, m.rollBackCreate(e, provider.Errorf(provider.CreateFailed, "%s; the create was rolled back", provider.Message(err)))
	}
	// The commit point of the create, durable before it is answered: the
	// record stops saying creating, so that no crash from now on, of the
	// daemon or of the machine, rolls back a sandbox its client was told
	// exists. (A machine crash ends a native workload too, but the sandbox,
	// its directory and what the workload wrote there, outlives it, as
	// stopped; a record still creating would be rolled back whole.)
	s, err := m.commit(e, next, started, true, emission{provider.EventCreated, ""}, emission{provider.EventStarted, ""}, bumped)
	if err != nil {
		m.abandon(e)
		return provider.Sandbox{}, m.rollBackCreate(e, provider.Errorf(provider.CreateFailed, "%s; the create was rolled back", provider.Message(err)))
	}
	m.watch(e)
	return s, nil
}

// plan checks req and makes the entry of the sandbox it asks for, still
// unknown to the registry, with the snapshot it runs.
func (m *Manager) plan(req provider.CreateRequest) (*entry, Snapshot, error) {
	if err := validateCreate(&req); err != nil {
		return nil, Snapshot{}, err
	}
	snapName := req.Snapshot
	if snapName == "" {
		snapName = DefaultSnapshot
	}
	rtName := req.Runtime
	if rtName == "" {
		rtName = m.runtimeFor(snapName)
	}
	snap, err := m.resolve(rtName, snapName)
	if err != nil {
		return nil, Snapshot{}, err
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
		SessionID:        clonePtr(req.SessionID),
		Public:           req.Public,
		CPU:              req.CPU,
		Memory:           req.Memory,
		Creating:         true,
	}
	rec.ID = cmp.Or(req.ID, req.Name, uuid.NewString())
	rec.Name = rec.ID
	if req.AutoStopInterval != nil {
		rec.AutoStopInterval = *req.AutoStopInterval
	}
	if d := req.AutoDeleteInterval; d != nil && *d >= 0 {
		rec.AutoDeleteInterval = clonePtr(d)
	}
	return m.newEntry(rec), snap, nil
}

// register makes e a sandbox: in the registry, then on disk with env and its
// first record. It holds e's persist lock until that record is on disk, so
// that an update racing the create (a refresh by id) never writes into a
// directory that is not yet this sandbox's. The channel says when the rest
// is durable (see makeDir). On error e is unknown again.
func (m *Manager) register(e *entry, env map[string]string) (<-chan error, error) {
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	if err := m.insert(e); err != nil {
		return nil, err
	}
	durable, err := m.makeDir(e.rec, env)
	if err != nil {
		m.forget(e)
		return nil, err
	}
	return durable, nil
}

// rollBackCreate undoes register once nothing of e's workload runs, and
// returns cause. Under the persist lock, so that no update racing it writes
// into a directory that is no longer this sandbox's.
func (m *Manager) rollBackCreate(e *entry, cause error) error {
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	m.forget(e)
	if err := m.removeDir(e.rec.ID); err != nil {
		m.log.Error("rollback: remove sandbox directory", "sandbox", e.rec.ID, "err", err)
	}
	return cause
}

// forget takes e out of the registry.
func (m *Manager) forget(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reg.remove(e)
}

// insert registers e unless its id or name is taken. A name may not equal
// another sandbox's id either, since lookups accept both.
func (m *Manager) insert(e *entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.reg.conflicts(e) {
		switch {
		case o.recovering == doingRollback && (o.rec.ID == e.rec.ID || o.rec.Name == e.rec.Name):
			return provider.Errorf(provider.FailedPrecondition, "sandbox %s is still %s after the daemon restart; retry in a few seconds", o.rec.ID, doingRollback)
		case o.rec.ID == e.rec.ID:
			return provider.Errorf(provider.AlreadyExists, "a sandbox named %q already exists: pick another name or delete it first", e.rec.ID)
		case o.rec.Name == e.rec.ID:
			// A sandbox of a daemon before one identity, whose name is not
			// its id: lookups take either.
			return provider.Errorf(provider.AlreadyExists, "a sandbox named %q already exists (its id is %s): pick another name or delete it first", e.rec.ID, o.rec.ID)
		}
	}
	m.reg.add(e)
	return nil
}

// makeDir makes the directory of a new sandbox with its env and first
// record, under a staging name, and renames it into place: a directory in
// the root is a sandbox's from the moment it exists, so anything else found
// there is never the daemon's to remove. On error nothing is left.
//
// What the record's durability does not need is made durable in the
// background, so that it overlaps the workload's start, and the channel
// says how that went; the create waits for it before its commit point:
// the env and token files, which until then may be lost to a machine crash
// (the record, durable, says creating, so the restart rolls the sandbox
// back whole whatever they hold), and the rename, which until then a
// machine crash may undo (leaving the staged directory to clearLeftovers,
// and the create, never answered, undone; a daemon killed meanwhile finds
// the directory, which the kernel already shows).
func (m *Manager) makeDir(rec *record, env map[string]string) (<-chan error, error) {
	staged, err := m.stage(rec.ID)
	if err != nil {
		return nil, storageErr(err, "create sandbox directory")
	}
	rest, err := fillStaged(staged, rec, env)
	if err == nil {
		if err = m.publish(staged, rec.ID); err != nil {
			for _, f := range rest {
				f.Close()
			}
		}
	}
	if err != nil {
		_ = os.RemoveAll(staged)
		return nil, err
	}
	return m.syncPublished(rest), nil
}

// syncPublished syncs files, the rest of a published sandbox's first
// files, and the root, at once, closes files, and says how it went: the
// first error, naming what failed, or nil.
func (m *Manager) syncPublished(files []*os.File) <-chan error {
	done := make(chan error, 1)
	go func() {
		errs := make([]error, len(files)+1)
		var wg sync.WaitGroup
		for i, f := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer f.Close()
				if err := f.Sync(); err != nil {
					errs[i] = storageErr(err, "sync %s of the new sandbox", filepath.Base(f.Name()))
				}
			}()
		}
		if err := syncDir(m.opts.Root); err != nil {
			errs[len(files)] = storageErr(err, "sync the daemon root %s", m.opts.Root)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// fillStaged writes a new sandbox's first files (env, token, record) into
// its staging directory. The record and the directory are synced, at once,
// before it returns, and so before the rename publishes them, so that no
// machine crash brings back a published sandbox with an empty record or
// none; the env and token files are returned open and not synced, for
// makeDir to sync later. Written in place, without the temp file and
// rename of writeFileAtomic: nothing reads a staging directory, and a
// crash leaves it to clearLeftovers. On error it closes what it opened.
func fillStaged(dir string, rec *record, env map[string]string) (rest []*os.File, err error) {
	envData, err := json.Marshal(env)
	if err != nil {
		return nil, provider.Errorf(provider.Internal, "encode %s: %w", envFile, err)
	}
	recData, err := encodeRecord(rec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			for _, f := range rest {
				f.Close()
			}
			rest = nil
		}
	}()
	for _, f := range []struct {
		name string
		data []byte
	}{{envFile, envData}, {tokenFile, []byte(newToken() + "\n")}} {
		fh, err := writeNew(filepath.Join(dir, f.name), f.data, 0o600)
		if err != nil {
			return rest, storageErr(err, "write %s", f.name)
		}
		rest = append(rest, fh)
	}
	fh, err := writeNew(filepath.Join(dir, recordFile), recData, 0o644)
	if err != nil {
		return rest, storageErr(err, "write %s", recordFile)
	}
	defer fh.Close()
	synced := make(chan error, 1)
	go func() { synced <- fh.Sync() }()
	if err := syncDir(dir); err != nil {
		<-synced
		return rest, storageErr(err, "sync the new sandbox directory")
	}
	if err := <-synced; err != nil {
		return rest, storageErr(err, "sync %s", recordFile)
	}
	return rest, nil
}

// writeNew creates path, which must not exist, with data and perm, and
// returns it open for a later sync.
func writeNew(path string, data []byte, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil { // past the umask, as writeFileAtomic
		f.Close()
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// runtimeFor is the runtime of a create that names none: the daemon's
// default, or docker for a snapshot only docker can run (an image, no
// command).
func (m *Manager) runtimeFor(snapName string) provider.Runtime {
	snap, ok := m.opts.Snapshots[snapName]
	if _, docker := m.opts.Runtimes[provider.RuntimeDocker]; ok && docker && len(snap.Command) == 0 && snap.Image != "" {
		return provider.RuntimeDocker
	}
	return m.opts.DefaultRuntime
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
		hint := "give it a command in the daemon config"
		if snap.Image != "" {
			hint = "create it on the docker runtime (sandplane create --runtime docker), or " + hint
		}
		return Snapshot{}, provider.Errorf(provider.PreflightFailed, "snapshot %q has no command, so it cannot run on the %s runtime: %s", snapName, rtName, hint)
	}
	return snap, nil
}
