package store

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"
)

// SortKey is a row's value in a list's sort column: a number, a string or
// a time. Times are cut to the milliseconds a cursor carries, so that a row
// compares with its own cursor as equal.
type SortKey struct {
	Num float64
	Str string
	T   time.Time
}

// Compare orders keys by number, then string, then time.
func (a SortKey) Compare(b SortKey) int {
	if c := cmp.Compare(a.Num, b.Num); c != 0 {
		return c
	}
	if c := strings.Compare(a.Str, b.Str); c != 0 {
		return c
	}
	return a.T.Compare(b.T)
}

// Keyed is a row with its key in the sort column.
type Keyed[R Row] struct {
	Row R
	Key SortKey
}

// Order names the ordered index a list walks.
type Order int

const (
	// Unordered: the field has no index; the list keeps the best rows
	// in a bounded heap.
	Unordered Order = iota
	// ByCreated walks the creation order (Keys.Created).
	ByCreated
	// ByActivity walks the activity order (Keys.Activity).
	ByActivity
)

// Query is what a list asks of one organization's rows.
type Query[R Row] struct {
	// Match keeps a row in the list.
	Match func(r R) bool
	// Key is a row's SortKey in the list's field. With an Order other than
	// Unordered it must be the ordered time, cut to the millisecond.
	Key   func(r R) SortKey
	Order Order
	// Labels, when set, are pairs every matching row carries: the store
	// may start from the rows of the rarest.
	Labels map[string]string
	Desc   bool
}

// Cursor is the position after the last row of a page.
type Cursor struct {
	Key SortKey
	ID  string
}

// labelScanFactor: a label filter whose rarest pair holds at most this many
// rows per row of the page is answered from the label index (match, then a
// bounded heap); a commoner one walks the ordered index, where most rows
// match and a page is found after about as many rows as it holds.
const labelScanFactor = 8

func (o *orgRows[R]) tree(ord Order) *btree.BTreeG[entry[R]] {
	switch ord {
	case ByCreated:
		return o.created
	case ByActivity:
		return o.activity
	}
	return nil
}

// labelCandidates is the rows carrying the rarest pair of labels, or nil
// when the query names no label. A pair that no row carries gives an empty
// set.
func (o *orgRows[R]) labelCandidates(labels map[string]string) map[R]struct{} {
	if len(labels) == 0 {
		return nil
	}
	var best map[R]struct{}
	for k, v := range labels {
		set := o.labels[labelKey(k, v)]
		if set == nil {
			return map[R]struct{}{}
		}
		if best == nil || len(set) < len(best) {
			best = set
		}
	}
	return best
}

// each calls f on the rows of the candidates, or of the whole organization
// when there are none (nil), until f returns false.
func (o *orgRows[R]) each(cands map[R]struct{}, f func(r R) bool) {
	if cands != nil {
		for r := range cands {
			if !f(r) {
				return
			}
		}
		return
	}
	o.created.Ascend(func(e entry[R]) bool { return f(e.r) })
}

// afterCursor reports whether a row with key k and id comes after the
// cursor in a listing in this direction.
func afterCursor(k SortKey, id string, after *Cursor, desc bool) bool {
	c := k.Compare(after.Key)
	if c == 0 {
		c = compareStrings(id, after.ID)
	}
	if desc {
		return c < 0
	}
	return c > 0
}

// Page is one page of a cursor list: the first limit rows of org that
// match q, after the cursor (when after is set), in q's order, and whether
// more follow. On an ordered field it walks the index from the cursor and
// stops after limit+1 matches; otherwise it keeps the best limit+1 of the
// matching rows in a bounded heap. The rows are appended to buf (empty),
// which the caller may pool.
func (s *Store[R]) Page(org string, q *Query[R], after *Cursor, limit int, buf []Keyed[R]) ([]Keyed[R], bool) {
	o := s.orgs[org]
	if o == nil {
		return nil, false
	}
	// accept keeps a row that matches and comes after the cursor.
	accept := func(r R, k SortKey) (Keyed[R], bool) {
		if !q.Match(r) {
			return Keyed[R]{}, false
		}
		if after != nil && !afterCursor(k, r.Slot().id, after, q.Desc) {
			return Keyed[R]{}, false
		}
		return Keyed[R]{r, k}, true
	}
	tree := o.tree(q.Order)
	cands := o.labelCandidates(q.Labels)
	rows := buf
	if tree == nil || cands != nil && len(cands) <= labelScanFactor*(limit+1) {
		o.each(cands, func(r R) bool {
			if kr, ok := accept(r, q.Key(r)); ok {
				rows = append(rows, kr)
			}
			return true
		})
		rows = TopRows(rows, limit+1, q.Desc)
		if len(rows) > limit {
			return rows[:limit], true
		}
		return rows, false
	}
	// The tree's key is the field's time, cut to the millisecond, kept up
	// to date as the row moves.
	visit := func(e entry[R]) bool {
		if kr, ok := accept(e.r, SortKey{T: e.key.t}); ok {
			rows = append(rows, kr)
		}
		return len(rows) <= limit
	}
	var pivot entry[R]
	if after != nil {
		pivot = entry[R]{key: orderKey{after.Key.T, after.ID}}
	}
	switch {
	case q.Desc && after != nil:
		tree.DescendLessOrEqual(pivot, visit)
	case q.Desc:
		tree.Descend(visit)
	case after != nil:
		tree.AscendGreaterOrEqual(pivot, visit)
	default:
		tree.Ascend(visit)
	}
	if len(rows) > limit {
		return rows[:limit], true
	}
	return rows, false
}

// PageByNumber is one page of a page-numbered list: the total of org's rows
// matching q, and the limit of them from offset on, in q's order. On an
// ordered field it counts along the index without sorting; otherwise it
// sorts the matches.
func (s *Store[R]) PageByNumber(org string, q *Query[R], offset, limit int) (total int, rows []Keyed[R]) {
	o := s.orgs[org]
	if o == nil {
		return 0, nil
	}
	tree := o.tree(q.Order)
	cands := o.labelCandidates(q.Labels)
	if tree == nil || cands != nil && len(cands) <= labelScanFactor*(offset+limit) {
		var all []Keyed[R]
		o.each(cands, func(r R) bool {
			if q.Match(r) {
				all = append(all, Keyed[R]{r, q.Key(r)})
			}
			return true
		})
		SortRows(all, q.Desc)
		lo := min(offset, len(all))
		hi := min(lo+limit, len(all))
		return len(all), all[lo:hi]
	}
	visit := func(e entry[R]) bool {
		if !q.Match(e.r) {
			return true
		}
		if total >= offset && total < offset+limit {
			rows = append(rows, Keyed[R]{e.r, q.Key(e.r)})
		}
		total++
		return true
	}
	if q.Desc {
		tree.Descend(visit)
	} else {
		tree.Ascend(visit)
	}
	return total, rows
}

// before reports whether a comes before b in a listing: by key, then id.
func before[R Row](a, b *Keyed[R], desc bool) bool {
	c := compareKeyed(a, b)
	if desc {
		return c > 0
	}
	return c < 0
}

func compareKeyed[R Row](a, b *Keyed[R]) int {
	if c := a.Key.Compare(b.Key); c != 0 {
		return c
	}
	return strings.Compare(a.Row.Slot().id, b.Row.Slot().id)
}

// SortRows orders rows by key, then id, in one direction.
func SortRows[R Row](rows []Keyed[R], desc bool) {
	slices.SortFunc(rows, func(a, b Keyed[R]) int {
		c := compareKeyed(&a, &b)
		if desc {
			c = -c
		}
		return c
	})
}

// TopRows returns the first k rows in order without sorting them all: a
// bounded heap keeps the k best seen so far.
func TopRows[R Row](rows []Keyed[R], k int, desc bool) []Keyed[R] {
	if len(rows) <= 4*k {
		SortRows(rows, desc)
		return rows[:min(k, len(rows))]
	}
	// h is a max-heap on listing order: h[0] is the worst of the best k.
	h := make([]*Keyed[R], 0, k)
	down := func(i int) {
		for {
			l, r, worst := 2*i+1, 2*i+2, i
			if l < len(h) && before(h[worst], h[l], desc) {
				worst = l
			}
			if r < len(h) && before(h[worst], h[r], desc) {
				worst = r
			}
			if worst == i {
				return
			}
			h[i], h[worst] = h[worst], h[i]
			i = worst
		}
	}
	for i := range rows {
		r := &rows[i]
		if len(h) < k {
			h = append(h, r)
			for j := len(h) - 1; j > 0; {
				p := (j - 1) / 2
				if !before(h[p], h[j], desc) {
					break
				}
				h[p], h[j] = h[j], h[p]
				j = p
			}
			continue
		}
		if before(r, h[0], desc) {
			h[0] = r
			down(0)
		}
	}
	out := make([]Keyed[R], len(h))
	for i, r := range h {
		out[i] = *r
	}
	SortRows(out, desc)
	return out
}
