package pool_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/daytona"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/pool"
	"github.com/sandplane/sandplane/simulator"
)

const simKey = "pool-sim-key"

// quickProfile gives every transition a short delay, so that the
// provider's waits for started, stopped and gone are exercised.
var quickProfile = simulator.Profile{
	Name:    "pool-it",
	Create:  simulator.Range{Min: 30 * time.Millisecond, Max: 80 * time.Millisecond},
	Start:   simulator.Range{Min: 30 * time.Millisecond, Max: 80 * time.Millisecond},
	Stop:    simulator.Range{Min: 30 * time.Millisecond, Max: 80 * time.Millisecond},
	Destroy: simulator.Range{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond},
}

// startSim runs the simulator on loopback, its sandboxes real toolbox
// processes, behind daytona.Provider; transient failures reach the pool
// (no retries in the provider), as they would once the retries gave up.
func startSim(t *testing.T, minute time.Duration) (*simulator.Simulator, *daytona.Provider) {
	t.Helper()
	clk := clock.Real()
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	be, err := simulator.NewRuntimeBackend(simulator.RuntimeBackendConfig{
		Runtime: native.New(native.WithClock(clk)), Clock: clk, Root: root,
		Command: []string{testdaemon.Binary(t), "toolbox"}, StopGrace: 2 * time.Second,
	})
	require.NoError(t, err)
	sim, err := simulator.New(simulator.Config{
		Clock: clk, APIKeys: []string{simKey}, Profile: quickProfile, Minute: minute,
		Backend: be, Seed: 1, ValidateResponses: true,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		assert.NoError(t, sim.Close())
		assert.Empty(t, sim.SpecViolations(), "simulator answers that do not match Daytona's OpenAPI document")
	})
	p, err := daytona.New(daytona.WithAPIKey(simKey), daytona.WithAPIURL(srv.URL+"/api"), daytona.WithClock(clk), daytona.WithHTTPClient(&http.Client{}),
		daytona.WithMinute(minute), daytona.WithRetries(0))
	require.NoError(t, err)
	return sim, p
}

// The simulator behind daytona.Provider: Daytona's asynchronous stops and
// deletes, its auto-delete, and faults injected into its answers.
func TestPoolOnSimulator(t *testing.T) {
	const minute = time.Second
	sim, p := startSim(t, minute)
	w := world{prov: p, minute: minute}
	scenarios(t, w)

	t.Run("the provider's auto-delete removes what stays parked stopped", func(t *testing.T) {
		r := newRig(t, w, pool.WithKeepWarm(0), pool.WithAutoDelete(2))
		l := r.acquire("conv", spec)
		r.release(l, pool.OutcomeOK)
		require.Equal(t, provider.StateStopped, r.state(l.Sandbox.ID))
		r.eventuallyState(l.Sandbox.ID, "", "Daytona's auto-delete")
		require.Eventually(t, func() bool { return r.teardowns(pool.ReasonTTLExpired) == 1 }, 20*time.Second, 20*time.Millisecond,
			"the pool forgets it once its TTL ends")
		for _, c := range sim.Calls() {
			if c.SandboxID == l.Sandbox.ID {
				assert.NotEqual(t, "deleteSandbox", c.Operation, "deleted by the provider, not the pool")
			}
		}
		st, err := r.p.Inspect(r.ctx, "conv")
		require.NoError(t, err)
		assert.Empty(t, st.State)
	})

	t.Run("transient answers keep the sandbox", func(t *testing.T) {
		for _, status := range []int{503, 429, 500} {
			r := newRig(t, w, pool.WithKeepWarm(time.Minute))
			l := r.acquire("conv", spec)
			r.release(l, pool.OutcomeOK)
			sim.AddFault(simulator.Fault{Op: "getSandbox", Sandbox: l.Sandbox.ID, Status: status, Times: 1})
			_, err := r.p.Acquire(r.ctx, "conv", spec)
			require.Error(t, err, "status %d", status)
			assert.Equal(t, provider.CodeForHTTPStatus(status), provider.Code(err), "%v", err)
			next := r.acquire("conv", spec)
			assert.Equal(t, pool.PathWarm, next.Path, "status %d: kept and reused", status)
			assert.Equal(t, l.Sandbox.ID, next.Sandbox.ID)
			r.release(next, pool.OutcomeOK)
		}
	})

	t.Run("a sandbox that cannot start again is replaced", func(t *testing.T) {
		r := newRig(t, w, pool.WithKeepWarm(0))
		l := r.acquire("conv", spec)
		r.release(l, pool.OutcomeOK)
		sim.AddFault(simulator.Fault{Op: "startSandbox", Sandbox: l.Sandbox.ID, FailStart: "disk corrupted", Times: 1})
		next := r.acquire("conv", spec)
		assert.Equal(t, pool.PathCreated, next.Path)
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonProviderLost))
		r.eventuallyState(l.Sandbox.ID, "", "the errored one is deleted")
		r.release(next, pool.OutcomeOK)
	})

	t.Run("a stop that hangs during eviction keeps the warm cap", func(t *testing.T) {
		r := newRig(t, w, pool.WithWarmCap(1), pool.WithKeepWarm(time.Minute),
			pool.WithStopTimeout(time.Second))
		a, b := r.acquire("a", spec), r.acquire("b", spec)
		r.release(a, pool.OutcomeOK)
		sim.AddFault(simulator.Fault{Op: "stopSandbox", Sandbox: a.Sandbox.ID, Delay: simulator.Duration(time.Hour), Times: 1})
		r.release(b, pool.OutcomeOK) // evicting a hangs: b parks stopped rather than exceed the cap
		assert.GreaterOrEqual(t, r.metric("sandplane_pool_unconfirmed_stops_total", "", ""), 1.0, "the hung stop was noticed")
		assert.NotEqual(t, provider.StateStarted, r.state(b.Sandbox.ID), "parked stopped, not warm: no warm slot")
		r.eventuallyState(b.Sandbox.ID, provider.StateStopped, "the finishing turn stops")
		r.eventuallyState(a.Sandbox.ID, provider.StateStopped, "the evicted one stops in the end")
	})
}
