package simulator

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/url"
	"slices"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator/internal/engine"
)

// Config configures a Simulator. The zero value is usable: real clock, any
// API key accepted, the instant profile, the none backend.
type Config struct {
	// Clock drives every delay, job and timeout. Default: clock.Real().
	Clock clock.Clock
	// APIKeys are the accepted bearer keys; empty accepts any key. Each key
	// is its own organization, as a Daytona API key is.
	APIKeys []string
	// AdminKey is the bearer key of the /_sim admin API, which no API key
	// opens. Empty: New generates one (see Simulator.AdminKey).
	AdminKey string
	// AnyHost answers requests whatever their Host header. Off, only
	// loopback names, *.localhost and BaseURL's host (with the preview
	// form <port>-<id>.<that host>) are answered, so that a web page cannot
	// reach a simulator on loopback through DNS rebinding. Turn it on only
	// for a listener on a network address; New refuses it without APIKeys.
	AnyHost bool
	// Profile holds the transition delays. Default: InstantProfile().
	Profile Profile
	// Minute is the length of one interval minute (autoStopInterval and
	// friends). Default: one minute.
	Minute time.Duration
	// Backend runs the sandboxes' workloads. Default: NoneBackend().
	Backend Backend
	// Seed seeds ids, delay jitter and random faults, so that a run can be
	// replayed. Zero picks a random seed.
	Seed uint64
	// BaseURL is the simulator's public base, used in toolboxProxyUrl and
	// preview URLs. Empty derives it from each request's Host.
	BaseURL string
	// SpecPath is the upstream OpenAPI document. Empty finds the one inside
	// the pinned api-client module (see LocateSpec).
	SpecPath string
	// DisableResize answers resize with 404, as a Daytona whose
	// SANDBOX_RESIZE feature flag is off (its self-hosted default) does.
	DisableResize bool
	// DisableValidation turns off request validation against the spec.
	DisableValidation bool
	// ValidateResponses checks every API response against the spec (with
	// SpecExceptions applied) and records violations; see SpecViolations.
	// Tests turn it on.
	ValidateResponses bool
	// DefaultSnapshot is used when a create names none. Default:
	// "daytonaio/sandbox:0.6.0-slim".
	DefaultSnapshot string
	// Snapshots are the snapshots a create may name besides the default.
	// A snapshot named "*" accepts any name.
	Snapshots []Snapshot
	// Regions are the valid targets; the first is the default. Default: "us".
	Regions []string
	// WarmPool is the size of the default warm pool: started sandboxes of
	// the default snapshot in the default region, the simulator's own,
	// which a matching create of any organization takes over at once
	// (warmpools.go). GET /warm-pools lists it; no organization changes
	// it. 0: no default pool.
	WarmPool int
	// Prices turn the accounted seconds into a cost. Default: DefaultPrices().
	Prices Prices
	// CallLogSize caps the call log. Default 10000.
	CallLogSize int
	// CostHistory is how many deleted sandboxes keep their own row in the
	// cost report; older ones count in its totals only. Default 1000.
	CostHistory int
	// ProxyIdleKeepAlive, when positive, is how long an open preview or
	// toolbox connection that moves no bytes keeps its sandbox alive. Not
	// Daytona's: its proxy counts an open connection for as long as it is
	// open (the default, 0). Set it to hold a host to the daemon's
	// previewIdleKeepAlive.
	ProxyIdleKeepAlive time.Duration
	// Logger receives operational messages. Default: discard.
	Logger *slog.Logger
	// Webhooks are the URLs every organization's webhooks are delivered
	// to, as Daytona's Svix delivers them (webhooks.go); the admin API
	// (PUT /_sim/webhooks) replaces them at run time.
	Webhooks []string
	// WebhookSecret signs the deliveries: whsec_ and the base64 of 16 to
	// 64 bytes. Empty: a generated one (Run prints it).
	WebhookSecret string

	// egress points the secrets proxy's upstream at test servers; tests
	// only (egress.go).
	egress egressHooks
}

// Snapshot is a named launch profile with its resources.
type Snapshot struct {
	Name                   string
	CPU, GPU, Memory, Disk int
}

// Range is a delay drawn uniformly from [Min, Max].
type Range = engine.Range

// Profile holds how long each raw-state transition takes.
type Profile = engine.Profile

// InstantProfile makes every transition take no time at all: create and
// start answer started, and stop or delete finish right after answering.
func InstantProfile() Profile { return engine.InstantProfile() }

// DaytonaProfile uses the figures measured against Daytona (create
// 1.2-1.7 s, start from stopped 0.7-0.8 s, restore from archive 33-66 s) and
// plausible guesses for the others.
func DaytonaProfile() Profile { return engine.DaytonaProfile() }

// ProfileByName returns "instant" (also for "") or "daytona".
func ProfileByName(name string) (Profile, error) { return engine.ProfileByName(name) }

// DefaultPrices are Daytona's published per-second prices at the time of
// writing. Pass your own for anything that matters.
func DefaultPrices() Prices {
	return Prices{
		CPUPerSecond:       0.0000140,
		MemoryGiBPerSecond: 0.0000045,
		DiskGiBPerSecond:   0.00000003,
		FreeDiskGiB:        5,
	}
}

const (
	defaultSnapshot       = "daytonaio/sandbox:0.6.0-slim"
	defaultCallLogSize    = 10000
	defaultCostHistory    = 1000
	maxAutoArchive        = 43200
	createWait            = 30 * time.Second
	warmPoolOrg           = "00000000-0000-0000-0000-000000000000"
	defaultSignedPreviewS = 60
)

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Profile.Name == "" {
		c.Profile = InstantProfile()
	}
	if c.Minute <= 0 {
		c.Minute = time.Minute
	}
	if c.Backend == nil {
		c.Backend = NoneBackend()
	}
	if c.Seed == 0 {
		c.Seed = mrand.Uint64()
	}
	if c.DefaultSnapshot == "" {
		c.DefaultSnapshot = defaultSnapshot
	}
	if len(c.Regions) == 0 {
		c.Regions = []string{"us"}
	}
	if c.Prices == (Prices{}) {
		c.Prices = DefaultPrices()
	}
	if c.CallLogSize <= 0 {
		c.CallLogSize = defaultCallLogSize
	}
	if c.CostHistory <= 0 {
		c.CostHistory = defaultCostHistory
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// secure checks the settings that guard the simulator and makes the admin
// key when none is given.
func (c *Config) secure() error {
	if c.AnyHost && len(c.APIKeys) == 0 {
		return errors.New("simulator: answering any Host (a network listener) needs APIKeys: with none, any key is accepted")
	}
	if slices.Contains(c.APIKeys, "") {
		return errors.New("simulator: an empty API key")
	}
	if c.AdminKey == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("simulator: make the admin key: %w", err)
		}
		c.AdminKey = base64.RawURLEncoding.EncodeToString(b)
	}
	if slices.Contains(c.APIKeys, c.AdminKey) {
		return errors.New("simulator: the admin key is also an API key: pick another")
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || u.Hostname() == "" || u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("simulator: base URL %q is not an http(s) URL with a host", c.BaseURL)
		}
	}
	return nil
}

// scaled shrinks a Daytona wall-clock period by Minute, for the timings that
// live in the same world as the intervals (jobs, activity throttles).
func (c Config) scaled(d time.Duration) time.Duration {
	s := time.Duration(float64(d) * float64(c.Minute) / float64(time.Minute))
	if s <= 0 {
		s = time.Millisecond
	}
	return s
}
