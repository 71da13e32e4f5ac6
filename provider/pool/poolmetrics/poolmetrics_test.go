package poolmetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/pool"
	"github.com/sandplane/sandplane/provider/pool/poolmetrics"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

func newPool(t *testing.T, f *pooltest.Fake, clk *clocktest.Fake, opts ...pool.Option) (*pool.Pool, error) {
	t.Helper()
	p, err := pool.New(context.Background(), f, append([]pool.Option{pool.WithClock(clk), pool.WithHeartbeat(0)}, opts...)...)
	if err == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = p.Shutdown(ctx)
		})
	}
	return p, err
}

// The metrics register at pool.New, show a zero per reason from the start,
// and count a teardown under its reason.
func TestRegisterAndCount(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	reg := prometheus.NewPedanticRegistry()
	m := poolmetrics.New(reg)
	p, err := newPool(t, f, clk, pool.WithName("reg"), pool.WithObserver(m))
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, "sandplane_pool_teardowns_total")
	require.NoError(t, err)
	assert.Equal(t, len(pool.Reasons), n, "a series per reason, zeros included")

	ctx := context.Background()
	l, err := p.Acquire(ctx, "conv", pool.Spec{Snapshot: "default"})
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx, l, pool.OutcomeFailed))
	assert.Eventually(t, func() bool {
		return counter(t, reg, "sandplane_pool_teardowns_total", "reason", string(pool.ReasonTurnFailed)) == 1
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1.0, counter(t, reg, "sandplane_pool_acquires_total", "path", string(pool.PathCreated)))
}

// counter is the value of the counter name{label=value} that reg gathers.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

func TestAttachRefused(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	f := pooltest.New(pooltest.WithClock(clk))
	reg := prometheus.NewPedanticRegistry()
	used := poolmetrics.New(nil)
	_, err := newPool(t, f, clk, pool.WithName("used"), pool.WithObserver(used))
	require.NoError(t, err)
	_, err = newPool(t, f, clk, pool.WithName("reg"), poolmetrics.WithRegisterer(reg))
	require.NoError(t, err)

	tests := []struct {
		name string
		opts []pool.Option
		want provider.ErrorCode
	}{
		{"two pools of one name on one registry", []pool.Option{pool.WithName("reg"), poolmetrics.WithRegisterer(reg)}, provider.AlreadyExists},
		{"one Metrics for two pools", []pool.Option{pool.WithName("other"), pool.WithObserver(used)}, provider.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newPool(t, f, clk, tt.opts...)
			assert.Equal(t, tt.want, provider.Code(err))
		})
	}
}

// Collectors are empty until the pool is made, then usable with a registry
// of the host's choosing.
func TestCollectorsForAnyRegistry(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	m := poolmetrics.New(nil)
	assert.Empty(t, m.Collectors())
	_, err := newPool(t, pooltest.New(pooltest.WithClock(clk)), clk, pool.WithObserver(m))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collectors()...)
	n, err := testutil.GatherAndCount(reg, "sandplane_pool_running")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}
