package pooltest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

func TestFakeLifecycleAndFaults(t *testing.T) {
	ctx := context.Background()
	f := New(WithClock(clocktest.NewFake(time.Time{})))
	sb, err := f.Create(ctx, provider.CreateRequest{Name: "a", Labels: map[string]string{"k": "v"}})
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, sb.State)
	_, err = f.Create(ctx, provider.CreateRequest{Name: "a"})
	assert.Equal(t, provider.AlreadyExists, provider.Code(err))

	stopped, err := f.StopWithReason(ctx, "a", "pool: evicted")
	require.NoError(t, err)
	assert.Equal(t, "pool: evicted", stopped.ErrorReason)
	assert.Equal(t, 1, f.MaxRunning())
	assert.Zero(t, f.Running())

	f.FailNext(OpStart, provider.Errorf(provider.Unavailable, "timeout"))
	_, err = f.Start(ctx, sb.ID)
	assert.Equal(t, provider.Unavailable, provider.Code(err), "the queued fault")
	_, err = f.Start(ctx, sb.ID)
	require.NoError(t, err, "one fault, one call")

	h := f.Hang(OpGet, false)
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := f.Get(gctx, sb.ID); done <- err }()
	require.NoError(t, h.WaitBlocked(ctx, 1))
	cancel()
	assert.Equal(t, provider.Unavailable, provider.Code(<-done), "a hang that honours its context times out")
	h.Release()
	_, err = f.Get(ctx, sb.ID)
	require.NoError(t, err, "released: no more hangs")

	f.Vanish(sb.ID)
	_, err = f.Get(ctx, sb.ID)
	assert.True(t, provider.IsNotFound(err))
	assert.Len(t, f.Calls(OpStop), 1)
	assert.Equal(t, "pool: evicted", f.Calls(OpStop)[0].Reason)
}

func TestPlainHidesTheOptionalInterfaces(t *testing.T) {
	f := New(WithClock(clocktest.NewFake(time.Time{})))
	var p provider.Provider = f.Plain()
	_, stopper := p.(provider.ReasonStopper)
	_, deleter := p.(provider.AutoDeleter)
	assert.False(t, stopper)
	assert.False(t, deleter)
	var full provider.Provider = f
	_, stopper = full.(provider.ReasonStopper)
	assert.True(t, stopper)
}
