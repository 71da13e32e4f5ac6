package pool

import (
	"context"
	"sort"
	"strings"

	"github.com/sandplane/sandplane/provider"
)

// VerifyEmpty is the zero-leak check: it lists every sandbox on prov that
// carries the labels of the pool named name (WithName; "" is "default") and
// fails with one error naming each that is live, that is, neither stopped
// (nor paused, which is as much at rest) nor destroyed: started, on its
// way, or in error. Stopped ones are not
// leaks: their create-time auto-delete reaps them with no help from the
// host. Run it after Shutdown (with an in-memory store on a provider
// without auto-delete, Shutdown deletes the parked ones too).
//
// failed_precondition: live sandboxes remain, each named with its state.
// Otherwise the provider's error from List.
func VerifyEmpty(ctx context.Context, prov provider.Provider, name string) error {
	if name == "" {
		name = "default"
	}
	list, err := prov.List(ctx, provider.ListOptions{Labels: map[string]string{LabelPool: name}})
	if err != nil {
		return err
	}
	var live []string
	for _, sb := range list {
		if sb.State == provider.StateStopped || sb.State == provider.StatePaused || sb.State == provider.StateDestroyed {
			continue
		}
		live = append(live, sb.ID+" ("+string(sb.State)+")")
	}
	if len(live) == 0 {
		return nil
	}
	sort.Strings(live)
	return provider.Errorf(provider.FailedPrecondition, "pool %q: %d live sandboxes remain: %s", name, len(live), strings.Join(live, ", "))
}
