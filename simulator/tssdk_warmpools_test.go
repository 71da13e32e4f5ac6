package simulator

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The newest SDK's daytona.warmPool against a simulator with a default
// pool, whose sandboxes run the real toolbox: the pools it lists, creates,
// resizes and deletes have the v0.205.1 shapes, a create of the pool's
// snapshot is served by a pooled sandbox that runs commands at once, and
// deleting the pool leaves that sandbox to its caller.
func TestOfficialTypeScriptSDKWarmPools(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t, func(c *Config) { c.WarmPool = 1 })
	out := runSDK(t, sdk.pkg, "warm-pools", url)
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			Listed      int
			DefaultPool struct {
				ID, Snapshot string
				Pool         int
			}
			Pool    string
			Created struct {
				Pool           int
				Snapshot       string
				Target, OSUser string
				Env            map[string]string
				CPU, Mem, Disk int
				ErrorReason    *string
			}
			Ready             int
			ID                string
			SandboxState      string
			SandboxWarmPoolID string
			Exec              string
			Duplicate         string
			DefaultChange     string
			Resized           struct{ Pool, CurrentSize int }
			After             []string
			DeletedAgain      string
			Kept              string
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	s := res.Seen
	assert.True(t, res.OK)
	assert.Equal(t, 1, s.Listed, "the default pool alone")
	assert.Equal(t, defaultSnapshot, s.DefaultPool.Snapshot)
	assert.Equal(t, 1, s.DefaultPool.Pool)
	assert.Equal(t, 2, s.Created.Pool)
	assert.Equal(t, defaultSnapshot, s.Created.Snapshot)
	assert.Equal(t, "us", s.Created.Target)
	assert.Equal(t, "daytona", s.Created.OSUser)
	assert.Empty(t, s.Created.Env)
	assert.Equal(t, []int{1, 1, 3}, []int{s.Created.CPU, s.Created.Mem, s.Created.Disk})
	assert.Nil(t, s.Created.ErrorReason)
	assert.Equal(t, 2, s.Ready)
	assert.Equal(t, "started", s.SandboxState)
	assert.Equal(t, "absent", s.SandboxWarmPoolID, "a taken sandbox waits in no pool")
	assert.Equal(t, "warm", s.Exec, "the pooled sandbox's toolbox answers")
	assert.Contains(t, s.Duplicate, "already keeps sandboxes of snapshot")
	assert.Contains(t, s.DefaultChange, "default pool (--warm-pool)")
	assert.Equal(t, 1, s.Resized.Pool)
	assert.Equal(t, []string{s.DefaultPool.ID}, s.After)
	assert.Contains(t, s.DeletedAgain, "not found")
	assert.Equal(t, "started", s.Kept, "deleting the pool leaves the sandbox it handed over")

	taken := false
	for _, r := range sim.Cost(Prices{}).Sandboxes {
		if r.ID == s.ID && r.WarmPool == s.Pool {
			taken = true
		}
	}
	assert.True(t, taken, "the SDK's create was served by its organization's pool")
	counts := sim.calls.counts(everyOrg)
	for _, op := range []string{"listWarmPools", "createWarmPool", "updateWarmPool", "deleteWarmPool", "createSandbox"} {
		assert.NotZero(t, counts[op], "the SDK run made no %s call", op)
	}
	assertCallsSucceeded(t, sim, "createWarmPool", "updateWarmPool", "deleteWarmPool")
	assert.Empty(t, sim.SpecViolations())
}
