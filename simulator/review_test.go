package simulator

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/sandplane/sandplane/simulator/internal/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Timestamps finer than the cursor's milliseconds must not make pages skip
// or repeat sandboxes.
func TestCursorPagesEverySandboxOnceWithSubMillisecondTimes(t *testing.T) {
	h := newHarness(t)
	var want []string
	for i := 0; i < 7; i++ {
		want = append(want, h.create(apiclient.CreateSandbox{}).Id)
		h.clk.Advance(300 * time.Microsecond)
	}
	for _, order := range []apiclient.SandboxListSortDirection{apiclient.SANDBOXLISTSORTDIRECTION_ASC, apiclient.SANDBOXLISTSORTDIRECTION_DESC} {
		for _, field := range []apiclient.SandboxListSortField{apiclient.SANDBOXLISTSORTFIELD_CREATED_AT, apiclient.SANDBOXLISTSORTFIELD_LAST_ACTIVITY_AT} {
			t.Run(string(field)+" "+string(order), func(t *testing.T) {
				var got []string
				cursor := ""
				for pages := 0; ; pages++ {
					require.Less(t, pages, 10)
					req := h.api.SandboxAPI.ListSandboxes(h.ctx).Limit(2).Sort(field).Order(order)
					if cursor != "" {
						req = req.Cursor(cursor)
					}
					list, _, err := req.Execute()
					require.NoError(t, err)
					for _, it := range list.Items {
						got = append(got, it.Id)
					}
					if cursor = list.GetNextCursor(); cursor == "" {
						break
					}
				}
				assert.ElementsMatch(t, want, got)
				assert.Len(t, got, len(want), "no sandbox twice")
			})
		}
	}
}

// The largest interval Daytona's integer column holds must not overflow the
// idle comparison and stop the sandbox at the next tick.
func TestHugeAutoStopIntervalNeverFires(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](2147483647)})
	h.clk.Advance(time.Minute)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(sb.Id).GetState())

	sb = h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](0), AutoDeleteInterval: ptr[int32](2147483647)})
	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.clk.Advance(time.Minute)
	assert.Equal(t, apiclient.SANDBOXSTATE_STOPPED, h.get(sb.Id).GetState(), "a huge auto-delete interval does not delete")
}

// Daytona's access guard runs before the pipes and the service, so an
// unknown sandbox is a 404 whatever else is wrong with the request.
func TestUnknownSandboxIs404BeforeParameterChecks(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ method, path string }{
		{"POST", "/api/sandbox/nope/stop?force=yes"},
		{"POST", "/api/sandbox/nope/autostop/-1"},
		{"POST", "/api/sandbox/nope/autoarchive/-1"},
		{"POST", "/api/sandbox/nope/autodelete/x"},
		{"GET", "/api/sandbox/nope/ports/0/preview-url"},
		{"GET", "/api/sandbox/nope/ports/0/signed-preview-url"},
		{"GET", "/api/sandbox/nope/ports/80/signed-preview-url?expiresInSeconds=0"},
		{"POST", "/api/sandbox/nope/ports/0/signed-preview-url/tok/expire"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, body, _ := h.raw(tc.method, tc.path, nil)
			assert.Equal(t, http.StatusNotFound, code, string(body))
			assert.Equal(t, "Sandbox with ID or name nope not found", h.nestError(body).Message)
		})
	}
}

func TestListLimitAboveTheMaximumSaysSo(t *testing.T) {
	h := newHarness(t)
	code, body, _ := h.raw("GET", "/api/sandbox?limit=201", nil)
	require.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "limit must not be greater than 200", h.nestError(body).Message)
}

// Every takeover refills the pool, however large it is.
func TestWarmPoolRefillsAfterEveryTakeover(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Profile = slowProfile()
		c.WarmPool = 3
	})
	warm := func() int {
		h.sim.mu.Lock()
		defer h.sim.mu.Unlock()
		n := 0
		for sb := range h.sim.rows.All() {
			if sb.OrgID == warmPoolOrg {
				n++
			}
		}
		return n
	}
	h.clk.Advance(time.Hour)
	require.Equal(t, 3, warm())
	for i := 0; i < 3; i++ {
		sb := h.create(apiclient.CreateSandbox{})
		assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState())
		assert.Equal(t, 3, warm(), "the pool is topped up after takeover %d", i+1)
		h.clk.Advance(time.Minute)
	}
}

// Close releases the requests that wait for a sandbox to start.
func TestCloseReleasesWaitingCreates(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = slowProfile() })
	ch := h.createAsync(apiclient.CreateSandbox{})
	require.NoError(t, h.sim.Close())
	select {
	case res := <-ch:
		require.NoError(t, res.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the create still waits after Close")
	}
}

// forceBackend records the force flag of every Stop.
type forceBackend struct {
	backend.None
	mu     sync.Mutex
	forces []bool
}

func (b *forceBackend) Stop(_ context.Context, _ string, force bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forces = append(b.forces, force)
	return nil
}

// An auto-stop is a graceful stop, even after a forced manual one.
func TestAutoStopIsNotForcedByAnEarlierForcedStop(t *testing.T) {
	be := &forceBackend{}
	h := newHarness(t, func(c *Config) { c.Backend = be })
	sb := h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](1)})
	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Force(true).Execute()
	require.NoError(t, err)
	stopped := func() bool { return h.get(sb.Id).GetState() == apiclient.SANDBOXSTATE_STOPPED }
	require.Eventually(t, stopped, 10*time.Second, time.Millisecond)
	_, _, err = h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.clk.Advance(2 * time.Minute)
	require.Eventually(t, stopped, 10*time.Second, time.Millisecond)
	be.mu.Lock()
	defer be.mu.Unlock()
	assert.Equal(t, []bool{true, false}, be.forces)
}

// A seed makes a run's ids repeat, never its credentials: two simulators
// with one seed hand out the same sandbox ids and different preview
// tokens, so that knowing the seed (tests share theirs) opens nothing.
func TestSeedsRepeatIDsNeverTokens(t *testing.T) {
	tokenOf := func(h *harness) (string, string) {
		sb := h.create(apiclient.CreateSandbox{})
		var pv struct{ Token string }
		require.NoError(t, json.Unmarshal(mustGet(t, h, "/api/sandbox/"+sb.Id+"/ports/3000/preview-url"), &pv))
		require.NotEmpty(t, pv.Token)
		return sb.Id, pv.Token
	}
	id1, tok1 := tokenOf(newHarness(t))
	id2, tok2 := tokenOf(newHarness(t))
	assert.Equal(t, id1, id2, "the same seed, the same ids")
	assert.NotEqual(t, tok1, tok2, "a token is drawn from crypto/rand")
	assert.Regexp(t, `^[a-z0-9_-]{32}$`, tok1)
}
