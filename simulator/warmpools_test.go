package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/backend"
	"github.com/sandplane/sandplane/simulator/internal/cost"
)

const otherKey = "other-key"

// poolBody is a CreateWarmPool or UpdateWarmPool body.
type poolBody map[string]any

// createPool creates a pool with the test key and returns it.
func (h *harness) createPool(body poolBody) warmPoolDTO {
	h.t.Helper()
	code, b, _ := h.raw("POST", "/api/warm-pools", body)
	require.Equal(h.t, http.StatusCreated, code, string(b))
	var p warmPoolDTO
	require.NoError(h.t, json.Unmarshal(b, &p))
	return p
}

// pools lists the pools key sees.
func (h *harness) pools(key string) []warmPoolDTO {
	h.t.Helper()
	code, b, _ := h.rawAs(key, "GET", "/api/warm-pools", nil)
	require.Equal(h.t, http.StatusOK, code, string(b))
	var out []warmPoolDTO
	require.NoError(h.t, json.Unmarshal(b, &out))
	return out
}

// pool is the pool id as the test key lists it.
func (h *harness) pool(id string) warmPoolDTO {
	h.t.Helper()
	for _, p := range h.pools(testKey) {
		if p.ID == id {
			return p
		}
	}
	h.t.Fatalf("warm pool %s is not listed", id)
	return warmPoolDTO{}
}

// members are the ids of pool id's unclaimed sandboxes.
func (h *harness) members(id string) map[string]bool {
	h.sim.mu.RLock()
	defer h.sim.mu.RUnlock()
	out := map[string]bool{}
	if p := h.sim.pools[id]; p != nil {
		for _, sb := range p.members {
			out[sb.ID] = true
		}
	}
	return out
}

// TestWarmPoolCRUD creates, lists, resizes and deletes a pool, checking
// each answer's shape.
func TestWarmPoolCRUD(t *testing.T) {
	h := newHarness(t)
	assert.Empty(t, h.pools(testKey), "no --warm-pool, no pool")

	p := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 2})
	assert.Equal(t, warmPoolDTO{ID: p.ID, OrganizationID: orgOf(testKey), Snapshot: defaultSnapshot, Target: "us",
		Pool: 2, CurrentSize: 2, CPU: 1, Mem: 1, Disk: 3, OSUser: "daytona", Env: map[string]string{},
		CreatedAt: iso(h.clk.Now()), UpdatedAt: iso(h.clk.Now())}, p, "the instant profile starts the members at once")
	assert.Equal(t, []warmPoolDTO{p}, h.pools(testKey))
	assert.Empty(t, h.pools(otherKey), "another organization sees none of it")

	for _, tc := range []struct {
		name string
		size int
	}{{"grow", 4}, {"shrink", 1}, {"drain", 0}, {"grow again", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			code, b, _ := h.raw("PATCH", "/api/warm-pools/"+p.ID, poolBody{"pool": tc.size})
			require.Equal(t, http.StatusOK, code, string(b))
			var got warmPoolDTO
			require.NoError(t, json.Unmarshal(b, &got))
			assert.Equal(t, tc.size, got.Pool)
			assert.Equal(t, tc.size, got.CurrentSize)
			assert.Len(t, h.members(p.ID), tc.size)
		})
	}

	code, b, _ := h.raw("DELETE", "/api/warm-pools/"+p.ID, nil)
	require.Equal(t, http.StatusNoContent, code, string(b))
	assert.Empty(t, h.pools(testKey))
	code, b, _ = h.raw("DELETE", "/api/warm-pools/"+p.ID, nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "Warm pool "+p.ID+" not found", h.nestError(b).Message)
	h.sim.mu.RLock()
	defer h.sim.mu.RUnlock()
	assert.Zero(t, h.sim.rows.Count(poolOrgPrefix+p.ID), "the deleted pool's members are destroyed")
}

// TestWarmPoolValidation: every body or target out of bounds is a
// Daytona-shaped error that says what to send, with the request
// validation on and off (the handler's own checks).
func TestWarmPoolValidation(t *testing.T) {
	for _, validate := range []bool{true, false} {
		h := newHarness(t, func(c *Config) {
			c.DisableValidation = !validate
			c.Regions = []string{"us", "eu"}
			c.WarmPool = 1
			c.APIKeys = []string{testKey, otherKey}
		})
		mine := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 1})
		theirs := func() warmPoolDTO {
			code, b, _ := h.rawAs(otherKey, "POST", "/api/warm-pools", poolBody{"snapshot": defaultSnapshot, "pool": 1})
			require.Equal(t, http.StatusCreated, code, string(b))
			var p warmPoolDTO
			require.NoError(t, json.Unmarshal(b, &p))
			return p
		}()
		var def string
		for _, p := range h.pools(testKey) {
			if p.OrganizationID == warmPoolOrg {
				def = p.ID
			}
		}
		require.NotEmpty(t, def)
		for _, tc := range []struct {
			name, method, path string
			body               any
			code               int
			// msg is the handler's message, checked with validation off
			// (the validator's own wording answers first otherwise).
			msg string
		}{
			{"no snapshot", "POST", "/api/warm-pools", poolBody{"pool": 1}, 400,
				"snapshot must be the id or name of the snapshot to keep warm sandboxes of"},
			{"no size", "POST", "/api/warm-pools", poolBody{"snapshot": defaultSnapshot}, 400,
				"pool must be the number of warm sandboxes to keep ready, at least 1"},
			{"size zero", "POST", "/api/warm-pools", poolBody{"snapshot": defaultSnapshot, "pool": 0}, 400,
				"pool must be a whole number from 1 to 100 (the warm pool quota), not 0"},
			{"size a fraction", "POST", "/api/warm-pools", poolBody{"snapshot": defaultSnapshot, "pool": 1.5}, 400,
				"pool must be a whole number from 1 to 100 (the warm pool quota), not 1.5"},
			{"size over the quota", "POST", "/api/warm-pools", poolBody{"snapshot": defaultSnapshot, "pool": 101}, 400,
				"pool must be a whole number from 1 to 100 (the warm pool quota), not 101"},
			{"unknown snapshot", "POST", "/api/warm-pools", poolBody{"snapshot": "nope", "pool": 1}, 400,
				"Snapshot nope not found. Did you add it through the Daytona Dashboard?"},
			{"unknown target", "POST", "/api/warm-pools", poolBody{"snapshot": defaultSnapshot, "pool": 1, "target": "mars"}, 400,
				"target mars is not a region: use one of us, eu, or leave it out for us"},
			{"second pool of the same snapshot and target", "POST", "/api/warm-pools", poolBody{"snapshot": defaultSnapshot, "pool": 1}, 409,
				"Warm pool " + mine.ID + " already keeps sandboxes of snapshot " + defaultSnapshot + " in target us: change its size with PATCH /warm-pools/" + mine.ID},
			{"update without size", "PATCH", "/api/warm-pools/" + mine.ID, poolBody{}, 400,
				"pool must be the number of warm sandboxes to keep ready, at least 0"},
			{"update negative", "PATCH", "/api/warm-pools/" + mine.ID, poolBody{"pool": -1}, 400,
				"pool must be a whole number from 0 to 100 (the warm pool quota), not -1"},
			{"update unknown", "PATCH", "/api/warm-pools/nope", poolBody{"pool": 1}, 404, "Warm pool nope not found"},
			{"update another organization's", "PATCH", "/api/warm-pools/" + theirs.ID, poolBody{"pool": 1}, 404,
				"Warm pool " + theirs.ID + " not found"},
			{"delete another organization's", "DELETE", "/api/warm-pools/" + theirs.ID, nil, 404,
				"Warm pool " + theirs.ID + " not found"},
			{"update the default pool", "PATCH", "/api/warm-pools/" + def, poolBody{"pool": 5}, 403,
				"Warm pool " + def + " is the simulator's default pool (--warm-pool), shared by every organization: restart the simulator with another --warm-pool to change it, or create a pool of your own"},
			{"delete the default pool", "DELETE", "/api/warm-pools/" + def, nil, 403,
				"Warm pool " + def + " is the simulator's default pool (--warm-pool), shared by every organization: restart the simulator with another --warm-pool to change it, or create a pool of your own"},
		} {
			t.Run(tc.name+map[bool]string{true: " (validated)", false: ""}[validate], func(t *testing.T) {
				code, b, _ := h.raw(tc.method, tc.path, tc.body)
				assert.Equal(t, tc.code, code, string(b))
				msg := h.nestError(b).Message
				assert.NotEmpty(t, msg)
				if !validate || tc.code != http.StatusBadRequest {
					assert.Equal(t, tc.msg, msg)
				}
			})
		}
		assert.Len(t, h.pools(testKey), 2, "nothing refused made or dropped a pool")
	}
}

// TestWarmPoolMatching: a create takes a pooled sandbox only when it asks
// for exactly what the pool's members have; each field that differs makes
// it cold. Another organization's pool is never taken.
func TestWarmPoolMatching(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		body apiclient.CreateSandbox
		warm bool
	}{
		{name: "nothing asked", body: apiclient.CreateSandbox{}, warm: true},
		{name: "the pool's snapshot by name", body: apiclient.CreateSandbox{Snapshot: ptr(defaultSnapshot)}, warm: true},
		{name: "the pool's target", body: apiclient.CreateSandbox{Target: ptr("us")}, warm: true},
		{name: "the pool's OS user", body: apiclient.CreateSandbox{User: ptr("daytona")}, warm: true},
		{name: "an empty env", body: apiclient.CreateSandbox{Env: &map[string]string{}}, warm: true},
		{name: "labels, a name and intervals are set on takeover",
			body: apiclient.CreateSandbox{Name: ptr("n"), Labels: &map[string]string{"k": "v"}, AutoStopInterval: ptr[int32](5)}, warm: true},
		{name: "another snapshot", body: apiclient.CreateSandbox{Snapshot: ptr("other")}},
		{name: "another target", body: apiclient.CreateSandbox{Target: ptr("eu")}},
		{name: "another OS user", body: apiclient.CreateSandbox{User: ptr("root")}},
		{name: "an env", body: apiclient.CreateSandbox{Env: &map[string]string{"X": "1"}}},
		{name: "network blocked", body: apiclient.CreateSandbox{NetworkBlockAll: ptr(true)}},
		{name: "an allow list", body: apiclient.CreateSandbox{NetworkAllowList: ptr("10.0.0.0/8")}},
		{name: "another organization", key: otherKey, body: apiclient.CreateSandbox{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.Regions = []string{"us", "eu"}
				c.Snapshots = []Snapshot{{Name: "other"}}
			})
			p := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 2})
			before := h.members(p.ID)
			key := testKey
			if tc.key != "" {
				key = tc.key
			}
			sb, _, err := h.api.SandboxAPI.CreateSandbox(h.as(key)).CreateSandbox(tc.body).Execute()
			require.NoError(t, err)
			assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState())
			assert.Equal(t, tc.warm, before[sb.Id], "taken from the pool")
			if tc.warm {
				assert.Equal(t, orgOf(key), sb.OrganizationId)
				assert.False(t, h.members(p.ID)[sb.Id], "a taken sandbox is the pool's no more")
			} else {
				assert.Equal(t, before, h.members(p.ID), "a cold create leaves the pool alone")
			}
		})
	}
}

// TestWarmPoolCreateWithSecretsIsCold: a create that mounts a secret
// carries its placeholder in the env from the start, which no pooled
// sandbox has.
func TestWarmPoolCreateWithSecretsIsCold(t *testing.T) {
	h := newHarness(t)
	p := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 1})
	code, b, _ := h.raw("POST", "/api/secret", map[string]any{"name": "tok", "value": "v", "hosts": []string{"api.example.com"}})
	require.Equal(t, http.StatusCreated, code, string(b))
	before := h.members(p.ID)
	code, b, _ = h.raw("POST", "/api/sandbox", map[string]any{"secrets": []map[string]string{{"TOKEN": "tok"}}})
	require.Equal(t, http.StatusOK, code, string(b))
	var sb struct {
		ID  string            `json:"id"`
		Env map[string]string `json:"env"`
	}
	require.NoError(t, json.Unmarshal(b, &sb))
	assert.False(t, before[sb.ID], "a create with secrets never takes a pooled sandbox")
	assert.Equal(t, before, h.members(p.ID))
}

// TestWarmPoolFits checks each field of the spec a pool matches on,
// including the resources, which a create from a snapshot cannot set.
func TestWarmPoolFits(t *testing.T) {
	p := &warmPool{snapID: "s", Target: "us", CPU: 1, Mem: 1, Disk: 3, OSUser: "daytona", Env: map[string]string{}}
	same := poolSpec{SnapID: "s", Target: "us", CPU: 1, Mem: 1, Disk: 3, OSUser: "daytona", Env: map[string]string{}}
	assert.True(t, p.fits(same))
	for name, change := range map[string]func(*poolSpec){
		"snapshot": func(s *poolSpec) { s.SnapID = "t" },
		"target":   func(s *poolSpec) { s.Target = "eu" },
		"cpu":      func(s *poolSpec) { s.CPU = 2 },
		"memory":   func(s *poolSpec) { s.Mem = 2 },
		"disk":     func(s *poolSpec) { s.Disk = 4 },
		"gpu":      func(s *poolSpec) { s.GPU = 1 },
		"OS user":  func(s *poolSpec) { s.OSUser = "root" },
		"env":      func(s *poolSpec) { s.Env = map[string]string{"A": "b"} },
	} {
		t.Run(name, func(t *testing.T) {
			spec := same
			spec.Env = map[string]string{}
			change(&spec)
			assert.False(t, p.fits(spec), "a different %s breaks the match", name)
		})
	}
}

// TestWarmPoolRefillsAfterTake: a take answers started at once; the pool
// starts a new member, ready once its create delay has passed.
func TestWarmPoolRefillsAfterTake(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	p := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 2})
	assert.Zero(t, p.CurrentSize, "members are still creating")
	h.clk.Advance(2 * time.Second)
	require.Equal(t, 2, h.pool(p.ID).CurrentSize)

	sb := h.create(apiclient.CreateSandbox{})
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), "no clock advance was needed")
	got := h.pool(p.ID)
	assert.Equal(t, 1, got.CurrentSize, "the refill is still creating")
	assert.Len(t, h.members(p.ID), 2, "the refill is under way")
	h.clk.Advance(2 * time.Second)
	assert.Equal(t, 2, h.pool(p.ID).CurrentSize)
}

// TestWarmPoolResizeDestroysOnlyIdleOnes: a shrink destroys surplus
// members and a delete all the unclaimed ones; the sandboxes handed over
// stay the callers'.
func TestWarmPoolResizeDestroysOnlyIdleOnes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	p := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 3})
	h.clk.Advance(2 * time.Second)
	taken := h.create(apiclient.CreateSandbox{})
	h.clk.Advance(2 * time.Second)
	idle := h.members(p.ID)
	require.Len(t, idle, 3)

	code, b, _ := h.raw("PATCH", "/api/warm-pools/"+p.ID, poolBody{"pool": 1})
	require.Equal(t, http.StatusOK, code, string(b))
	assert.Len(t, h.members(p.ID), 1)
	h.clk.Advance(2 * time.Second)
	h.sim.mu.RLock()
	assert.Equal(t, 1, h.sim.rows.Count(poolOrgPrefix+p.ID), "the surplus members are destroyed")
	h.sim.mu.RUnlock()

	code, b, _ = h.raw("PATCH", "/api/warm-pools/"+p.ID, poolBody{"pool": 2})
	require.Equal(t, http.StatusOK, code, string(b))
	h.clk.Advance(2 * time.Second)
	assert.Equal(t, 2, h.pool(p.ID).CurrentSize, "a grow refills")

	code, b, _ = h.raw("DELETE", "/api/warm-pools/"+p.ID, nil)
	require.Equal(t, http.StatusNoContent, code, string(b))
	h.clk.Advance(2 * time.Second)
	h.sim.mu.RLock()
	assert.Zero(t, h.sim.rows.Count(poolOrgPrefix+p.ID), "a delete destroys every unclaimed member")
	h.sim.mu.RUnlock()
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(taken.Id).GetState(), "the handed-over sandbox stays")
}

// TestWarmPoolBilling: a member is billed to its pool (a row of its own
// with warmPool set) until it is taken, then to the caller.
func TestWarmPoolBilling(t *testing.T) {
	h := newHarness(t)
	p := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 1})
	h.clk.Advance(10 * time.Second)
	sb := h.create(apiclient.CreateSandbox{})
	h.clk.Advance(5 * time.Second)

	rep := h.sim.Cost(Prices{CPUPerSecond: 1})
	rows := map[string][]cost.SandboxCost{}
	for _, r := range rep.Sandboxes {
		rows[r.WarmPool] = append(rows[r.WarmPool], r)
	}
	require.Len(t, rows[p.ID], 2, "the taken member's time in the pool and its refill's")
	assert.Equal(t, sb.Id, rows[p.ID][0].ID)
	assert.Equal(t, 10.0, rows[p.ID][0].RunningSeconds, "billed to the pool until taken")
	assert.Equal(t, 5.0, rows[p.ID][1].RunningSeconds, "the refill, billed to the pool")
	assert.Equal(t, orgOf(testKey), rows[p.ID][0].OrganizationID, "the pool's organization pays for it")
	require.Len(t, rows[""], 1)
	assert.Equal(t, cost.SandboxCost{ID: sb.Id, OrganizationID: orgOf(testKey), Name: sb.Id,
		RunningSeconds: 5, Cost: 5}, rows[""][0], "the caller's from the takeover on")
	assert.Equal(t, 20.0, rep.Cost)

	code, b, _ := h.admin("GET", "/_sim/cost?cpuPerSecond=1", nil)
	require.Equal(t, http.StatusOK, code, string(b))
	var scoped CostReport
	require.NoError(t, json.Unmarshal(b, &scoped))
	assert.Len(t, scoped.Sandboxes, 3, "the organization's report has its pool's rows")
}

// TestDefaultWarmPool: Config.WarmPool (--warm-pool) is a pool of the
// default snapshot in the default region, listed to every organization,
// whose members any organization's matching create takes and whose cost
// only the report of every organization has.
func TestDefaultWarmPool(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.WarmPool = 2
		c.APIKeys = []string{testKey, otherKey}
	})
	mine, theirs := h.pools(testKey), h.pools(otherKey)
	require.Len(t, mine, 1)
	assert.Equal(t, mine, theirs, "every organization sees the default pool")
	def := mine[0]
	assert.Equal(t, warmPoolDTO{ID: def.ID, OrganizationID: warmPoolOrg, Snapshot: defaultSnapshot, Target: "us",
		Pool: 2, CurrentSize: 2, CPU: 1, Mem: 1, Disk: 3, OSUser: "daytona", Env: map[string]string{},
		CreatedAt: def.CreatedAt, UpdatedAt: def.UpdatedAt}, def)

	before := h.members(def.ID)
	for _, key := range []string{testKey, otherKey} {
		sb, _, err := h.api.SandboxAPI.CreateSandbox(h.as(key)).CreateSandbox(apiclient.CreateSandbox{}).Execute()
		require.NoError(t, err)
		assert.True(t, before[sb.Id], "%s takes from the default pool", key)
	}
	assert.Equal(t, 2, h.pools(testKey)[0].CurrentSize, "refilled")

	// An organization's own pool of the same snapshot is taken first.
	own := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 1})
	members := h.members(own.ID)
	sb := h.create(apiclient.CreateSandbox{})
	assert.True(t, members[sb.Id], "the organization's own pool serves it before the default one")

	h.clk.Advance(time.Second)
	code, b, _ := h.admin("GET", "/_sim/cost", nil)
	require.Equal(t, http.StatusOK, code, string(b))
	var scoped CostReport
	require.NoError(t, json.Unmarshal(b, &scoped))
	for _, r := range scoped.Sandboxes {
		assert.NotEqual(t, def.ID, r.WarmPool, "the default pool is the simulator's, not in a caller's report")
	}
	all := 0
	for _, r := range h.sim.Cost(Prices{}).Sandboxes {
		if r.WarmPool == def.ID {
			all++
		}
	}
	assert.Equal(t, 4, all, "the report of every organization has the default pool's rows: two taken, two refills")
}

// TestSnapshotOfAWarmPoolIsNotDeleted: deleting a snapshot a pool keeps
// sandboxes of is a 409 naming the pool; once the pool is gone it works.
func TestSnapshotOfAWarmPoolIsNotDeleted(t *testing.T) {
	h := newHarness(t)
	code, b, _ := h.raw("POST", "/api/snapshots", map[string]any{"name": "mine", "imageName": "python:3.12"})
	require.Equal(t, http.StatusOK, code, string(b))
	var sn struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(b, &sn))
	h.clk.Advance(time.Minute)
	p := h.createPool(poolBody{"snapshot": "mine", "pool": 1})
	assert.Equal(t, "mine", p.Snapshot)

	code, b, _ = h.raw("DELETE", "/api/snapshots/"+sn.ID, nil)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "Snapshot mine is in use by warm pool "+p.ID+": delete the warm pool first (DELETE /warm-pools/"+p.ID+")",
		h.nestError(b).Message)

	code, b, _ = h.raw("DELETE", "/api/warm-pools/"+p.ID, nil)
	require.Equal(t, http.StatusNoContent, code, string(b))
	code, b, _ = h.raw("DELETE", "/api/snapshots/"+sn.ID, nil)
	assert.Equal(t, http.StatusOK, code, string(b))
}

// TestWarmPoolLatency: the profile charges a warm hit WarmCreate and a
// cold create its creating step, on the simulator's clock.
func TestWarmPoolLatency(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Profile = slowProfile()
		c.Profile.WarmCreate = Range{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond}
	})
	h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 1})
	h.clk.Advance(2 * time.Second)

	for _, tc := range []struct {
		name string
		body apiclient.CreateSandbox
		// waiters are the timers the create arms: the warm hit's latency,
		// beside the refill's step, or the cold create's step and its 30 s wait.
		waiters int
		wait    time.Duration
	}{
		{"warm hit", apiclient.CreateSandbox{}, 2, 50 * time.Millisecond},
		{"cold", apiclient.CreateSandbox{Env: &map[string]string{"X": "1"}}, 2, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.clk.Advance(2 * time.Second) // the refill, if any, is ready
			waiters := h.clk.Waiters()
			out := make(chan error, 1)
			go func() {
				_, _, err := h.api.SandboxAPI.CreateSandbox(h.ctx).CreateSandbox(tc.body).Execute()
				out <- err
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, h.clk.BlockUntilWaiters(ctx, waiters+tc.waiters))
			h.clk.Advance(tc.wait - time.Millisecond)
			select {
			case <-out:
				t.Fatal("answered before its latency passed")
			default:
			}
			h.clk.Advance(time.Millisecond)
			select {
			case err := <-out:
				require.NoError(t, err)
			case <-ctx.Done():
				t.Fatal("no answer once its latency passed")
			}
		})
	}
}

// failingStart is a backend whose workloads fail to start until told
// otherwise.
type failingStart struct {
	backend.None
	fail atomic.Bool
}

func (b *failingStart) Start(ctx context.Context, w Workload) (string, error) {
	if b.fail.Load() {
		return "", errors.New("no room on the runner")
	}
	return b.None.Start(ctx, w)
}

// TestWarmPoolReportsAFailedStart: a member that fails to start keeps its
// place and says why in errorReason, without a storm of new attempts; an
// update replaces it.
func TestWarmPoolReportsAFailedStart(t *testing.T) {
	be := &failingStart{}
	be.fail.Store(true)
	h := newHarness(t, func(c *Config) { c.Backend = be })
	p := h.createPool(poolBody{"snapshot": defaultSnapshot, "pool": 1})
	var got warmPoolDTO
	require.Eventually(t, func() bool { got = h.pool(p.ID); return got.ErrorReason != nil }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "no room on the runner", *got.ErrorReason)
	assert.Zero(t, got.CurrentSize)
	assert.Len(t, h.members(p.ID), 1, "the failed member keeps its place")

	be.fail.Store(false)
	code, b, _ := h.raw("PATCH", "/api/warm-pools/"+p.ID, poolBody{"pool": 1})
	require.Equal(t, http.StatusOK, code, string(b))
	require.Eventually(t, func() bool { got = h.pool(p.ID); return got.CurrentSize == 1 }, 10*time.Second, time.Millisecond)
	assert.Nil(t, got.ErrorReason, "the update replaced the failed member")
}
