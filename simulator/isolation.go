package simulator

import (
	"context"

	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
)

// UnisolatedWarning is the line Run logs at start when the native
// workloads run without isolation that nobody opted out of.
const UnisolatedWarning = "native sandboxes run unisolated: each sees the host's files, /tmp and network, and the other sandboxes; " +
	"a toolbox upload to /tmp writes the host's /tmp. Fix what the reason names so that bubblewrap isolates them, " +
	"or pass --isolation none to run them so without this warning"

// settleIsolation fixes the native workloads' isolation before the first
// one starts (native.Driver.SettleIsolation) and says once when it fell
// back to none. preflight_failed: --isolation bwrap, which cannot work
// here; the error names the fix.
func (cfg RunConfig) settleIsolation(ctx context.Context, nat *native.Driver) error {
	if err := nat.SettleIsolation(ctx); err != nil {
		return provider.Errorf(provider.Code(err), "--isolation %s: %s", cfg.Isolation, provider.Message(err))
	}
	if err := nat.IsolationFallback(); err != nil {
		cfg.Logger.Warn(UnisolatedWarning, "reason", provider.Message(err))
	}
	return nil
}
