package pool

import (
	"log/slog"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Defaults of the options.
const (
	DefaultKeepWarm          = 2 * time.Minute
	DefaultWarmCap           = 20
	DefaultAutoStopMinutes   = 15
	DefaultAutoDeleteMinutes = 30
	DefaultBusyWait          = 10 * time.Second
	DefaultStopTimeout       = 30 * time.Second
	DefaultOpTimeout         = 2 * time.Minute
	DefaultPollInterval      = 500 * time.Millisecond
	// maxAutoDeleteMinutes keeps auto-delete ahead of Daytona's auto-archive
	// (7 days by default): restoring an archive (33-66 s) is slower than a
	// fresh create, so an archived sandbox is worth nothing to a pool.
	maxAutoDeleteMinutes = 7*24*60 - 1
)

type config struct {
	clk          clock.Clock
	store        Store
	log          *slog.Logger
	obs          Observer
	name         string
	keepWarm     time.Duration
	warmCap      int
	autoStop     int
	autoDelete   int
	minute       time.Duration
	stoppedTTL   time.Duration // <0: default
	busyWait     time.Duration
	stopTimeout  time.Duration
	opTimeout    time.Duration
	pollInterval time.Duration
	heartbeat    time.Duration // <0: default
	maxLease     time.Duration // <0: default
	lookup       func(string) (string, bool)
	envSet       bool
}

func defaults() config {
	return config{
		clk:          clock.Real(),
		log:          slog.New(slog.DiscardHandler),
		name:         "default",
		keepWarm:     DefaultKeepWarm,
		warmCap:      DefaultWarmCap,
		autoStop:     DefaultAutoStopMinutes,
		autoDelete:   DefaultAutoDeleteMinutes,
		minute:       time.Minute,
		stoppedTTL:   -1,
		busyWait:     DefaultBusyWait,
		stopTimeout:  DefaultStopTimeout,
		opTimeout:    DefaultOpTimeout,
		pollInterval: DefaultPollInterval,
		heartbeat:    -1,
		maxLease:     -1,
	}
}

// Option configures a Pool.
type Option func(*config)

// WithClock runs every timer of the pool on c. Default clock.Real().
func WithClock(c clock.Clock) Option { return func(o *config) { o.clk = c } }

// WithStore keeps the key pointers in s. Default a new MemoryStore.
func WithStore(s Store) Option { return func(o *config) { o.store = s } }

// WithLogger logs teardowns and failures to l. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *config) { o.log = l } }

// WithObserver tells o what the pool does (poolmetrics.New makes one that
// counts it for Prometheus). Default: nobody.
func WithObserver(obs Observer) Option { return func(o *config) { o.obs = obs } }

// WithName names the pool in its labels ("sandplane.pool") and metrics, for
// hosts that run several. Default "default".
func WithName(name string) Option { return func(o *config) { o.name = name } }

// WithKeepWarm parks a released sandbox running for d before stopping it:
// the off switch of park-to-running, 0 turns it off (every release stops).
// invalid_argument from New when negative. Default 2 min.
func WithKeepWarm(d time.Duration) Option { return func(o *config) { o.keepWarm = d } }

// WithWarmCap caps the sandboxes parked running, idle between turns; it
// bounds nothing else: turns in flight are never counted, and Acquire never
// waits for or refuses a sandbox because other turns are active. A turn that
// ends when every warm slot is taken evicts the least recently parked warm
// sandbox of another key (stopped, never deleted: ReasonEvicted) and takes
// its slot; when none can be evicted (0, or the warm ones are already being
// stopped) it parks stopped. 0 means nothing parks running.
// invalid_argument from New when negative. Default 20.
func WithWarmCap(n int) Option { return func(o *config) { o.warmCap = n } }

// WithAutoStop sets the provider's auto-stop on every sandbox the pool
// creates, in the provider's interval minutes: what stops a sandbox whose
// host died with it parked running or in use. Default 15; 0 disables.
func WithAutoStop(minutes int) Option { return func(o *config) { o.autoStop = minutes } }

// WithAutoDelete sets the provider's auto-delete (provider.AutoDeleter) on
// every sandbox the pool creates, in interval minutes, 1 to 10079 (Daytona
// would archive it after 7 days, and an archive is slower to restore than a
// fresh create). Default 1440 (a day).
func WithAutoDelete(minutes int) Option { return func(o *config) { o.autoDelete = minutes } }

// WithMinute tells the pool how long the provider's interval minute is
// (a daemon or simulator run with --minute). Default one minute.
func WithMinute(d time.Duration) Option { return func(o *config) { o.minute = d } }

// WithStoppedTTL sets how long a sandbox stays parked stopped before the
// pool deletes it (ReasonTTLExpired). Providers without auto-delete (local)
// rely on this alone; on the others the provider's timer usually wins and
// the pool only forgets the pointer. Default: the auto-delete interval.
func WithStoppedTTL(d time.Duration) Option { return func(o *config) { o.stoppedTTL = d } }

// WithBusyWait sets how long Acquire waits for the key's turn in flight to
// be released before it gives the key a new sandbox and the older turn's
// sandbox is torn down at its release (ReasonSuperseded). 0 never waits.
// Default 10 s.
func WithBusyWait(d time.Duration) Option { return func(o *config) { o.busyWait = d } }

// WithStopTimeout bounds how long a stop or delete is awaited before the
// pool treats the provider as hung: the sandbox counts as running (and, if
// it was warm, against the warm cap) and a poll of the real state goes on in
// the background. Default 30 s.
func WithStopTimeout(d time.Duration) Option { return func(o *config) { o.stopTimeout = d } }

// WithOpTimeout bounds a create or a start. Default 2 min.
func WithOpTimeout(d time.Duration) Option { return func(o *config) { o.opTimeout = d } }

// WithPollInterval sets how often the real state is polled while a stop is
// awaited or a sandbox settles. Default 500 ms.
func WithPollInterval(d time.Duration) Option { return func(o *config) { o.pollInterval = d } }

// WithHeartbeat refreshes the activity of a sandbox in use every d, so that
// the provider's auto-stop never ends a long turn whose sandbox is quiet
// (an agent waiting on a model). 0 disables. Default: a third of the
// auto-stop interval. The refresh of one lease stops at WithMaxLease.
func WithHeartbeat(d time.Duration) Option { return func(o *config) { o.heartbeat = d } }

// WithMaxLease bounds how long a lease's activity is refreshed: past d from
// its claim the heartbeat stops, Lease.State and Inspect report it
// LeaseExpired, and its sandbox is left to the provider's auto-stop, as on
// Daytona, however long the host holds the lease. Release still works.
// invalid_argument from New unless positive. Default the auto-stop interval
// times 4 (an hour); with auto-stop off, no bound, since nothing refreshes.
func WithMaxLease(d time.Duration) Option { return func(o *config) { o.maxLease = d } }

func (c *config) finish(p provider.Provider) error {
	switch {
	case c.clk == nil:
		return provider.Errorf(provider.InvalidArgument, "pool: nil clock")
	case c.warmCap < 0:
		return provider.Errorf(provider.InvalidArgument, "pool: WarmCap must not be negative (0: nothing parks running)")
	case c.keepWarm < 0:
		return provider.Errorf(provider.InvalidArgument, "pool: KeepWarm must not be negative (0 turns park-to-running off)")
	case c.autoStop < 0:
		return provider.Errorf(provider.InvalidArgument, "pool: AutoStop must not be negative (0 disables)")
	case c.autoDelete < 0 || c.autoDelete > maxAutoDeleteMinutes:
		return provider.Errorf(provider.InvalidArgument, "pool: AutoDelete must be 0 to %d minutes (got %d): longer would let Daytona archive the sandbox first", maxAutoDeleteMinutes, c.autoDelete)
	case c.minute <= 0 || c.stopTimeout <= 0 || c.opTimeout <= 0 || c.pollInterval <= 0:
		return provider.Errorf(provider.InvalidArgument, "pool: Minute, StopTimeout, OpTimeout and PollInterval must be positive")
	case c.busyWait < 0:
		return provider.Errorf(provider.InvalidArgument, "pool: BusyWait must not be negative")
	case c.maxLease == 0:
		return provider.Errorf(provider.InvalidArgument, "pool: MaxLease must be positive")
	case c.name == "" || len(c.name) > 63:
		return provider.Errorf(provider.InvalidArgument, "pool: the name must be 1 to 63 characters")
	}
	if c.store == nil {
		c.store = NewMemoryStore()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	if c.stoppedTTL < 0 {
		c.stoppedTTL = time.Duration(c.autoDelete) * c.minute
		if _, ok := p.(provider.AutoDeleter); ok {
			// Leave the provider's timer (Daytona's runs every 10 s) the
			// first go; the pool only cleans up after it.
			c.stoppedTTL += c.minute
		}
	}
	if c.maxLease < 0 {
		c.maxLease = 4 * time.Duration(c.autoStop) * c.minute // 0 with auto-stop off: no bound
	}
	if c.heartbeat < 0 {
		c.heartbeat = 0
		if c.autoStop > 0 {
			c.heartbeat = time.Duration(c.autoStop) * c.minute / 3
		}
	}
	return nil
}
