package manager

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Snapshot is a named launch profile: a command for the native runtime, an
// image (and optionally a command) for docker. One snapshot may serve both.
type Snapshot struct {
	// Command is the argv on the native runtime.
	Command []string `json:"command,omitempty"`
	// Image is the Docker image; ImageCommand overrides its command.
	Image        string            `json:"image,omitempty"`
	ImageCommand []string          `json:"imageCommand,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	WorkDir      string            `json:"workDir,omitempty"`
	User         string            `json:"user,omitempty"`
	// Ready is how the manager knows the workload is up: "http" (the
	// default) waits until the sandbox port gives an HTTP response to GET /,
	// any status; "port", for a workload that speaks something else, until
	// the port accepts a connection and holds it; "none" counts a spawned
	// workload as started.
	Ready string `json:"ready,omitempty"`
	// Isolation is how the native runtime isolates the workload beyond its
	// containment: "bwrap" or "none"; empty takes the daemon's default.
	Isolation string `json:"isolation,omitempty"`
	// Network is the docker runtime's network: "" for the isolated bridge,
	// "host" for the host's (driver.Spec.Network). The native runtime
	// ignores it.
	Network string `json:"network,omitempty"`
	// Port is the port the workload serves inside the sandbox, its $PORT
	// (DefaultPort when 0): what a preview URL of the sandbox names, as on
	// Daytona. The daemon maps it to a host port.
	Port int `json:"port,omitempty"`
	// Ports are more ports the workload may serve inside the sandbox, each
	// mapped to a host port too and named to the workload as
	// $PORT_<port>. Only declared ports have preview URLs.
	Ports []int `json:"ports,omitempty"`
}

// DefaultSnapshot is the snapshot a create without one uses.
const DefaultSnapshot = "default"

// DefaultPort is the workload port of a snapshot that declares none: the
// port host servers written for Daytona ask a preview URL of.
const DefaultPort = 4000

// WorkloadPort is the port the snapshot's workload serves inside the
// sandbox.
func (s Snapshot) WorkloadPort() int {
	if s.Port == 0 {
		return DefaultPort
	}
	return s.Port
}

// declared are the snapshot's ports, the workload's first.
func (s Snapshot) declared() []int {
	return append([]int{s.WorkloadPort()}, s.Ports...)
}

// validatePorts reports the first port the snapshot name declares that
// cannot work. invalid_argument.
func (s Snapshot) validatePorts(name string) error {
	seen := map[int]bool{}
	for _, p := range s.declared() {
		switch {
		case p < 1 || p > 65535:
			return provider.Errorf(provider.InvalidArgument, "snapshot %q declares port %d, which is not a TCP port (1-65535)", name, p)
		case seen[p]:
			return provider.Errorf(provider.InvalidArgument, "snapshot %q declares port %d twice: the workload port is declared once, in port", name, p)
		}
		seen[p] = true
	}
	return nil
}

// LaunchHook lets a host that embeds the manager adjust a workload right
// before it is spawned, and clean up after it ends.
type LaunchHook interface {
	// BeforeSpawn may change spec's command, env and working dir. An error
	// aborts the spawn (and rolls back a create).
	BeforeSpawn(ctx context.Context, spec *driver.Spec) error
	// AfterExit runs once the workload is gone, whatever ended it.
	AfterExit(sandboxID string)
}

// Event is a lifecycle change, for the events feed.
type Event struct {
	Type    provider.EventType
	Sandbox provider.Sandbox
	// Source says what bumped activity (provider.SourceRefresh...); set for
	// provider.EventActivity.
	Source string
	Time   time.Time
}

// Options configure a Manager. Zero values get the defaults noted.
type Options struct {
	// Root holds one directory per sandbox. Required.
	Root string
	// Runtimes by name; at least one. DefaultRuntime picks the one a create
	// without a runtime uses (native when present).
	Runtimes       map[provider.Runtime]driver.Driver
	DefaultRuntime provider.Runtime
	Snapshots      map[string]Snapshot
	Clock          clock.Clock
	// PortMin..PortMax is the range sandbox ports come from (4100-4999).
	PortMin, PortMax int
	// PortLockDir is where daemons on one machine coordinate ports (a
	// per-user directory under the system temp dir).
	PortLockDir string
	// Minute is the length of one interval minute (1m).
	Minute time.Duration
	// AutoStopMinutes is the default autoStopInterval (15); negative means 0.
	AutoStopMinutes *int
	// ReapInterval is how often idle sandboxes are looked for (one Minute).
	ReapInterval time.Duration
	// StopGrace is how long a workload gets between SIGTERM and SIGKILL (10s).
	StopGrace time.Duration
	// ReadyTimeout bounds how long a create or start waits for the workload
	// to come up (30s, Daytona's create hold).
	ReadyTimeout time.Duration
	// PassEnv are daemon-side values added to a sandbox's env only when the
	// create request lacks the key (for example model API keys).
	PassEnv map[string]string
	// BaseEnv is the environment every native workload starts from (PATH,
	// HOME...); sandbox env overrides it. Never persisted.
	BaseEnv    map[string]string
	LaunchHook LaunchHook
	// OnEvent receives every lifecycle event. It must not block.
	OnEvent func(Event)
	// PreviewHost is the host of preview URLs when PreviewURL is not set
	// (127.0.0.1).
	PreviewHost string
	// PreviewURL, when set, says where port (one inside the sandbox) of
	// sandbox id is served to any HTTP client: the preview URL answer. By
	// default it is PreviewHost at the host port it maps to.
	PreviewURL func(id string, port int) string
	// PreviewLink, when set, is the sandbox's previewUrl, the preview a
	// browser opens (PreviewURL by default).
	PreviewLink func(id string, port int) string
	Logger      *slog.Logger
}

// Manager owns the registry. Create one with New and Close it.
type Manager struct {
	opts  Options
	clk   clock.Clock
	log   *slog.Logger
	ports *launcher.PortRange
	// launchers bring workloads up, one per runtime, on the shared ports.
	launchers map[provider.Runtime]*launcher.Launcher

	mu  sync.Mutex
	reg index
	// foreign are folders in the root that are not sandboxes; set by New.
	foreign []string

	// spawnMu is held for reading from a workload's spawn until its handle
	// is on record, and for writing while orphans are listed, so that a
	// workload being spawned is never taken for an orphan.
	spawnMu sync.RWMutex
	// reaping are the runtimes whose orphans a reap waits to end; guarded
	// by mu.
	reaping map[provider.Runtime]bool
	// recovered is closed once the work a restart left is done.
	recovered chan struct{}
	// flush writes moved activity times in batches.
	flush flusher

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// entry is one sandbox in memory. rec is guarded by Manager.mu and replaced,
// never mutated, so a reader may keep the pointer it got. op serialises
// lifecycle operations on the sandbox.
type entry struct {
	op opLock
	// persistMu orders the writes of sandbox.json: held from the swap of
	// rec to the end of its write, so the file ends with the latest record.
	persistMu sync.Mutex
	rec       *record
	// view is rec's public view and viewJSON its encoding, made when rec
	// is installed, so that reads only copy them. Guarded by Manager.mu.
	view     provider.Sandbox
	viewJSON []byte
	// exitSeen is the end of the recorded workload, learnt by the watch
	// but not recorded yet (its write failed): reads try again. Guarded by
	// Manager.mu.
	exitSeen *exitNote
	// activityDirty is set while rec's lastActivityAt is newer than the
	// one on disk; the activity flush writes it. Guarded by persistMu.
	activityDirty bool
	// stopWatch ends the goroutine that notices the workload's exit.
	stopWatch context.CancelFunc
	// killErr is set while a stop could not kill the workload; the sandbox
	// refuses to spawn another until a retry succeeds.
	killErr error
	// retryPending is set while a kill retry is scheduled; guarded by op.
	retryPending bool
	// recovering says what a restart still does to the sandbox ("stopping",
	// "being deleted"...) while it does; "" once done. Operations refuse
	// the sandbox meanwhile, so that none waits on a long recovery.
	// Guarded by Manager.mu.
	recovering string
	// unreadable is why the sandbox's record could not be read; fixed at
	// load. Such a sandbox is shown in state error, is never written, and
	// can only be deleted.
	unreadable error
	// released is set while the delete of an unreadable sandbox ends its
	// workloads, which the orphan sweep spares until then. Guarded by
	// Manager.mu.
	released bool
}

// exitNote is how the workload behind h ended.
type exitNote struct {
	h      driver.Handle
	reason string
}

// opLock is a mutex that a waiter can abandon when its context ends.
type opLock chan struct{}

func (l opLock) lock(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return provider.Errorf(provider.Code(ctx.Err()), "gave up waiting for another operation on the sandbox: %w", ctx.Err())
	}
}

func (l opLock) tryLock() bool {
	select {
	case l <- struct{}{}:
		return true
	default:
		return false
	}
}

func (l opLock) unlock() { <-l }

// New loads the registry under opts.Root, reconciles it with what actually
// runs, removes orphans, and starts the idle reaper.
func New(opts Options) (*Manager, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Root, 0o700); err != nil {
		return nil, provider.Errorf(provider.Internal, "create root %s: %w", opts.Root, err)
	}
	m := newManager(opts)
	if err := m.addLaunchers(); err != nil {
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if err := m.rehydrate(); err != nil {
		m.cancel()
		return nil, err
	}
	m.wg.Add(1)
	go m.reapLoop(m.clk.NewTicker(m.opts.ReapInterval)) // armed before New returns, so no tick is missed
	m.warm()
	return m, nil
}

// withDefaults checks o and fills in what it leaves unset. invalid_argument.
func (o Options) withDefaults() (Options, error) {
	if o.Root == "" {
		return o, provider.Errorf(provider.InvalidArgument, "manager: root directory is required")
	}
	if len(o.Runtimes) == 0 {
		return o, provider.Errorf(provider.InvalidArgument, "manager: at least one runtime is required")
	}
	if o.PortMin == 0 && o.PortMax == 0 {
		o.PortMin, o.PortMax = 4100, 4999
	}
	if o.PortMin <= 0 || o.PortMax > 65535 || o.PortMin > o.PortMax {
		return o, provider.Errorf(provider.InvalidArgument, "manager: invalid port range %d-%d", o.PortMin, o.PortMax)
	}
	for name, snap := range o.Snapshots {
		if err := snap.validatePorts(name); err != nil {
			return o, err
		}
	}
	o.fillTimes()
	o.fillPlaces()
	return o, nil
}

// fillTimes gives the clock and every duration left unset its default.
func (o *Options) fillTimes() {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Minute <= 0 {
		o.Minute = time.Minute
	}
	if o.AutoStopMinutes == nil {
		fifteen := 15
		o.AutoStopMinutes = &fifteen
	} else if *o.AutoStopMinutes < 0 {
		zero := 0
		o.AutoStopMinutes = &zero
	}
	if o.ReapInterval <= 0 {
		o.ReapInterval = o.Minute
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 30 * time.Second
	}
}

// fillPlaces gives the default runtime, the port lock directory, the
// preview host and the logger their defaults.
func (o *Options) fillPlaces() {
	if o.PortLockDir == "" {
		o.PortLockDir = launcher.DefaultLockDir()
	}
	if o.DefaultRuntime == "" {
		o.DefaultRuntime = provider.RuntimeNative
		if _, ok := o.Runtimes[provider.RuntimeNative]; !ok {
			for name := range o.Runtimes {
				o.DefaultRuntime = name
			}
		}
	}
	if o.PreviewHost == "" {
		o.PreviewHost = "127.0.0.1"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// newManager is a manager on opts with an empty registry and no launcher.
func newManager(opts Options) *Manager {
	return &Manager{
		opts:      opts,
		clk:       opts.Clock,
		log:       opts.Logger,
		ports:     launcher.NewPortRange(opts.PortMin, opts.PortMax, opts.PortLockDir),
		launchers: map[provider.Runtime]*launcher.Launcher{},
		reg:       newIndex(),
		flush:     flusher{every: activityFlushEvery(opts.Minute), clk: opts.Clock, dirty: map[*entry]struct{}{}},
	}
}

// addLaunchers gives each runtime its launcher. invalid_argument.
func (m *Manager) addLaunchers() error {
	for name, d := range m.opts.Runtimes {
		l, err := launcher.New(launcher.Config{
			Driver:       d,
			Ports:        m.ports,
			Clock:        m.opts.Clock,
			ReadyTimeout: m.opts.ReadyTimeout,
			StopGrace:    m.opts.StopGrace,
			// A workload being spawned is never taken for an orphan.
			StartGate: m.spawnMu.RLocker(),
			Logger:    m.opts.Logger,
			// Previews' cookies are the daemon's to keep: see
			// launcher.Config.OwnAddresses.
			OwnAddresses: true,
		})
		if err != nil {
			return provider.Errorf(provider.InvalidArgument, "manager: runtime %s: %v", name, err)
		}
		m.launchers[name] = l
	}
	return nil
}

// warm lets the default runtime prepare the start of a default sandbox, so
// that the first create after the daemon starts is as quick as the next.
func (m *Manager) warm() {
	if l, ok := m.launchers[m.opts.DefaultRuntime]; ok {
		snap := m.opts.Snapshots[DefaultSnapshot]
		l.Warm(driver.Spec{Root: m.opts.Root, Isolation: snap.Isolation, Command: snap.Command})
	}
}

// Close stops the manager's goroutines: recovery work not yet begun is
// dropped (the next manager on the root does it), work under way is waited
// for, and what the runtimes prepared for the next create (a parked init)
// ends. Workloads keep running: the next manager on the same root adopts
// them. Use StopAll to end them too.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
	m.closeFlush()
	m.ports.Close()
	for _, l := range m.launchers {
		l.Cool()
	}
}

// Recovered is closed once the work a restart left (interrupted stops and
// deletes, checks of adopted workloads, orphans) is done, or dropped by
// Close.
func (m *Manager) Recovered() <-chan struct{} { return m.recovered }

// StopAll stops every started sandbox, for a daemon asked to reap on exit.
// It first waits for the restart's recovery, which may be stopping some.
func (m *Manager) StopAll(ctx context.Context) {
	select {
	case <-m.recovered:
	case <-ctx.Done():
		return
	}
	var wg sync.WaitGroup
	for _, e := range m.entries() {
		if e.unreadable != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.stop(ctx, e, "daemon shutdown")
		}()
	}
	wg.Wait()
}

// Warnings describe what the manager found and left alone that its user
// should look at: folders in the root that are not sandboxes.
func (m *Manager) Warnings() []string {
	var out []string
	for _, name := range m.foreign {
		out = append(out, fmt.Sprintf("%s is not a sandbox (it has no %s); sandplane leaves it alone: move it out of the root", m.dir(name), recordFile))
	}
	return out
}

// CountKey is what Counts counts sandboxes by.
type CountKey struct {
	State   provider.State
	Runtime provider.Runtime
}

// Counts is how many sandboxes are in each state on each runtime, as
// recorded: it reads no workload, so it costs nothing to ask often (metrics).
func (m *Manager) Counts() map[CountKey]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[CountKey]int{}
	for _, e := range m.reg.order {
		st := e.rec.State
		if e.unreadable != nil {
			st = provider.StateError
		}
		out[CountKey{State: st, Runtime: e.rec.Runtime}]++
	}
	return out
}

// Minute is the length of one interval minute.
func (m *Manager) Minute() time.Duration { return m.opts.Minute }

// Root is the state directory.
func (m *Manager) Root() string { return m.opts.Root }

// Runtimes lists the runtime names this manager can use, sorted.
func (m *Manager) Runtimes() []provider.Runtime {
	var out []provider.Runtime
	for name := range m.opts.Runtimes {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Snapshots lists the snapshot names, sorted.
func (m *Manager) Snapshots() []string {
	var out []string
	for name := range m.opts.Snapshots {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// lookup finds a sandbox by id, then by name. not_found.
func (m *Manager) lookup(idOrName string) (*entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookupLocked(idOrName)
}

func (m *Manager) lookupLocked(idOrName string) (*entry, error) {
	if e, ok := m.reg.lookup(idOrName); ok {
		return e, nil
	}
	return nil, provider.Errorf(provider.NotFound, "sandbox %q not found: no sandbox has that id or name", idOrName)
}

// entries returns every registered sandbox, oldest first.
func (m *Manager) entries() []*entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reg.order)
}

// emission is an event an update announces once its record is on disk.
type emission struct {
	t      provider.EventType
	source string
}

// bumped announces that a state change moved lastActivityAt: every state
// change is activity, and every bump is an event with its source.
var bumped = emission{provider.EventActivity, provider.SourceMutation}

// update applies fn to a copy of e's record, stamps it, persists it, and
// only once it is on disk makes it e's record, emits events, and returns the
// new public view. On error e is unchanged. The events go out under the
// sandbox's persist lock, so that a sandbox's events arrive in the order
// its records were written. The write is durable (see persist).
func (m *Manager) update(e *entry, fn func(r *record), events ...emission) (provider.Sandbox, error) {
	return m.write(e, fn, true, events...)
}

// write is update, durable or not (see writeFileAtomic).
func (m *Manager) write(e *entry, fn func(r *record), durable bool, events ...emission) (provider.Sandbox, error) {
	return m.commit(e, nil, fn, durable, events...)
}

// commit is write with p, fn's record prepared while the workload started
// (see prepare): while p still follows e's record, p's record is renamed
// into place; otherwise (a refresh or another update came between, or the
// preparation failed) p is discarded and fn's record written afresh. A
// nil p is write.
func (m *Manager) commit(e *entry, p *prepared, fn func(r *record), durable bool, events ...emission) (provider.Sandbox, error) {
	return m.commitIf(e, p, nil, fn, durable, events...)
}

// commitIf is commit unless cond, asked about e's current record under the
// persist lock (which a refresh takes too), says no: then its error, and
// nothing is written.
func (m *Manager) commitIf(e *entry, p *prepared, cond func(cur *record) error, fn func(r *record), durable bool, events ...emission) (provider.Sandbox, error) {
	if p != nil {
		<-p.done // before the persist lock, which the preparation never takes
	}
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	// Every write of e.rec holds the persist lock, so cur stays current.
	m.mu.Lock()
	cur := e.rec
	registered := m.reg.has(e)
	m.mu.Unlock()
	switch {
	case !registered:
		// Deleted (or rolled back) since the caller looked it up: writing
		// now would recreate a record in a directory that is gone, or in
		// a successor's with the same id. p's file, if any, went with the
		// directory.
		return m.info(cur), provider.Errorf(provider.NotFound, "sandbox %q was deleted", cur.ID)
	case e.unreadable != nil:
		return m.info(cur), unreadableErr(cur.ID, e.unreadable)
	}
	if cond != nil {
		if err := cond(cur); err != nil {
			p.discard()
			return m.info(cur), err
		}
	}
	var next *record
	if p.follows(cur) {
		if err := p.install(durable); err != nil {
			p.discard()
			return m.info(cur), err
		}
		next = p.next
	} else {
		p.discard()
		next = cur.clone()
		fn(next)
		next.UpdatedAt = m.clk.Now()
		if err := persistIn(m.dir(next.ID), next, durable); err != nil {
			return m.info(cur), err
		}
	}
	e.activityDirty = false // the record on disk has the latest activity
	m.install(e, next)
	s := m.viewOf(e)
	s.Labels = cloneMap(s.Labels)
	for _, ev := range events {
		m.emit(ev.t, s, ev.source)
	}
	return s, nil
}

// available fails, at once, when e cannot take an operation: a restart is
// still recovering it, or its record is unreadable. failed_precondition.
func (m *Manager) available(e *entry) error {
	m.mu.Lock()
	doing, id := e.recovering, e.rec.ID
	m.mu.Unlock()
	if e.unreadable != nil {
		return unreadableErr(id, e.unreadable)
	}
	if doing != "" {
		return provider.Errorf(provider.FailedPrecondition, "sandbox %s is still %s after the daemon restart; retry in a few seconds", id, doing)
	}
	return nil
}

func unreadableErr(id string, cause error) error {
	return provider.Errorf(provider.FailedPrecondition, "sandbox %s has an unreadable record (%v): only delete works on it", id, cause)
}

func (m *Manager) info(r *record) provider.Sandbox {
	s := provider.Sandbox{
		ID:                 r.ID,
		Name:               r.Name,
		State:              r.State,
		Runtime:            r.Runtime,
		Snapshot:           r.Snapshot,
		Labels:             cloneMap(r.Labels),
		Port:               r.Port,
		CreatedAt:          r.CreatedAt,
		UpdatedAt:          r.UpdatedAt,
		LastActivityAt:     r.LastActivityAt,
		AutoStopInterval:   r.AutoStopInterval,
		SessionID:          clonePtr(r.SessionID),
		AutoDeleteInterval: autoDeleteMinutes(r),
		Public:             r.Public,
		ErrorReason:        r.ErrorReason,
		Unisolated:         m.unisolated(r),
	}
	if r.State == provider.StateStarted && r.Port > 0 {
		s.PreviewURL = m.previewLink(r)
	}
	return s
}

func (m *Manager) emit(t provider.EventType, s provider.Sandbox, source string) {
	if m.opts.OnEvent == nil {
		return
	}
	m.opts.OnEvent(Event{Type: t, Sandbox: s, Source: source, Time: m.clk.Now()})
}

// autoDeleteMinutes is r's auto-delete interval as the contract says it:
// -1 for never.
func autoDeleteMinutes(r *record) int {
	if r.AutoDeleteInterval == nil {
		return -1
	}
	return *r.AutoDeleteInterval
}
