package pool

import (
	"context"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// Path says how Acquire got its sandbox.
type Path string

const (
	// PathWarm: the key's sandbox was parked running.
	PathWarm Path = "warm"
	// PathResumed: the key's sandbox was parked stopped and started again.
	PathResumed Path = "resumed"
	// PathCreated: a new sandbox.
	PathCreated Path = "created"
)

// Reason says why the pool stopped or deleted a sandbox. Reasons are
// logged, counted, and shown as "pool: <reason>" in the stopped event of
// providers that record one.
type Reason string

const (
	// ReasonTTLExpired: the keep-warm TTL ran out (the sandbox is stopped),
	// or the parked-stopped TTL did (it is deleted).
	ReasonTTLExpired Reason = "ttl_expired"
	// ReasonEvicted: stopped (never deleted) to make room under the warm cap
	// for a turn of another key that ended later.
	ReasonEvicted Reason = "evicted"
	// ReasonTurnFailed: its turn was released with OutcomeFailed; deleted,
	// since what a failed turn left behind is not worth reusing.
	ReasonTurnFailed Reason = "turn_failed"
	// ReasonShutdownIdle: Shutdown stopped it while parked (or deleted it
	// parked stopped, when nothing would find it again).
	ReasonShutdownIdle Reason = "shutdown_idle"
	// ReasonShutdownInFlight: Shutdown deleted it while its turn ran, or
	// the pool found the in-flight turn of a previous process.
	ReasonShutdownInFlight Reason = "shutdown_in_flight"
	// ReasonProviderLost: the provider lost it (not found, destroyed) or
	// reports it in error; an errored one is deleted.
	ReasonProviderLost Reason = "provider_lost"
	// ReasonIncompatible: its spec fingerprint differs from the request's,
	// the caller's Check refused it, or it could not be given its spec.
	ReasonIncompatible Reason = "incompatible"
	// ReasonExplicit: the caller asked (Discard, or OutcomeDiscard).
	ReasonExplicit Reason = "explicit"
	// ReasonSuperseded: a turn waited longer than BusyWait for this one,
	// took the key with a new sandbox, and this turn's sandbox is nobody's.
	ReasonSuperseded Reason = "superseded"
)

// Reasons lists every Reason, for dashboards that want a zero for each.
var Reasons = []Reason{
	ReasonTTLExpired, ReasonEvicted, ReasonTurnFailed, ReasonShutdownIdle, ReasonShutdownInFlight,
	ReasonProviderLost, ReasonIncompatible, ReasonExplicit, ReasonSuperseded,
}

// stopReasonParked is what a stop for parking (not a teardown) says in the
// stopped event: a finishing turn found every warm slot taken, or keep-warm
// is off.
const stopReasonParked = "pool: parked"

func (r Reason) stopReason() string { return "pool: " + string(r) }

// Outcome is how a turn ended, which decides what Release does with its
// sandbox.
type Outcome int

const (
	// OutcomeOK parks the sandbox for the key's next turn.
	OutcomeOK Outcome = iota
	// OutcomeFailed deletes it (ReasonTurnFailed).
	OutcomeFailed
	// OutcomeDiscard deletes it (ReasonExplicit).
	OutcomeDiscard
)

func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeFailed:
		return "failed"
	case OutcomeDiscard:
		return "discard"
	}
	return "unknown"
}

// Spec is what a sandbox must be for a turn. Everything but Check goes into
// its fingerprint; a parked sandbox with another fingerprint is torn down
// (ReasonIncompatible) rather than handed out.
type Spec struct {
	Snapshot string
	Runtime  provider.Runtime
	// Env values are secrets: the pool hashes them under the store's secret
	// and never stores nor logs them.
	Env    map[string]string
	Labels map[string]string
	// Resources, when set, are applied with Resize after create; a provider
	// that cannot (Daytona without its resize flag) fails the create. Leave
	// them zero to take the snapshot's.
	Resources provider.ResizeRequest
	// Check, when set, is called on a parked sandbox once it runs, before it
	// is handed out again, for what the fingerprint cannot see (that the
	// credentials it was started with are still valid, say). An error tears
	// it down (ReasonIncompatible) and a new sandbox is made; the error is
	// logged, so it must not carry secrets.
	Check func(ctx context.Context, sb *provider.Sandbox) error
}

// Stage is one timed step of an Acquire.
type Stage struct {
	Name string
	Took time.Duration
}

// Stage names, in the order they can happen.
const (
	StageWaitKey = "wait_key" // another turn of the key was in flight
	StageLookup  = "lookup"   // the store and the provider's view of the parked sandbox
	StageStart   = "start"
	StageCreate  = "create"
	StageCheck   = "check"
	StageRefresh = "refresh" // resetting the idle clock of a warm sandbox
	StageClaim   = "claim"   // the compare-and-set of the key's pointer
)
