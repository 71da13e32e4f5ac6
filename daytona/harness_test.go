package daytona

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/simulator"
)

const testKey = "test-key"

// harness is the simulator on loopback behind a Provider, both on one fake
// clock. The simulator validates every response against the upstream spec.
type harness struct {
	t   *testing.T
	clk *clocktest.Fake
	sim *simulator.Simulator
	srv *httptest.Server
	p   *Provider
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	return newHarnessWith(t, simulator.InstantProfile(), opts...)
}

// newHarnessWith is newHarness with the simulator's transitions taking the
// times of profile.
func newHarnessWith(t *testing.T, profile simulator.Profile, opts ...Option) *harness {
	t.Helper()
	return newHarnessConfig(t, simulator.Config{Profile: profile}, opts...)
}

// newHarnessConfig is newHarness on a simulator configured by cfg, whose
// clock, key, seed and response validation the harness sets.
func newHarnessConfig(t *testing.T, cfg simulator.Config, opts ...Option) *harness {
	t.Helper()
	clk := clocktest.NewFake(time.Time{})
	cfg.Clock, cfg.APIKeys, cfg.ValidateResponses, cfg.Seed = clk, []string{testKey}, true, 7
	sim, err := simulator.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, sim.Close())
		assert.Empty(t, sim.SpecViolations())
	})
	h := &harness{t: t, clk: clk, sim: sim, srv: srv}
	h.p = h.provider(testKey, nil, opts...)
	return h
}

// provider is a Provider of the harness's simulator with key, over rt
// (nil for the default transport).
func (h *harness) provider(key string, rt http.RoundTripper, opts ...Option) *Provider {
	h.t.Helper()
	base := []Option{WithAPIKey(key), WithAPIURL(h.srv.URL + "/api"), WithClock(h.clk), WithHTTPClient(&http.Client{Transport: rt})}
	p, err := New(append(base, opts...)...)
	require.NoError(h.t, err)
	return p
}

// ops lists the operations the simulator saw, in order.
func (h *harness) ops() []string {
	var out []string
	for _, c := range h.sim.Calls() {
		out = append(out, c.Operation)
	}
	return out
}

// drive runs f while moving the fake clock forward in small steps, so that
// the provider's polls, backoffs and deadlines pass without wall time.
func drive[T any](clk *clocktest.Fake, f func() T) T {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_ = clk.BlockUntilWaiters(ctx, 1)
			clk.Advance(10 * time.Millisecond)
			time.Sleep(200 * time.Microsecond) // let the woken goroutine run; its pace, not a wait for it
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	return f()
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
