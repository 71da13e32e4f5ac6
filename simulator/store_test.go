package simulator

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/store"
)

// scanList is the listing the indexes must reproduce, computed the way the
// simulator did before it had them: every row of the organization matched,
// then all sorted.
func (h *harness) scanList(org string, q url.Values, deprecated bool) []string {
	h.t.Helper()
	f, aerr := parseFilter(q, deprecated)
	require.Nil(h.t, aerr)
	field := q.Get("sort")
	if field == "" {
		field = "lastActivityAt"
		if deprecated {
			field = "createdAt"
		}
	}
	desc := q.Get("order") != "asc"
	h.sim.mu.RLock()
	defer h.sim.mu.RUnlock()
	var rows []keyed
	for sb := range h.sim.rows.All() {
		if sb.OrgID == org && f.match(sb) {
			rows = append(rows, keyed{Row: sb, Key: keyOf(sb, field)})
		}
	}
	store.SortRows(rows, desc)
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.Row.ID
	}
	return ids
}

// pages follows the cursors of GET /api/sandbox with q and returns every id
// in order.
func (h *harness) pages(q url.Values) []string {
	h.t.Helper()
	ids := []string{}
	for range 1000 {
		code, body, _ := h.raw("GET", "/api/sandbox?"+q.Encode(), nil)
		require.Equal(h.t, http.StatusOK, code, string(body))
		var page struct {
			Items      []struct{ ID string }
			NextCursor *string
		}
		require.NoError(h.t, json.Unmarshal(body, &page))
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.NextCursor == nil {
			return ids
		}
		q.Set("cursor", *page.NextCursor)
	}
	h.t.Fatal("the cursors never ended")
	return nil
}

// TestListIndexesMatchAScan churns two organizations (creates in the same
// millisecond and apart, stops, starts, activity, relabels, deletes) and
// checks that every listing the indexes answer, page by page through the
// cursors, is the listing a scan and a full sort give.
func TestListIndexesMatchAScan(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(7, 7))
	other := "other-key"
	var mine []string
	for i := range 60 {
		team := []string{"a", "b", "c"}[rng.IntN(3)]
		body := map[string]any{"labels": map[string]string{"team": team, "n": fmt.Sprint(i)}, "autoDeleteInterval": -1}
		if i%4 == 0 {
			body["name"] = fmt.Sprintf("box-%02d", 60-i)
		}
		code, out, _ := h.raw("POST", "/api/sandbox", body)
		require.Equal(t, http.StatusOK, code, string(out))
		var sb struct{ ID string }
		require.NoError(t, json.Unmarshal(out, &sb))
		mine = append(mine, sb.ID)
		if i%7 == 0 {
			code, out, _ = h.rawAs(other, "POST", "/api/sandbox", map[string]any{"labels": map[string]string{"team": team}})
			require.Equal(t, http.StatusOK, code, string(out))
		}
		if rng.IntN(3) > 0 { // some creates share a millisecond
			h.clk.Advance(time.Duration(rng.IntN(5)+1) * time.Millisecond)
		}
	}
	for _, id := range mine {
		h.clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
		switch rng.IntN(6) {
		case 0:
			code, out, _ := h.raw("POST", "/api/sandbox/"+id+"/stop", nil)
			require.Equal(t, http.StatusOK, code, string(out))
		case 1:
			h.clk.Advance(6 * time.Second) // past the activity throttle
			code, out, _ := h.raw("POST", "/api/sandbox/"+id+"/last-activity", nil)
			require.Equal(t, http.StatusCreated, code, string(out))
		case 2:
			code, out, _ := h.raw("PUT", "/api/sandbox/"+id+"/labels", map[string]any{"labels": map[string]string{"team": "a", "moved": "yes"}})
			require.Equal(t, http.StatusOK, code, string(out))
		case 3:
			code, out, _ := h.raw("DELETE", "/api/sandbox/"+id, nil)
			require.Equal(t, http.StatusOK, code, string(out))
		}
	}
	org := orgOf(testKey)
	for _, tc := range []struct{ name, query string }{
		{"default", "limit=7"},
		{"activity ascending", "limit=5&order=asc"},
		{"created", "limit=6&sort=createdAt"},
		{"created ascending", "limit=9&sort=createdAt&order=asc"},
		{"name", "limit=4&sort=name&order=asc"},
		{"common label", `limit=3&labels={"team":"a"}`},
		{"common label walked in order", `limit=1&labels={"team":"a"}`},
		{"two labels", `limit=2&labels={"team":"a","moved":"yes"}&sort=createdAt`},
		{"absent label", `limit=2&labels={"team":"z"}`},
		{"label and state", `limit=3&labels={"team":"b"}&states=stopped`},
		{"deleted included", "limit=8&includeErroredDeleted=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			require.NoError(t, err)
			want := h.scanList(org, q, false)
			assert.Equal(t, want, h.pages(q))
		})
	}
	t.Run("deprecated pages", func(t *testing.T) {
		for _, query := range []string{"limit=7&page=2", "limit=7&page=2&order=asc", `limit=3&page=1&labels={"team":"c"}`, "limit=5&page=3&sort=name"} {
			q, err := url.ParseQuery(query)
			require.NoError(t, err)
			want := h.scanList(org, q, true)
			code, body, _ := h.raw("GET", "/api/sandbox/paginated?"+query, nil)
			require.Equal(t, http.StatusOK, code, string(body))
			var page struct {
				Items []struct{ ID string }
				Total int
			}
			require.NoError(t, json.Unmarshal(body, &page))
			assert.Equal(t, len(want), page.Total, query)
			limit, _ := fmtAtoi(q.Get("limit"))
			n, _ := fmtAtoi(q.Get("page"))
			lo, hi := min((n-1)*limit, len(want)), min(n*limit, len(want))
			got := make([]string, len(page.Items))
			for i, it := range page.Items {
				got[i] = it.ID
			}
			assert.Equal(t, want[lo:hi], got, query)
		}
	})
}

func fmtAtoi(s string) (int, error) {
	var n int
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// TestIndexesFollowTheRows checks the bookkeeping behind the indexes: a
// deleted sandbox leaves every index, the warm pool is counted from its
// index, and links are found without a scan.
func TestIndexesFollowTheRows(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.WarmPool = 2 })
	org := orgOf(testKey)
	sb := h.create(apiclient.CreateSandbox{Labels: &map[string]string{"k": "v"}})
	h.sim.mu.RLock()
	assert.Equal(t, 2, h.sim.rows.Count(warmPoolOrg), "the pool was refilled after the handover")
	assert.Equal(t, 1, h.sim.rows.Count(org))
	assert.Equal(t, 1, h.sim.rows.Labeled(org, "k", "v"))
	h.sim.mu.RUnlock()

	code, body, _ := h.raw("DELETE", "/api/sandbox/"+sb.Id, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	h.sim.mu.RLock()
	defer h.sim.mu.RUnlock()
	assert.Zero(t, h.sim.rows.Count(org), "a destroyed sandbox leaves the indexes")
	assert.Equal(t, store.OrgStats{}, h.sim.rows.OrgStats(org), "an organization without sandboxes keeps no index")
	assert.Zero(t, h.sim.rows.Stats().Links)
}

// TestChurnLeavesOnlyLiveRows creates and deletes sandboxes beside live
// ones, with labels, and checks that nothing keeps an entry of a deleted
// sandbox beyond the bounded cost history and call log: the id and name
// maps, the organization's indexes and label sets, the links.
func TestChurnLeavesOnlyLiveRows(t *testing.T) {
	const live, pairs, history, calls = 5, 60, 10, 50
	h := newHarness(t, func(c *Config) { c.CostHistory, c.CallLogSize = history, calls })
	org := orgOf(testKey)
	for i := range live {
		h.create(apiclient.CreateSandbox{Labels: &map[string]string{"live": fmt.Sprint(i)}})
	}
	for i := range pairs {
		sb := h.create(apiclient.CreateSandbox{Labels: &map[string]string{"churn": fmt.Sprint(i)}})
		code, body, _ := h.raw("DELETE", "/api/sandbox/"+sb.Id, nil)
		require.Equal(t, http.StatusOK, code, string(body))
	}

	h.sim.mu.RLock()
	defer h.sim.mu.RUnlock()
	assert.Equal(t, store.Stats{IDs: live, Names: live, Orgs: 1}, h.sim.rows.Stats())
	assert.Equal(t, live, h.sim.rows.Count(org))
	assert.Equal(t, store.OrgStats{Created: live, Activity: live, LabelSets: live}, h.sim.rows.OrgStats(org),
		"label sets of deleted sandboxes are gone")
	assert.Equal(t, live+history, h.sim.costs.Len(), "rows: the live sandboxes and the last deleted ones")
	assert.Len(t, h.sim.Calls(), calls)
}
