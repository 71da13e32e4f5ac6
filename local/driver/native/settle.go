package native

import (
	"context"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// ProbeIsolation reports whether bwrap isolation works here: nil when it
// does, else preflight_failed saying why and naming the fix (no PID
// namespaces, bubblewrap not installed, or no unprivileged user
// namespaces). Once it has passed it passes without running bwrap again.
func (r *Driver) ProbeIsolation(ctx context.Context) error {
	// A port, as every spec has one; nothing binds it.
	return r.preflightIsolation(ctx, driver.Spec{Isolation: IsolationBwrap, Port: 1}, "")
}

// SettleIsolation fixes the isolation of specs that name none, once, before
// the first Start (it is not safe beside one). Unset (WithIsolation("")),
// it becomes IsolationBwrap where ProbeIsolation passes and IsolationNone
// where it does not, and IsolationFallback then says why. An explicit
// IsolationNone is kept without a probe; an explicit IsolationBwrap that
// cannot work is ProbeIsolation's error, preflight_failed, so that a
// daemon asked to isolate does not start without. ctx's error when it ends
// first.
func (r *Driver) SettleIsolation(ctx context.Context) error {
	switch r.isolation {
	case IsolationNone:
		return nil
	case IsolationBwrap:
		return r.ProbeIsolation(ctx)
	case "":
	default:
		return provider.Errorf(provider.PreflightFailed, "isolation %q is not known: use %q or %q", r.isolation, IsolationNone, IsolationBwrap)
	}
	err := r.ProbeIsolation(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.isolation, r.isolationFallback = IsolationBwrap, err
	if err != nil {
		r.isolation = IsolationNone
	}
	return nil
}

// Isolation is the isolation of specs that name none: IsolationNone or
// IsolationBwrap.
func (r *Driver) Isolation() string { return r.isolationOf(driver.Spec{}) }

// IsolationFallback says why SettleIsolation left Isolation at
// IsolationNone when none was asked for; nil when isolation works or an
// isolation was set explicitly.
func (r *Driver) IsolationFallback() error { return r.isolationFallback }
