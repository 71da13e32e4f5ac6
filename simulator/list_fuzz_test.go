package simulator

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/store"
)

// listFuzzOrg is the organization of listFuzzRows; listFuzzOther holds
// rows a list of listFuzzOrg must never return.
const (
	listFuzzOrg   = "org-a"
	listFuzzOther = "org-b"
)

// listFuzzRows are sandboxes that differ in every field a filter or a sort
// reads, with times that share their milliseconds (so that ties fall to
// the id), errored and deleted ones among them.
func listFuzzRows() []*sandbox {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	states := []string{stStarted, stStopped, stError, stArchived, stCreating, stBuildFailed}
	snaps := []string{"daytona", "python", "node"}
	var rows []*sandbox
	for i := range 24 {
		snap := snaps[i%3]
		sb := &sandbox{
			ID:           fmt.Sprintf("%08x-0000-4000-8000-%012d", 0xa0+i*7%24, i),
			OrgID:        listFuzzOrg,
			Name:         fmt.Sprintf("Box-%d", i%9),
			Labels:       map[string]string{"i": fmt.Sprint(i % 4), "team": []string{"red", "blue"}[i%2]},
			Target:       []string{"us", "eu"}[i%2],
			CPU:          1 + i%3,
			Memory:       1 + i%4,
			Disk:         3 + i%5,
			State:        states[i%len(states)],
			Desired:      dsStarted,
			Public:       i%5 == 0,
			Recoverable:  i%7 == 0,
			CreatedAt:    base.Add(time.Duration(i/3) * time.Millisecond).Add(time.Duration(i) * time.Microsecond),
			UpdatedAt:    base.Add(time.Duration(i%6) * time.Second),
			LastActivity: base.Add(time.Duration(i%5) * time.Second).Add(time.Duration(i) * time.Microsecond),
		}
		if i%4 != 3 {
			sb.Snapshot = &snap
		}
		if i%6 == 2 && i%4 == 2 {
			sb.Desired = dsDestroyed // errored and deleted
		}
		sb.Name = fmt.Sprintf("%s-%d", sb.Name, i) // names are unique in an organization
		rows = append(rows, sb)
	}
	for i := range 3 {
		rows = append(rows, &sandbox{ID: fmt.Sprintf("b%07x-0000-4000-8000-000000000000", i), OrgID: listFuzzOther,
			Name: fmt.Sprintf("Box-%d", i), Labels: map[string]string{"i": "0"}, State: stStarted, Desired: dsStarted,
			CPU: 1, Memory: 1, Disk: 3, CreatedAt: base, LastActivity: base})
	}
	return rows
}

// listFuzzSim is a simulator whose store holds listFuzzRows.
func listFuzzSim(t testing.TB) (*Simulator, []*sandbox) {
	sim, err := New(Config{Seed: 1, DisableValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	rows := listFuzzRows()
	sim.mu.Lock()
	for _, sb := range rows {
		sim.rows.Insert(sb)
	}
	sim.mu.Unlock()
	return sim, rows
}

// wantRows is the list the indexes must give, found the slow way: every
// row of org that matches f, sorted by field then id.
func wantRows(rows []*sandbox, org string, f *filter, field string, desc bool) []string {
	var all []keyed
	for _, sb := range rows {
		if sb.OrgID == org && f.match(sb) {
			all = append(all, keyed{Row: sb, Key: keyOf(sb, field)})
		}
	}
	store.SortRows(all, desc)
	return idsOf(all)
}

func idsOf(rows []keyed) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Row.ID)
	}
	return out
}

// walkPages lists every page of the cursor list, as a client does: each
// cursor through its JSON, as it travels.
func walkPages(t *testing.T, sim *Simulator, f *filter, field string, desc bool, limit int) []string {
	var got []string
	var after *cursor
	var afterKey sortKey
	for range len(listFuzzRows()) + 2 {
		rows, more := listPage(sim.rows, listFuzzOrg, f, field, desc, after, afterKey, limit, nil)
		if len(rows) > limit {
			t.Fatalf("a page of %d rows for a limit of %d", len(rows), limit)
		}
		got = append(got, idsOf(rows)...)
		if !more {
			return got
		}
		if len(rows) == 0 {
			t.Fatal("an empty page says more follow")
		}
		last := rows[len(rows)-1]
		b, err := json.Marshal(cursor{SortValue: cursorValue(last.Key, field), ID: last.Row.ID})
		if err != nil {
			t.Fatal(err)
		}
		var cur cursor
		if err := json.Unmarshal(b, &cur); err != nil {
			t.Fatal(err)
		}
		k, ok := keyFromJSON(field, cur.SortValue)
		if !ok {
			t.Fatalf("sort %q: the list's own cursor %s does not read back", field, b)
		}
		after, afterKey = &cur, k
	}
	t.Fatalf("sort %q: the pages never end: %v", field, got)
	return nil
}

// FuzzListFilter checks both lists against the slow way for any query: the
// cursor list's pages, walked to the end, are every matching row exactly
// once, in order; the page-numbered list's total and page are the slow
// way's too; and a query never panics.
func FuzzListFilter(f *testing.F) {
	for _, seed := range []string{
		"", "limit=3", "sort=name&order=asc&limit=2", "sort=createdAt&limit=1",
		"labels=%7B%22i%22%3A%221%22%7D&limit=2", "labels=%7B%22team%22%3A%22red%22%2C%22i%22%3A%222%22%7D",
		"states=started&states=error&includeErroredDeleted=true", "snapshots=python&minCpu=2&maxMemoryGiB=3",
		"id=a&name=box-1", "lastEventAfter=2026-01-02T03:04:06Z&lastEventBefore=2026-01-02T03:04:09Z",
		"createdAtAfter=2026-01-02T03:04:05.002Z&sort=cpu&order=asc", "isPublic=true&isRecoverable=false",
		"regionIds=eu&sandboxClasses=container&sort=diskGib", "labels=%7B%22i%22%3A1%7D", "labels=nope",
		"sort=memoryGib&order=desc&limit=4", "sort=state&limit=2", "page=2&limit=3&sort=id&order=asc",
	} {
		f.Add(seed)
	}
	sim, rows := listFuzzSim(f)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		sim.mu.RLock()
		defer sim.mu.RUnlock()
		checkCursorList(t, sim, rows, q)
		checkNumberedList(t, sim, rows, q)
	})
}

func checkCursorList(t *testing.T, sim *Simulator, rows []*sandbox, q url.Values) {
	f, aerr := parseFilter(q, false)
	if aerr != nil {
		return
	}
	field := q.Get("sort")
	if field == "" {
		field = "lastActivityAt"
	}
	desc := q.Get("order") != "asc"
	want := wantRows(rows, listFuzzOrg, &f, field, desc)
	limit := 1 + len(q.Get("limit"))%5
	if got := walkPages(t, sim, &f, field, desc, limit); !slices.Equal(got, want) {
		t.Fatalf("sort %q desc %v limit %d:\n got %v\nwant %v", field, desc, limit, got, want)
	}
}

func checkNumberedList(t *testing.T, sim *Simulator, rows []*sandbox, q url.Values) {
	f, aerr := parseFilter(q, true)
	if aerr != nil {
		return
	}
	field := q.Get("sort")
	if field == "" {
		field = "createdAt"
	}
	desc := q.Get("order") != "asc"
	want := wantRows(rows, listFuzzOrg, &f, field, desc)
	offset, limit := len(q.Get("page"))%4, 1+len(q.Get("limit"))%5
	total, page := pageByNumberOf(sim.rows, listFuzzOrg, &f, field, desc, offset, limit)
	lo := min(offset, len(want))
	if total != len(want) || !slices.Equal(idsOf(page), want[lo:min(lo+limit, len(want))]) {
		t.Fatalf("sort %q desc %v offset %d limit %d: total %d page %v, want total %d of %v",
			field, desc, offset, limit, total, idsOf(page), len(want), want)
	}
}
