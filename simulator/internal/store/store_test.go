package store

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// row is the smallest Row: its keys, and its slot.
type row struct {
	k    Keys
	slot Slot
}

func (r *row) Keys() Keys  { return r.k }
func (r *row) Slot() *Slot { return &r.slot }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newRow(id, org, name string, sec int, labels map[string]string) *row {
	at := t0.Add(time.Duration(sec) * time.Second)
	return &row{k: Keys{ID: id, Org: org, Name: name, Created: at, Activity: at, Labels: labels}}
}

func ids(rows []Keyed[*row]) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Row.k.ID)
	}
	return out
}

// TestStoreFollowsItsRows plays inserts, renames, relabels and drops, and
// checks every index after each.
func TestStoreFollowsItsRows(t *testing.T) {
	type want struct {
		get, byName string // the id found, "" for none
		count       int
		labeled     int // rows of org o with team=red
		linkedToA   int
		stats       Stats
	}
	for _, tc := range []struct {
		name string
		do   func(s *Store[*row], a, b *row)
		want want
	}{
		{name: "insert", do: func(s *Store[*row], a, b *row) { s.Insert(a); s.Insert(b) },
			want: want{get: "a", byName: "a", count: 2, labeled: 1, linkedToA: 1, stats: Stats{IDs: 2, Names: 2, Orgs: 1, Links: 1}}},
		{name: "drop", do: func(s *Store[*row], a, b *row) { s.Insert(a); s.Insert(b); s.Drop(a) },
			want: want{count: 1, linkedToA: 1, stats: Stats{IDs: 1, Names: 1, Orgs: 1, Links: 1}}},
		{name: "drop both", do: func(s *Store[*row], a, b *row) { s.Insert(a); s.Insert(b); s.Drop(a); s.Drop(b) },
			want: want{}},
		{name: "rename", do: func(s *Store[*row], a, b *row) {
			s.Insert(a)
			a.k.Name = "alpha"
			s.Renamed(a, "box-a")
		}, want: want{get: "a", count: 1, labeled: 1, stats: Stats{IDs: 1, Names: 1, Orgs: 1}}},
		{name: "relabel", do: func(s *Store[*row], a, b *row) {
			s.Insert(a)
			a.k.Labels = map[string]string{"team": "blue"}
			s.Reindex(a)
		}, want: want{get: "a", byName: "a", count: 1, stats: Stats{IDs: 1, Names: 1, Orgs: 1}}},
		{name: "reindex of a row not in", do: func(s *Store[*row], a, b *row) { s.Reindex(a) },
			want: want{}},
		{name: "drop of a row never in", do: func(s *Store[*row], a, b *row) { s.Drop(a) },
			want: want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New[*row]()
			a := newRow("a", "o", "box-a", 1, map[string]string{"team": "red"})
			b := newRow("b", "o", "box-b", 2, nil)
			b.k.LinkedTo = "a"
			tc.do(s, a, b)
			got := want{count: s.Count("o"), labeled: s.Labeled("o", "team", "red"),
				linkedToA: len(s.LinkedTo("a")), stats: s.Stats()}
			if r := s.Get("a"); r != nil {
				got.get = r.k.ID
			}
			if r := s.ByName("o", "box-a"); r != nil {
				got.byName = r.k.ID
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if tc.want.count == 0 && s.OrgStats("o") != (OrgStats{}) {
				t.Errorf("an organization without rows keeps %+v", s.OrgStats("o"))
			}
		})
	}
}

// TestActivityMovedReorders: a row whose activity moved is found at its
// new place, and only there.
func TestActivityMovedReorders(t *testing.T) {
	s := New[*row]()
	rows := []*row{newRow("a", "o", "a", 1, nil), newRow("b", "o", "b", 2, nil), newRow("c", "o", "c", 3, nil)}
	for _, r := range rows {
		s.Insert(r)
	}
	rows[0].k.Activity = t0.Add(time.Minute)
	s.ActivityMoved(rows[0])
	q := &Query[*row]{Match: func(*row) bool { return true }, Order: ByActivity, Desc: true,
		Key: func(r *row) SortKey { return SortKey{T: r.k.Activity.Truncate(time.Millisecond)} }}
	page, more := s.Page("o", q, nil, 10, nil)
	if got := ids(page); more || !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Errorf("page %v more %v, want [a c b] and no more", got, more)
	}
	if st := s.OrgStats("o"); st.Activity != 3 {
		t.Errorf("activity index holds %d rows, want 3", st.Activity)
	}
}

// TestPagesWalkEveryMatchOnce lists the same rows by every order, from
// the index and from the label set, page by page.
func TestPagesWalkEveryMatchOnce(t *testing.T) {
	s := New[*row]()
	var all []*row
	for i := range 40 {
		r := newRow(fmt.Sprintf("id-%02d", i), "o", fmt.Sprintf("n-%02d", 39-i), i/2, map[string]string{"even": fmt.Sprint(i%2 == 0)})
		all = append(all, r)
		s.Insert(r)
	}
	s.Insert(newRow("other", "p", "n", 0, nil))
	byName := func(r *row) SortKey { return SortKey{Str: r.k.Name} }
	byCreated := func(r *row) SortKey { return SortKey{T: r.k.Created.Truncate(time.Millisecond)} }
	for _, tc := range []struct {
		name   string
		order  Order
		key    func(*row) SortKey
		labels map[string]string
		desc   bool
	}{
		{"created asc", ByCreated, byCreated, nil, false},
		{"created desc", ByCreated, byCreated, nil, true},
		{"name asc", Unordered, byName, nil, false},
		{"name desc, even", Unordered, byName, map[string]string{"even": "true"}, true},
		{"created, even", ByCreated, byCreated, map[string]string{"even": "true"}, false},
		{"created, no such label", ByCreated, byCreated, map[string]string{"even": "maybe"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			match := func(r *row) bool { return tc.labels == nil || r.k.Labels["even"] == tc.labels["even"] }
			q := &Query[*row]{Match: match, Key: tc.key, Order: tc.order, Labels: tc.labels, Desc: tc.desc}
			var want []Keyed[*row]
			for _, r := range all {
				if match(r) {
					want = append(want, Keyed[*row]{r, tc.key(r)})
				}
			}
			SortRows(want, tc.desc)
			var got []string
			var after *Cursor
			for range 50 {
				page, more := s.Page("o", q, after, 3, nil)
				got = append(got, ids(page)...)
				if !more {
					break
				}
				last := page[len(page)-1]
				after = &Cursor{Key: last.Key, ID: last.Row.k.ID}
			}
			if !slices.Equal(got, ids(want)) {
				t.Errorf("pages %v, want %v", got, ids(want))
			}
			total, page := s.PageByNumber("o", q, 2, 3)
			if total != len(want) || !slices.Equal(ids(page), ids(want[min(2, len(want)):min(5, len(want))])) {
				t.Errorf("page by number: total %d %v", total, ids(page))
			}
		})
	}
}

// TestTopRowsIsASortedPrefix: the bounded heap keeps what a sort would.
func TestTopRowsIsASortedPrefix(t *testing.T) {
	for _, n := range []int{0, 1, 5, 50, 200} {
		var rows []Keyed[*row]
		for i := range n {
			r := newRow(fmt.Sprintf("%03d", (i*37)%n), "o", "", 0, nil)
			s := New[*row]()
			s.Insert(r) // the id it sorts by is the one it was indexed with
			rows = append(rows, Keyed[*row]{r, SortKey{Num: float64(i % 7)}})
		}
		sorted := slices.Clone(rows)
		SortRows(sorted, true)
		top := TopRows(slices.Clone(rows), 10, true)
		if want := ids(sorted[:min(10, n)]); !slices.Equal(ids(top), want) {
			t.Errorf("n=%d: top %v, want %v", n, ids(top), want)
		}
	}
}
