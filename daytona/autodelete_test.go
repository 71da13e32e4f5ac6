package daytona

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// Daytona deletes a sandbox that stayed stopped for its auto-delete
// interval, and only a stopped one.
func TestSetAutoDeleteIntervalDeletesAStoppedSandbox(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sb, err := h.p.Create(ctx, provider.CreateRequest{Name: "parked"})
	require.NoError(t, err)
	_, err = h.p.SetAutoDeleteInterval(ctx, sb.ID, 2)
	require.NoError(t, err)

	h.clk.Advance(5 * time.Minute)
	_, err = h.p.Get(ctx, sb.ID)
	require.NoError(t, err, "a running sandbox is never auto-deleted")

	drive(h.clk, func() error { _, err := h.p.Stop(ctx, sb.ID); return err })
	h.clk.Advance(time.Minute)
	_, err = h.p.Get(ctx, sb.ID)
	require.NoError(t, err, "stopped for less than its interval")
	h.clk.Advance(2 * time.Minute)
	assert.Eventually(t, func() bool {
		_, err := h.p.Get(ctx, sb.ID)
		return provider.IsNotFound(err)
	}, 10*time.Second, 10*time.Millisecond, "deleted after its interval")

	_, err = h.p.SetAutoDeleteInterval(ctx, "missing", 2)
	assert.Equal(t, provider.NotFound, provider.Code(err))
}
