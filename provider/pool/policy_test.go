package pool

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

// envPool is a pool on the fake with the defaults, the environment env and
// opts, shut down and checked empty at the end of the test.
func envPool(t *testing.T, env map[string]string, opts ...Option) (*Pool, *pooltest.Fake, *clocktest.Fake) {
	t.Helper()
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	p, err := New(context.Background(), f, append([]Option{WithClock(clk), WithEnv(lookup), WithPollInterval(time.Second)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, p.Shutdown(ctx))
		assert.NoError(t, VerifyEmpty(ctx, f, p.Name()))
	})
	return p, f, clk
}

// The settled defaults: keep-warm 2 min, warm cap 20, auto-stop 15 min,
// auto-delete 30 min after stop, no auto-archive, the lease bound four
// stop timers.
func TestPolicyDefaults(t *testing.T) {
	p, f, _ := envPool(t, nil)
	assert.Equal(t, 2*time.Minute, p.cfg.keepWarm)
	assert.Equal(t, 20, p.cfg.warmCap)
	assert.Equal(t, 15, p.cfg.autoStop)
	assert.Equal(t, 30, p.cfg.autoDelete)
	assert.Equal(t, time.Hour, p.cfg.maxLease)
	assert.Equal(t, 5*time.Minute, p.cfg.heartbeat)

	l, err := p.Acquire(context.Background(), "conv", testSpec)
	require.NoError(t, err)
	reqs := f.CreateRequests()
	require.Len(t, reqs, 1)
	require.NotNil(t, reqs[0].AutoStopInterval)
	assert.Equal(t, 15, *reqs[0].AutoStopInterval)
	assert.Nil(t, reqs[0].AutoArchiveInterval, "the create sends no autoArchiveInterval")
	ad, ok := f.AutoDelete(l.Sandbox.ID)
	assert.True(t, ok)
	assert.Equal(t, 30, ad)
	require.NoError(t, p.Release(context.Background(), l, OutcomeOK))
}

// Each environment variable changes its timer, 0 included; the host's
// own option wins over it; a value that does not parse fails New naming
// the variable.
func TestEnvChangesEachTimer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, p *Pool, f *pooltest.Fake, clk *clocktest.Fake)
	}{
		{"auto-stop", map[string]string{EnvAutoStop: "7"}, func(t *testing.T, p *Pool, f *pooltest.Fake, _ *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			assert.Equal(t, 7, *f.CreateRequests()[0].AutoStopInterval)
			assert.Equal(t, 28*time.Minute, p.cfg.maxLease, "the lease bound follows the stop timer")
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
		}},
		{"auto-stop 0 disables it", map[string]string{EnvAutoStop: "0"}, func(t *testing.T, p *Pool, f *pooltest.Fake, _ *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			assert.Equal(t, 0, *f.CreateRequests()[0].AutoStopInterval)
			assert.Zero(t, p.cfg.heartbeat, "nothing to hold off")
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
		}},
		{"auto-delete", map[string]string{EnvAutoDelete: "45"}, func(t *testing.T, p *Pool, f *pooltest.Fake, _ *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			ad, _ := f.AutoDelete(l.Sandbox.ID)
			assert.Equal(t, 45, ad)
			assert.Equal(t, 46*time.Minute, p.cfg.stoppedTTL)
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
		}},
		{"auto-delete 0 deletes at stop", map[string]string{EnvAutoDelete: "0"}, func(t *testing.T, p *Pool, f *pooltest.Fake, _ *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			ad, ok := f.AutoDelete(l.Sandbox.ID)
			assert.True(t, ok)
			assert.Zero(t, ad)
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
		}},
		{"keep-warm", map[string]string{EnvKeepWarm: "30s"}, func(t *testing.T, p *Pool, f *pooltest.Fake, clk *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
			assert.Equal(t, 30*time.Second, p.cfg.keepWarm)
			clk.Advance(30 * time.Second)
			require.Eventually(t, func() bool { return len(f.Calls(pooltest.OpStop)) == 1 }, 10*time.Second, time.Millisecond,
				"stopped when the 30 s window ran out")
		}},
		{"keep-warm 0 turns it off", map[string]string{EnvKeepWarm: "0"}, func(t *testing.T, p *Pool, f *pooltest.Fake, _ *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
			assert.Len(t, f.Calls(pooltest.OpStop), 1, "stopped at release")
		}},
		{"warm cap", map[string]string{EnvWarmCap: "1"}, func(t *testing.T, p *Pool, f *pooltest.Fake, clk *clocktest.Fake) {
			a, err := p.Acquire(ctx, "a", testSpec)
			require.NoError(t, err)
			b, err := p.Acquire(ctx, "b", testSpec)
			require.NoError(t, err)
			require.NoError(t, p.Release(ctx, a, OutcomeOK))
			clk.Advance(time.Second)
			require.NoError(t, p.Release(ctx, b, OutcomeOK))
			assert.Equal(t, 1, p.Stats().Warm)
			stops := f.Calls(pooltest.OpStop)
			require.Len(t, stops, 1)
			assert.Equal(t, a.Sandbox.ID, stops[0].ID, "the least recently parked is evicted")
		}},
		{"warm cap 0 parks everything stopped", map[string]string{EnvWarmCap: "0"}, func(t *testing.T, p *Pool, f *pooltest.Fake, _ *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
			assert.Zero(t, p.Stats().Warm)
			assert.Len(t, f.Calls(pooltest.OpStop), 1)
		}},
		{"max lease", map[string]string{EnvMaxLease: "10m"}, func(t *testing.T, p *Pool, _ *pooltest.Fake, clk *clocktest.Fake) {
			l, err := p.Acquire(ctx, "conv", testSpec)
			require.NoError(t, err)
			assert.Equal(t, LeaseActive, l.State())
			clk.Advance(10 * time.Minute)
			assert.Equal(t, LeaseExpired, l.State())
			require.NoError(t, p.Release(ctx, l, OutcomeOK))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, f, clk := envPool(t, tc.env)
			tc.check(t, p, f, clk)
		})
	}

	t.Run("an option wins over the environment", func(t *testing.T) {
		p, _, _ := envPool(t, map[string]string{EnvKeepWarm: "30s", EnvWarmCap: "3"}, WithKeepWarm(time.Minute))
		assert.Equal(t, time.Minute, p.cfg.keepWarm)
		assert.Equal(t, 3, p.cfg.warmCap)
	})

	for name, env := range map[string]map[string]string{
		"auto-stop not a number": {EnvAutoStop: "15m"},
		"negative auto-delete":   {EnvAutoDelete: "-1"},
		"auto-delete too long":   {EnvAutoDelete: "10080"},
		"keep-warm not duration": {EnvKeepWarm: "two minutes"},
		"warm cap not a count":   {EnvWarmCap: "many"},
		"max lease of 0":         {EnvMaxLease: "0"},
		"max lease not duration": {EnvMaxLease: "60"},
		"negative keep-warm":     {EnvKeepWarm: "-1s"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			_, err := New(ctx, pooltest.New(), WithEnv(lookup))
			require.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
			for k := range env {
				if k != EnvAutoDelete || name != "auto-delete too long" {
					assert.Contains(t, err.Error(), k)
				}
			}
		})
	}
}

// Without WithEnv the pool reads the process's environment.
func TestEnvIsReadByDefault(t *testing.T) {
	t.Setenv(EnvWarmCap, "5")
	t.Setenv(EnvKeepWarm, "45s")
	p, err := New(context.Background(), pooltest.New())
	require.NoError(t, err)
	defer func() { _ = p.Shutdown(context.Background()) }()
	assert.Equal(t, 5, p.cfg.warmCap)
	assert.Equal(t, 45*time.Second, p.cfg.keepWarm)
}

// A lease's activity refresh stops at its bound: past WithMaxLease the
// heartbeat ends (the pool's background work settles with the lease still
// held), the lease reports expired, Inspect says so, and the sandbox is left
// to the provider's auto-stop. Release still parks it.
func TestLeaseBoundStopsRefreshing(t *testing.T) {
	h := newHarness(t, WithHeartbeat(5*time.Minute), WithMaxLease(20*time.Minute))
	l := h.acquire("conv")
	claimed := h.clk.Now()
	assert.Equal(t, LeaseActive, l.State())
	h.eventually(func() bool {
		h.clk.Advance(time.Minute)
		return len(h.f.Calls(pooltest.OpRefresh)) >= 1
	}, "refreshed while active")
	h.eventually(func() bool {
		h.clk.Advance(time.Minute)
		return h.p.Stats().InUse == 1 && h.bgIdle()
	}, "the heartbeat ends at the bound")
	assert.Contains(t, h.logs.String(), "outlived its bound")
	refreshes := len(h.f.Calls(pooltest.OpRefresh))
	assert.LessOrEqual(t, refreshes, 3, "one every 5 min, none at or past 20")
	last := h.sandbox(l.Sandbox.ID).LastActivityAt
	assert.True(t, last.Before(claimed.Add(20*time.Minute)), "last refreshed %s after the claim", last.Sub(claimed))
	assert.Equal(t, LeaseExpired, l.State())
	st, err := h.p.Inspect(h.ctx, "conv")
	require.NoError(t, err)
	assert.Equal(t, StateInUse, st.State)
	assert.Equal(t, LeaseExpired, st.Lease)

	h.advance(time.Hour)
	assert.Equal(t, refreshes, len(h.f.Calls(pooltest.OpRefresh)), "no refresh past the bound")
	h.release(l, OutcomeOK)
	assert.Equal(t, LeaseReleased, l.State())
	rec, _ := h.record("conv")
	assert.Equal(t, StateParkedRunning, rec.State)
}

// VerifyEmpty names every live sandbox of the pool, and only the pool's.
func TestVerifyEmptyNamesTheLive(t *testing.T) {
	h := newHarness(t, WithName("chat"))
	ctx := context.Background()
	a, b := h.acquire("a"), h.acquire("b")
	other, err := h.f.Create(ctx, provider.CreateRequest{Name: "not-the-pools"})
	require.NoError(t, err)
	err = VerifyEmpty(ctx, h.f, "chat")
	require.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
	assert.Contains(t, err.Error(), a.Sandbox.ID)
	assert.Contains(t, err.Error(), b.Sandbox.ID)
	assert.NotContains(t, err.Error(), other.ID)
	h.release(a, OutcomeOK)
	h.release(b, OutcomeFailed)
	require.NoError(t, h.p.Shutdown(waitCtx(t)))
	assert.NoError(t, VerifyEmpty(ctx, h.f, "chat"), "the parked one is stopped, the failed one deleted")
	require.NoError(t, h.f.Delete(ctx, other.ID))
}
