package daytona

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// fakeWarmPools serves /api/warm-pools as v0.205.1's document describes
// it, in memory, until the simulator serves it: one pool per snapshot and
// target (409 for another), 404 for an unknown id, and NestJS's "Cannot"
// 404 for every other route. It records the bodies it was sent.
type fakeWarmPools struct {
	mu     sync.Mutex
	pools  map[string]warmPool
	bodies []string
}

func (f *fakeWarmPools) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	if len(b) > 0 {
		f.bodies = append(f.bodies, string(b))
	}
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	nest := func(status int, msg string) { answer(status, map[string]any{"statusCode": status, "message": msg}) }
	id := r.PathValue("id")
	switch {
	case r.Header.Get("Authorization") != "Bearer "+testKey:
		nest(http.StatusUnauthorized, "Unauthorized")
	case r.Pattern == "GET /api/warm-pools":
		out := []warmPool{}
		for _, p := range f.pools {
			out = append(out, p)
		}
		answer(http.StatusOK, out)
	case r.Pattern == "POST /api/warm-pools":
		var req struct {
			Snapshot string  `json:"snapshot"`
			Pool     float64 `json:"pool"`
			Target   string  `json:"target"`
		}
		_ = json.Unmarshal(b, &req)
		if req.Target == "" {
			req.Target = "us"
		}
		for _, p := range f.pools {
			if p.Snapshot == req.Snapshot && p.Target == req.Target {
				nest(http.StatusConflict, "A warm pool for this snapshot and target already exists")
				return
			}
		}
		if req.Snapshot == "missing" {
			nest(http.StatusNotFound, "Snapshot missing not found")
			return
		}
		p := warmPool{ID: "pool-" + req.Snapshot, Snapshot: req.Snapshot, Target: req.Target, Pool: req.Pool,
			CreatedAt: "2026-01-02T03:04:05Z", UpdatedAt: "2026-01-02T03:04:05Z"}
		f.pools[p.ID] = p
		answer(http.StatusCreated, p)
	case r.Pattern == "PATCH /api/warm-pools/{id}" || r.Pattern == "DELETE /api/warm-pools/{id}":
		p, ok := f.pools[id]
		if !ok {
			nest(http.StatusNotFound, "Warm pool "+id+" not found")
			return
		}
		if r.Method == http.MethodDelete {
			delete(f.pools, id)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		var req struct {
			Pool float64 `json:"pool"`
		}
		_ = json.Unmarshal(b, &req)
		p.Pool, p.CurrentSize = req.Pool, min(p.CurrentSize, req.Pool)
		f.pools[id] = p
		answer(http.StatusOK, p)
	default:
		nest(http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

func newFakeWarmPools(t *testing.T, opts ...Option) (*Provider, *fakeWarmPools) {
	t.Helper()
	f := &fakeWarmPools{pools: map[string]warmPool{}}
	mux := http.NewServeMux()
	for _, pat := range []string{"GET /api/warm-pools", "POST /api/warm-pools", "PATCH /api/warm-pools/{id}", "DELETE /api/warm-pools/{id}", "/"} {
		mux.Handle(pat, f)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, err := New(append([]Option{WithAPIKey(testKey), WithAPIURL(srv.URL + "/api"), WithRetries(0)}, opts...)...)
	require.NoError(t, err)
	return p, f
}

// TestWarmPools: the warm-pool calls reach the v0.205.1 routes with the
// document's bodies, and their failures have the contract's codes.
func TestWarmPools(t *testing.T) {
	ctx := context.Background()
	p, f := newFakeWarmPools(t, WithTarget("eu"))

	pool, err := p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "py", Size: 3})
	require.NoError(t, err)
	assert.Equal(t, provider.WarmPool{ID: "pool-py", Snapshot: "py", Target: "eu", Size: 3,
		CreatedAt: pool.CreatedAt, UpdatedAt: pool.UpdatedAt}, *pool)
	assert.False(t, pool.CreatedAt.IsZero())
	assert.JSONEq(t, `{"snapshot":"py","pool":3,"target":"eu"}`, f.bodies[0], "the provider's target is the pool's default")

	tests := []struct {
		name string
		call func() error
		want provider.ErrorCode
	}{
		{"the same snapshot and target again", func() error {
			_, err := p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "py", Size: 1})
			return err
		}, provider.AlreadyExists},
		{"an unknown snapshot", func() error {
			_, err := p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "missing", Size: 1})
			return err
		}, provider.PreflightFailed},
		{"no snapshot", func() error { _, err := p.CreateWarmPool(ctx, provider.WarmPoolRequest{Size: 1}); return err }, provider.InvalidArgument},
		{"size 0", func() error {
			_, err := p.CreateWarmPool(ctx, provider.WarmPoolRequest{Snapshot: "go"})
			return err
		}, provider.InvalidArgument},
		{"resize", func() error { _, err := p.ResizeWarmPool(ctx, "pool-py", 0); return err }, ""},
		{"resize below 0", func() error { _, err := p.ResizeWarmPool(ctx, "pool-py", -1); return err }, provider.InvalidArgument},
		{"resize a missing pool", func() error { _, err := p.ResizeWarmPool(ctx, "nobody", 2); return err }, provider.NotFound},
		{"delete", func() error { return p.DeleteWarmPool(ctx, "pool-py") }, ""},
		{"delete a missing pool", func() error { return p.DeleteWarmPool(ctx, "pool-py") }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			assert.Equal(t, tt.want, provider.Code(err), "%v", err)
		})
	}
	list, err := p.WarmPools(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "deleted")
	assert.Contains(t, f.bodies, `{"pool":0}`, "a resize sends the document's body")
}

// TestWarmPoolsOnAnOlderServer: a server without /warm-pools (Daytona
// before v0.205.1) answers unsupported, which a missing-pool delete does
// not hide.
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
	_, err = p.WarmPools(context.Background())
	assert.Equal(t, provider.Unsupported, provider.Code(err), "%v", err)
	assert.Equal(t, provider.Unsupported, provider.Code(p.DeleteWarmPool(context.Background(), "any")))
}
