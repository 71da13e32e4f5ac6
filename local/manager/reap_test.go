package manager

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/drivertest"
	"github.com/sandplane/sandplane/provider"
)

// engineLost is a runtime whose engine goes away in the middle of a start,
// after the workload exists: the start fails unavailable, and nothing can
// be stopped, removed or listed until the engine is back.
type engineLost struct {
	*drivertest.Fake
	down atomic.Bool
}

func (e *engineLost) Start(ctx context.Context, spec driver.Spec) (driver.Handle, error) {
	if _, err := e.Fake.Start(ctx, spec); err != nil {
		return driver.Handle{}, err
	}
	e.down.Store(true)
	return driver.Handle{}, provider.Errorf(provider.Unavailable, "engine not answering")
}

func (e *engineLost) Stop(ctx context.Context, h driver.Handle, grace time.Duration) error {
	if e.down.Load() {
		return provider.Errorf(provider.Unavailable, "engine not answering")
	}
	return e.Fake.Stop(ctx, h, grace)
}

func (e *engineLost) Orphans(ctx context.Context, root string, known []driver.Handle) ([]driver.Handle, error) {
	if e.down.Load() {
		return nil, provider.Errorf(provider.Unavailable, "engine not answering")
	}
	return e.Fake.Orphans(ctx, root, known)
}

// A create that failed because its runtime stopped answering leaves the
// workload it made; once the runtime answers again the daemon, without a
// restart, ends it.
func TestFailedCreateReapsItsWorkloadOnceTheRuntimeAnswers(t *testing.T) {
	rt := &engineLost{Fake: drivertest.New(provider.RuntimeNative)}
	h := newHarness(t, useRuntime(rt))
	_, err := h.m.Create(context.Background(), provider.CreateRequest{ID: "lost"})
	require.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
	require.Equal(t, 1, rt.Running(), "the engine took the workload with it")

	h.clk.Advance(time.Minute) // the reap keeps asking while the engine is away
	assert.Equal(t, 1, rt.Running())
	rt.down.Store(false)
	require.Eventually(t, func() bool {
		h.clk.Advance(watchRetryMax)
		return rt.Running() == 0
	}, 10*time.Second, 10*time.Millisecond, "the failed create's workload outlived the engine's return")
	assert.Empty(t, h.m.List(context.Background(), Filter{}), "the failed create left no record")
}
