package provider

import (
	"context"
	"time"
)

// ReasonStopper is implemented by providers that record why a sandbox was
// stopped. The reason becomes the stopped sandbox's errorReason and reaches
// the sandbox.stopped event, so a dashboard or a log consumer can tell a
// pool's eviction from an idle auto-stop.
type ReasonStopper interface {
	// StopWithReason is Provider.Stop with a reason: 1 to 64 characters,
	// starting with a letter or digit, then letters, digits and " _.:/-".
	// invalid_argument: a malformed reason. Otherwise as Stop.
	StopWithReason(ctx context.Context, idOrName, reason string) (*Sandbox, error)
}

// StopReasonManual is the errorReason of a sandbox stopped by a caller that
// gave no reason.
const StopReasonManual = "stopped"

// AutoDeleter is implemented by providers that delete stopped sandboxes on
// their own timer (Daytona's autoDeleteInterval), which keeps what a crashed
// host server parked from lingering.
type AutoDeleter interface {
	// SetAutoDeleteInterval deletes the sandbox once it has been stopped and
	// idle for minutes; a negative value disables it and 0 deletes the
	// sandbox as soon as it stops. It does not reset the idle clock.
	// failed_precondition: 0 beside auto-pause (see AutoPauser). not_found.
	SetAutoDeleteInterval(ctx context.Context, idOrName string, minutes int) (*Sandbox, error)
}

// TTLSetter is implemented by providers that destroy a sandbox a fixed
// time after it was asked for (Daytona's ttlMinutes), whatever its state or
// activity: a hard bound on what a lost host server can leave behind, where
// the idle intervals bound only what sits unused. Traits.TTL says so.
type TTLSetter interface {
	// SetTTL destroys the sandbox minutes after this call, started,
	// stopped or paused, however busy; each call replaces the deadline and
	// 0 clears it. It is not activity. The sandbox's AutoDestroyAt is the
	// deadline. invalid_argument (< 0), not_found.
	SetTTL(ctx context.Context, idOrName string, minutes int) (*Sandbox, error)
}

// AutoPauser is implemented by providers that pause an idle sandbox (its
// processes frozen with their memory) instead of stopping it, so that the
// next use finds it as it was. Traits.AutoPause says so.
type AutoPauser interface {
	// SetAutoPauseInterval pauses the sandbox once it has been idle for
	// minutes (StatePaused); 0 disables. Start resumes a paused sandbox, and
	// so does traffic through its toolbox. It does not reset the idle clock.
	// At most one of auto-stop and auto-pause is on: failed_precondition
	// when minutes > 0 and the auto-stop interval is not 0, or the sandbox
	// is ephemeral (auto-delete 0). invalid_argument (< 0), not_found.
	SetAutoPauseInterval(ctx context.Context, idOrName string, minutes int) (*Sandbox, error)
}

// SecretsAttacher is implemented by providers that keep secrets for the
// organization and mount them into sandboxes by name. The workload's env
// var holds a placeholder, which the provider's egress replaces by the
// value on the way to the hosts the secret allows; no answer of any method
// carries a value, nor Get or List the placeholder. Traits.Secrets says so.
type SecretsAttacher interface {
	// SetSecrets replaces what the sandbox mounts: env var name to the
	// name of a secret of the organization; an empty map detaches all. A
	// running workload keeps the env it started with: the new set applies
	// to the egress at once and to the env from the next start.
	// invalid_argument: a malformed env var name, or a secret the
	// organization does not have. not_found.
	SetSecrets(ctx context.Context, idOrName string, secrets map[string]string) error
}

// WarmPool keeps Size started sandboxes of one snapshot ready, so that a
// create of that snapshot (with the default user and no env, volumes or
// secrets of its own) is answered by one of them at once.
type WarmPool struct {
	ID       string
	Snapshot string
	Target   string
	// Size is how many the pool keeps ready; Ready how many are.
	Size, Ready int
	// ErrorReason says why the pool cannot fill, when it cannot.
	ErrorReason string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// WarmPoolRequest asks for a warm pool.
type WarmPoolRequest struct {
	// Snapshot, by name or id, is required.
	Snapshot string
	// Target is the region; empty for the provider's default.
	Target string
	// Size is at least 1.
	Size int
}

// WarmPooler is implemented by providers that keep warm pools of started
// sandboxes (Daytona's /warm-pools). Traits.WarmPools says so.
type WarmPooler interface {
	// WarmPools lists the organization's pools.
	WarmPools(ctx context.Context) ([]WarmPool, error)
	// CreateWarmPool starts filling a pool. invalid_argument: no snapshot,
	// or Size < 1. preflight_failed: an unknown snapshot.
	// already_exists: a pool of that snapshot and target exists.
	// resource_exhausted: beyond the organization's quota.
	CreateWarmPool(ctx context.Context, req WarmPoolRequest) (*WarmPool, error)
	// ResizeWarmPool sets the pool's Size; 0 drains it. invalid_argument
	// (< 0), not_found.
	ResizeWarmPool(ctx context.Context, id string, size int) (*WarmPool, error)
	// DeleteWarmPool drains and removes the pool. Deleting a missing pool
	// is not an error.
	DeleteWarmPool(ctx context.Context, id string) error
}
