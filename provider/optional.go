package provider

import "context"

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
	// not_found.
	SetAutoDeleteInterval(ctx context.Context, idOrName string, minutes int) (*Sandbox, error)
}
