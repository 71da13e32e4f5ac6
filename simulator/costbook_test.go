package simulator

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCostKeepsTotalsAndBoundsRows deletes more sandboxes than the report
// keeps rows for: the totals still count every second of every sandbox,
// the oldest deleted rows give way, and the rows come in pages.
func TestCostKeepsTotalsAndBoundsRows(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.CostHistory = 2 })
	var ids []string
	for range 5 {
		ids = append(ids, h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](0)}).Id)
	}
	h.clk.Advance(10 * time.Second)
	for _, id := range ids[:4] {
		code, body, _ := h.raw("DELETE", "/api/sandbox/"+id, nil)
		require.Equal(t, http.StatusOK, code, string(body))
	}
	h.clk.Advance(10 * time.Second)

	p := Prices{CPUPerSecond: 1, MemoryGiBPerSecond: 0.5, DiskGiBPerSecond: 0.01, FreeDiskGiB: 1}
	rep := h.sim.Cost(p)
	// four sandboxes ran 10 s and one 20 s, each at 1 vCPU×1 + 1 GiB×0.5 + 2 billed GiB×0.01
	assert.InDelta(t, 60, rep.RunningSeconds, 1e-9)
	assert.InDelta(t, 60*1.52, rep.Cost, 1e-9)
	assert.Equal(t, 2, rep.Pruned, "the two oldest deleted are in the totals only")
	got := make([]string, len(rep.Sandboxes))
	for i, sc := range rep.Sandboxes {
		got[i] = sc.ID
	}
	assert.Equal(t, []string{ids[2], ids[3], ids[4]}, got, "the last two deleted and the live one, in creation order")
	h.sim.mu.RLock()
	assert.Equal(t, 3, h.sim.costs.Len())
	h.sim.mu.RUnlock()

	t.Run("pages", func(t *testing.T) {
		const prices = "cpuPerSecond=1&memoryGiBPerSecond=0.5&diskGiBPerSecond=0.01&freeDiskGiB=1"
		var rows []string
		cursor := ""
		for range 10 {
			code, body, _ := h.admin("GET", "/_sim/cost?"+prices+"&limit=2"+cursor, nil)
			require.Equal(t, http.StatusOK, code, string(body))
			var page CostReport
			require.NoError(t, json.Unmarshal(body, &page))
			assert.InDelta(t, rep.Cost, page.Cost, 1e-9, "every page carries the whole run's totals")
			assert.LessOrEqual(t, len(page.Sandboxes), 2)
			for _, sc := range page.Sandboxes {
				rows = append(rows, sc.ID)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = "&cursor=" + page.NextCursor
		}
		assert.Equal(t, got, rows)
	})

	t.Run("bad pages", func(t *testing.T) {
		for _, q := range []string{"limit=0", "limit=x", "limit=10001", "cursor=abc"} {
			code, body, _ := h.admin("GET", "/_sim/cost?"+q, nil)
			assert.Equal(t, http.StatusBadRequest, code, "%s: %s", q, body)
		}
	})
}
