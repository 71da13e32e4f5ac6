package native

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func TestSettleIsolationIsolatesWhereBwrapWorks(t *testing.T) {
	r := isolatedRuntime(t)
	require.NoError(t, r.SettleIsolation(testCtx(t)))
	assert.Equal(t, IsolationBwrap, r.Isolation())
	assert.NoError(t, r.IsolationFallback())
}

func TestSettleIsolationFallsBackSayingWhy(t *testing.T) {
	r := isolatedRuntime(t)
	t.Setenv("PATH", t.TempDir()) // no bwrap to find
	require.NoError(t, r.SettleIsolation(testCtx(t)))
	assert.Equal(t, IsolationNone, r.Isolation())
	err := r.IsolationFallback()
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "%v", err)
	assert.ErrorContains(t, err, "apt-get install bubblewrap")

	r = New(WithContainment(ContainProcessGroup))
	require.NoError(t, r.SettleIsolation(testCtx(t)))
	assert.Equal(t, IsolationNone, r.Isolation())
	assert.ErrorContains(t, r.IsolationFallback(), "needs PID namespaces")
}

func TestSettleIsolationKeepsAnExplicitOne(t *testing.T) {
	r := isolatedRuntime(t, WithIsolation(IsolationNone))
	t.Setenv("PATH", t.TempDir())
	require.NoError(t, r.SettleIsolation(testCtx(t)), "none needs no bwrap")
	assert.Equal(t, IsolationNone, r.Isolation())
	assert.NoError(t, r.IsolationFallback(), "an opt-out is no fallback")

	r = New(WithIsolation(IsolationBwrap))
	err := r.SettleIsolation(testCtx(t))
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "an isolation asked for that cannot work: %v", err)
	assert.ErrorContains(t, err, "apt-get install bubblewrap")

	r = New(WithIsolation("chroot"))
	assert.Equal(t, provider.PreflightFailed, provider.Code(r.SettleIsolation(testCtx(t))))
}

func TestSettleIsolationEndsWithItsContext(t *testing.T) {
	r := isolatedRuntime(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	assert.ErrorIs(t, r.SettleIsolation(ctx), context.Canceled)
}
