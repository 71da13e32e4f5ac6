package simulator

import (
	"sync"

	"github.com/sandplane/sandplane/simulator/internal/store"
)

// A list page is a store.Query over the organization's rows: the filter
// matches, keyOf is the key, and the sort field picks the ordered index
// the store walks.

// sortKey is a row's value in the sort column (keyOf).
type sortKey = store.SortKey

// keyed is a row with its sortKey.
type keyed = store.Keyed[*sandbox]

// orderFor is the ordered index of a sort field: none for a field without
// one (name, resources, state...), which lists by a bounded heap over the
// organization's rows. Any other field sorts by lastActivityAt, as keyOf.
func orderFor(field string) store.Order {
	switch field {
	case "createdAt":
		return store.ByCreated
	case "name", "cpu", "memoryGib", "diskGib", "updatedAt", "id", "state", "snapshot", "region":
		return store.Unordered
	}
	return store.ByActivity
}

// listQuery is the store query of a list filtered by f, sorted by field.
func listQuery(f *filter, field string, desc bool) *store.Query[*sandbox] {
	return &store.Query[*sandbox]{
		Match:  f.match,
		Key:    func(sb *sandbox) sortKey { return keyOf(sb, field) },
		Order:  orderFor(field),
		Labels: f.labels,
		Desc:   desc,
	}
}

// listPage is one page of listSandboxes: the first limit rows of org that
// match f, after the cursor (when after is set), in the order of field,
// and whether more follow. The rows are appended to buf (empty; from
// pageBufs). Called with s.mu held (shared is enough).
func listPage(rows *store.Store[*sandbox], org string, f *filter, field string, desc bool, after *cursor, afterKey sortKey, limit int, buf []keyed) ([]keyed, bool) {
	var cur *store.Cursor
	if after != nil {
		cur = &store.Cursor{Key: afterKey, ID: after.ID}
	}
	return rows.Page(org, listQuery(f, field, desc), cur, limit, buf)
}

// pageByNumberOf is one page of the deprecated list: the total of org's
// rows matching f, and the limit of them from offset on, in the order of
// field. Called with s.mu held (shared is enough).
func pageByNumberOf(rows *store.Store[*sandbox], org string, f *filter, field string, desc bool, offset, limit int) (int, []keyed) {
	return rows.PageByNumber(org, listQuery(f, field, desc), offset, limit)
}

// pageBufs holds the row buffers of list pages: a page of 200 is 11 KiB
// of rows, allocated per list otherwise.
var pageBufs = sync.Pool{New: func() any {
	b := make([]keyed, 0, 201)
	return &b
}}
