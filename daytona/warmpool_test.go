package daytona

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/simulator"
)

// simSnapshot is the harness's default snapshot, the one a create that
// names none runs and the default pool keeps.
const simSnapshot = "daytonaio/sandbox:0.6.0-slim"

// newPoolHarness is a simulator with two regions, a second snapshot and a
// default pool of one (Config.WarmPool), behind a Provider whose target is
// "eu", so that a pool that names none shows the provider's default.
func newPoolHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessConfig(t, simulator.Config{
		Profile:         simulator.InstantProfile(),
		DefaultSnapshot: simSnapshot,
		Regions:         []string{"us", "eu"},
		Snapshots:       []simulator.Snapshot{{Name: "other"}},
		WarmPool:        1,
	}, WithTarget("eu"))
}

// poolOf is the pool of ours that p lists by id, or nil.
func poolOf(t *testing.T, p *Provider, id string) *provider.WarmPool {
	t.Helper()
	list, err := p.WarmPools(context.Background())
	require.NoError(t, err)
	for i := range list {
		if list[i].ID == id {
			return &list[i]
		}
	}
	return nil
}

// defaultPool is the simulator's own pool, which every organization lists.
func defaultPool(t *testing.T, p *Provider) provider.WarmPool {
	t.Helper()
	list, err := p.WarmPools(context.Background())
	require.NoError(t, err)
	for _, w := range list {
		if w.Snapshot == simSnapshot && w.Target == "us" {
			return w
		}
	}
	t.Fatalf("the default pool is not listed: %+v", list)
	return provider.WarmPool{}
}

// TestWarmPoolLifecycle: a pool created through the provider is listed as
// the simulator keeps it, with its members started, and follows each
// resize; a delete removes it, and a second delete is no error.
func TestWarmPoolLifecycle(t *testing.T) {
	ctx := context.Background()
	h := newPoolHarness(t)

	pool, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: simSnapshot, Size: 2})
	require.NoError(t, err)
	assert.NotEmpty(t, pool.ID)
	assert.Equal(t, provider.WarmPool{ID: pool.ID, Snapshot: simSnapshot, Target: "eu", Size: 2, Ready: 2,
		CreatedAt: h.clk.Now(), UpdatedAt: h.clk.Now()}, *pool,
		"the provider's target is the pool's default; the instant profile starts the members at once")
	assert.Equal(t, pool, poolOf(t, h.p, pool.ID), "listed as created")
	assert.Equal(t, []string{"createWarmPool", "listWarmPools"}, h.ops(), "sent once, no retry")

	for _, tc := range []struct {
		name string
		size int
	}{{"grow", 4}, {"shrink", 1}, {"drain", 0}, {"refill", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.p.ResizeWarmPool(ctx, pool.ID, tc.size)
			require.NoError(t, err)
			assert.Equal(t, tc.size, got.Size)
			assert.Equal(t, tc.size, got.Ready)
			assert.Equal(t, got, poolOf(t, h.p, pool.ID))
		})
	}

	require.NoError(t, h.p.DeleteWarmPool(ctx, pool.ID))
	assert.Nil(t, poolOf(t, h.p, pool.ID), "deleted")
	assert.NoError(t, h.p.DeleteWarmPool(ctx, pool.ID), "deleting a missing pool is not an error")
}

// TestWarmPoolErrors: every refusal of the simulator's /warm-pools, and
// the provider's own checks, come back with the contract's code; none of
// them counts against the API key.
func TestWarmPoolErrors(t *testing.T) {
	ctx := context.Background()
	h := newPoolHarness(t)
	mine, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: simSnapshot, Size: 1})
	require.NoError(t, err)
	def := defaultPool(t, h.p)

	tests := []struct {
		name string
		call func() error
		want provider.ErrorCode
		// sent is whether the request reaches the simulator; the
		// provider refuses the others itself.
		sent bool
	}{
		{"the same snapshot and target again", func() error {
			_, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: simSnapshot, Size: 1})
			return err
		}, provider.AlreadyExists, true},
		{"the same snapshot by another target", func() error {
			_, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: simSnapshot, Target: "us", Size: 1})
			return err
		}, "", true},
		{"an unknown snapshot", func() error {
			_, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "nope", Size: 1})
			return err
		}, provider.PreflightFailed, true},
		{"an unknown target", func() error {
			_, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "other", Target: "mars", Size: 1})
			return err
		}, provider.InvalidArgument, true},
		{"beyond the quota", func() error {
			_, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "other", Size: 101})
			return err
		}, provider.ResourceExhausted, true},
		{"no snapshot", func() error {
			_, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Size: 1})
			return err
		}, provider.InvalidArgument, false},
		{"size 0", func() error {
			_, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "other"})
			return err
		}, provider.InvalidArgument, false},
		{"resize below 0", func() error { _, err := h.p.ResizeWarmPool(ctx, mine.ID, -1); return err }, provider.InvalidArgument, false},
		{"resize beyond the quota", func() error { _, err := h.p.ResizeWarmPool(ctx, mine.ID, 101); return err }, provider.ResourceExhausted, true},
		{"resize a missing pool", func() error { _, err := h.p.ResizeWarmPool(ctx, "nope", 2); return err }, provider.NotFound, true},
		{"resize the default pool", func() error { _, err := h.p.ResizeWarmPool(ctx, def.ID, 2); return err }, provider.FailedPrecondition, true},
		{"delete the default pool", func() error { return h.p.DeleteWarmPool(ctx, def.ID) }, provider.FailedPrecondition, true},
		{"delete a missing pool", func() error { return h.p.DeleteWarmPool(ctx, "nope") }, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.sim.Calls())
			err := tt.call()
			assert.Equal(t, tt.want, provider.Code(err), "%v", err)
			if err != nil {
				assert.NotEmpty(t, provider.Message(err), "says why")
			}
			assert.Equal(t, tt.sent, len(h.sim.Calls()) > before, "reaches the simulator")
			assert.Equal(t, provider.AuthAuthenticated, h.p.creds.Auth().State, "the key is not in question")
		})
	}
	got := poolOf(t, h.p, mine.ID)
	require.NotNil(t, got)
	assert.Equal(t, 1, got.Size, "nothing refused changed the pool")
	assert.Equal(t, 1, defaultPool(t, h.p).Size, "nor the default one")
}

// TestWarmPoolServesCreate: a create through the provider that asks for
// what a pool's members have is answered by a member, which the cost
// report tells: the sandbox has a row the pool paid for until the
// takeover. One that asks for anything else is a cold create.
func TestWarmPoolServesCreate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  provider.CreateRequest
		// pooled is whose pool serves it: "mine", "default" or "" for
		// none.
		pooled string
	}{
		{"the pool's snapshot and target", provider.CreateRequest{Snapshot: simSnapshot, Labels: map[string]string{"k": "v"}}, "mine"},
		{"the default snapshot in the default target", provider.CreateRequest{Target: "us"}, "default"},
		{"an env", provider.CreateRequest{Snapshot: simSnapshot, EnvVars: map[string]string{"X": "1"}}, ""},
		{"another snapshot", provider.CreateRequest{Snapshot: "other"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newPoolHarness(t)
			mine, err := h.p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: simSnapshot, Size: 1})
			require.NoError(t, err)
			pools := map[string]string{"mine": mine.ID, "default": defaultPool(t, h.p).ID}

			sb, err := h.p.Create(ctx, tc.req)
			require.NoError(t, err)
			assert.Equal(t, provider.StateStarted, sb.State)
			var paidBy []string
			for _, r := range h.sim.Cost(simulator.Prices{}).Sandboxes {
				if r.ID == sb.ID && r.WarmPool != "" {
					paidBy = append(paidBy, r.WarmPool)
				}
			}
			if tc.pooled == "" {
				assert.Empty(t, paidBy, "a cold create was never a pool's")
				return
			}
			assert.Equal(t, []string{pools[tc.pooled]}, paidBy, "served by the %s pool", tc.pooled)
			for k, v := range tc.req.Labels {
				assert.Equal(t, v, sb.Labels[k], "the takeover sets the create's labels")
			}
			for name, id := range pools {
				w := poolOf(t, h.p, id)
				require.NotNil(t, w, name)
				assert.Equal(t, 1, w.Ready, "the %s pool refilled", name)
			}
		})
	}
}

// TestWarmPoolsOnAnOlderServer: a server without /warm-pools (Daytona
// before v0.205.1) answers unsupported, which a missing-pool delete does
// not hide. The simulator serves the route, so NestJS's answer for a
// route it lacks is played here.
func TestWarmPoolsOnAnOlderServer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"statusCode":404,"message":"Cannot `+r.Method+` `+r.URL.Path+`"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, err := New(WithAPIKey(testKey), WithAPIURL(srv.URL+"/api"), WithRetries(0))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"list", func() error { _, err := p.WarmPools(context.Background()); return err }},
		{"create", func() error {
			_, err := p.CreateWarmPool(context.Background(), provider.WarmPoolRequest{Snapshot: "s", Size: 1})
			return err
		}},
		{"resize", func() error { _, err := p.ResizeWarmPool(context.Background(), "any", 1); return err }},
		{"delete", func() error { return p.DeleteWarmPool(context.Background(), "any") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, provider.Unsupported, provider.Code(tc.call()))
		})
	}
}
