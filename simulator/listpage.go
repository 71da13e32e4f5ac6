package simulator

import (
	"sync"

	"github.com/google/btree"
)

// labelScanFactor: a label filter whose rarest pair holds at most this many
// rows per row of the page is answered from the label index (match, then a
// bounded heap); a commoner one walks the ordered index, where most rows
// match and a page is found after about as many rows as it holds.
const labelScanFactor = 8

// treeFor is the ordered index of a sort field, nil for a field without one
// (name, resources, state...), which lists by a bounded heap over the
// organization's rows. Any other field sorts by lastActivityAt, as keyOf.
func (o *orgRows) treeFor(field string) *btree.BTreeG[entry] {
	switch field {
	case "createdAt":
		return o.created
	case "name", "cpu", "memoryGib", "diskGib", "updatedAt", "id", "state", "snapshot", "region":
		return nil
	}
	return o.activity
}

// labelCandidates is the rows carrying the rarest pair of labels, or nil
// when the filter names no label. A pair that no row carries gives an empty
// set.
func (o *orgRows) labelCandidates(labels map[string]string) map[*sandbox]struct{} {
	if len(labels) == 0 {
		return nil
	}
	var best map[*sandbox]struct{}
	for k, v := range labels {
		set := o.labels[labelKey(k, v)]
		if set == nil {
			return map[*sandbox]struct{}{}
		}
		if best == nil || len(set) < len(best) {
			best = set
		}
	}
	return best
}

// each calls f on the rows of the candidates, or of the whole organization
// when there are none (nil), until f returns false.
func (o *orgRows) each(cands map[*sandbox]struct{}, f func(sb *sandbox) bool) {
	if cands != nil {
		for sb := range cands {
			if !f(sb) {
				return
			}
		}
		return
	}
	o.created.Ascend(func(e entry) bool { return f(e.sb) })
}

// afterCursor reports whether a row with key k and id comes after the
// cursor in a listing in this direction.
func afterCursor(k sortKey, id string, after sortKey, afterID string, desc bool) bool {
	c := k.compare(after)
	if c == 0 {
		c = compareStrings(id, afterID)
	}
	if desc {
		return c < 0
	}
	return c > 0
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pageLocked is one page of listSandboxes: the first limit rows of org that
// match f, after the cursor (when after is set), in the order of field, and
// whether more follow. On an ordered field it walks the index from the
// cursor and stops after limit+1 matches; otherwise it keeps the best
// limit+1 of the matching rows in a bounded heap. The rows are appended
// to buf (empty; from pageBufs). Called with s.mu held (shared is enough).
func (s *Simulator) pageLocked(org string, f *filter, field string, desc bool, after *cursor, afterKey sortKey, limit int, buf []keyed) ([]keyed, bool) {
	o := s.orgs[org]
	if o == nil {
		return nil, false
	}
	// accept keeps a row that matches and comes after the cursor; k is its
	// sortKey, keyOf(sb, field).
	accept := func(sb *sandbox, k sortKey) (keyed, bool) {
		if !f.match(sb) {
			return keyed{}, false
		}
		if after != nil && !afterCursor(k, sb.ID, afterKey, after.ID, desc) {
			return keyed{}, false
		}
		return keyed{sb, k}, true
	}
	tree := o.treeFor(field)
	cands := o.labelCandidates(f.labels)
	rows := buf
	if tree == nil || cands != nil && len(cands) <= labelScanFactor*(limit+1) {
		o.each(cands, func(sb *sandbox) bool {
			if r, ok := accept(sb, keyOf(sb, field)); ok {
				rows = append(rows, r)
			}
			return true
		})
		rows = topRows(rows, limit+1, desc)
		if len(rows) > limit {
			return rows[:limit], true
		}
		return rows, false
	}
	// The tree's key is keyOf(sb, field): the field's time, cut to the
	// millisecond, kept up to date as the row moves.
	visit := func(e entry) bool {
		if r, ok := accept(e.sb, sortKey{t: e.key.t}); ok {
			rows = append(rows, r)
		}
		return len(rows) <= limit
	}
	var pivot entry
	if after != nil {
		pivot = entry{key: orderKey{afterKey.t, after.ID}}
	}
	switch {
	case desc && after != nil:
		tree.DescendLessOrEqual(pivot, visit)
	case desc:
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

// pageBufs holds the row buffers of list pages: a page of 200 is 11 KiB
// of rows, allocated per list otherwise.
var pageBufs = sync.Pool{New: func() any {
	b := make([]keyed, 0, 201)
	return &b
}}

// pageByNumberLocked is one page of the deprecated list: the total of
// org's rows matching f, and the limit of them from offset on, in the order
// of field. On an ordered field it counts along the index without sorting;
// otherwise it sorts the matches. Called with s.mu held (shared is enough).
func (s *Simulator) pageByNumberLocked(org string, f *filter, field string, desc bool, offset, limit int) (total int, rows []keyed) {
	o := s.orgs[org]
	if o == nil {
		return 0, nil
	}
	tree := o.treeFor(field)
	cands := o.labelCandidates(f.labels)
	if tree == nil || cands != nil && len(cands) <= labelScanFactor*(offset+limit) {
		var all []keyed
		o.each(cands, func(sb *sandbox) bool {
			if f.match(sb) {
				all = append(all, keyed{sb, keyOf(sb, field)})
			}
			return true
		})
		sortRows(all, desc)
		lo := min(offset, len(all))
		hi := min(lo+limit, len(all))
		return len(all), all[lo:hi]
	}
	visit := func(e entry) bool {
		if !f.match(e.sb) {
			return true
		}
		if total >= offset && total < offset+limit {
			rows = append(rows, keyed{e.sb, keyOf(e.sb, field)})
		}
		total++
		return true
	}
	if desc {
		tree.Descend(visit)
	} else {
		tree.Ascend(visit)
	}
	return total, rows
}
