package manager

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// A sandbox says it is unisolated when its native workload runs on the
// host (as it was spawned, while it runs; as its snapshot would be, while
// stopped), and never of an isolated one.
func TestSandboxesSayWhenTheyAreUnisolated(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Snapshots["isolated"] = Snapshot{Command: []string{"workload"}, Ready: "none", Isolation: "bwrap"}
	})
	ctx := context.Background()
	open := h.create(provider.CreateRequest{ID: "open"})
	boxed := h.create(provider.CreateRequest{ID: "boxed", Snapshot: "isolated"})
	assert.True(t, open.Unisolated, "the fake runtime runs native sandboxes on the host")
	assert.False(t, boxed.Unisolated, "isolation: bwrap")

	for _, id := range []string{"open", "boxed"} {
		s, err := h.m.Stop(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, id == "open", s.Unisolated, "%s stopped: what its next start gets", id)
	}
	list := h.m.List(ctx, Filter{})
	require.Len(t, list, 2)
	for _, s := range list {
		assert.Equal(t, s.ID == "open", s.Unisolated, "the list says so too: %s", s.ID)
	}
}
