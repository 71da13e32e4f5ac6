package store

import (
	"iter"
	"time"

	"github.com/google/btree"
)

// Row is a record the store indexes. Its Keys may change between calls;
// the store reads them when it is told to (Insert, Drop, Renamed, Reindex,
// ActivityMoved) and leaves the indexes by the keys it entered them with.
type Row interface {
	comparable
	// Keys are the row's keys now.
	Keys() Keys
	// Slot is where the store keeps the row's place in its indexes. Only
	// the store reads or writes it.
	Slot() *Slot
}

// Keys are what the store indexes a row by.
type Keys struct {
	ID, Org, Name     string
	Created, Activity time.Time
	Labels            map[string]string
	// LinkedTo is the id of the row this one is linked to, "" for none.
	LinkedTo string
}

// Slot is a row's place in the indexes: the keys it entered them with.
type Slot struct {
	in       bool
	id, org  string
	created  orderKey
	activity orderKey
	labels   map[string]string
	linkedTo string
}

// ID is the id the row was indexed under, "" when it is not indexed.
func (s *Slot) ID() string { return s.id }

// Store is the records and their indexes. The zero Store is not usable:
// call New.
type Store[R Row] struct {
	byID   map[string]R
	byName map[string]R // nameKey(org, name)
	orgs   map[string]*orgRows[R]
	linked map[string]map[R]struct{}
}

// New returns an empty store.
func New[R Row]() *Store[R] {
	return &Store[R]{
		byID:   map[string]R{},
		byName: map[string]R{},
		orgs:   map[string]*orgRows[R]{},
		linked: map[string]map[R]struct{}{},
	}
}

func nameKey(org, name string) string { return org + "\x00" + name }

// Get is the row with this id, or the zero R.
func (s *Store[R]) Get(id string) R { return s.byID[id] }

// ByName is the row of org with this name, or the zero R.
func (s *Store[R]) ByName(org, name string) R { return s.byName[nameKey(org, name)] }

// All is every row under its id, in no order.
func (s *Store[R]) All() iter.Seq[R] {
	return func(yield func(R) bool) {
		for _, r := range s.byID {
			if !yield(r) {
				return
			}
		}
	}
}

// Insert adds r under its id and name, and to its organization's indexes.
func (s *Store[R]) Insert(r R) {
	k := r.Keys()
	s.byID[k.ID] = r
	s.byName[nameKey(k.Org, k.Name)] = r
	s.index(r, k)
}

// Drop removes r from the store: a later Get of its id finds nothing,
// unless another row took the id or the name since.
func (s *Store[R]) Drop(r R) {
	k := r.Keys()
	if s.byID[k.ID] == r {
		delete(s.byID, k.ID)
	}
	if s.byName[nameKey(k.Org, k.Name)] == r {
		delete(s.byName, nameKey(k.Org, k.Name))
	}
	s.unindex(r)
}

// Renamed moves r in the name index from old, its name before, to its
// name now.
func (s *Store[R]) Renamed(r R, old string) {
	k := r.Keys()
	if s.byName[nameKey(k.Org, old)] == r {
		delete(s.byName, nameKey(k.Org, old))
	}
	s.byName[nameKey(k.Org, k.Name)] = r
}

// Reindex moves an indexed r to its keys now (its labels were replaced);
// a row not indexed stays out.
func (s *Store[R]) Reindex(r R) {
	if r.Slot().in {
		s.index(r, r.Keys())
	}
}

// ActivityMoved moves an indexed r in the activity order after its
// activity time changed.
func (s *Store[R]) ActivityMoved(r R) {
	sl := r.Slot()
	if !sl.in {
		return
	}
	k := orderOf(r.Keys().Activity, sl.id)
	if k == sl.activity {
		return
	}
	if o := s.orgs[sl.org]; o != nil {
		o.activity.Delete(entry[R]{key: sl.activity})
		o.activity.ReplaceOrInsert(entry[R]{k, r})
	}
	sl.activity = k
}

// Count is how many indexed rows org has.
func (s *Store[R]) Count(org string) int {
	if o := s.orgs[org]; o != nil {
		return o.len()
	}
	return 0
}

// CountOrgs is how many indexed rows the organizations owns accepts have.
func (s *Store[R]) CountOrgs(owns func(org string) bool) int {
	n := 0
	for org, o := range s.orgs {
		if owns(org) {
			n += o.len()
		}
	}
	return n
}

// LinkedTo are the indexed rows linked to the row with id owner.
func (s *Store[R]) LinkedTo(owner string) []R {
	set := s.linked[owner]
	out := make([]R, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	return out
}

// index adds r to its organization's indexes under k.
func (s *Store[R]) index(r R, k Keys) {
	sl := r.Slot()
	if sl.in {
		s.unindex(r)
	}
	o := s.orgs[k.Org]
	if o == nil {
		o = newOrgRows[R]()
		s.orgs[k.Org] = o
	}
	*sl = Slot{in: true, id: k.ID, org: k.Org, created: orderOf(k.Created, k.ID),
		activity: orderOf(k.Activity, k.ID), labels: k.Labels}
	o.created.ReplaceOrInsert(entry[R]{sl.created, r})
	o.activity.ReplaceOrInsert(entry[R]{sl.activity, r})
	for lk, v := range k.Labels {
		addTo(o.labels, labelKey(lk, v), r)
	}
	if k.LinkedTo != "" {
		sl.linkedTo = k.LinkedTo
		addTo(s.linked, k.LinkedTo, r)
	}
}

// unindex takes r out of its organization's indexes.
func (s *Store[R]) unindex(r R) {
	sl := r.Slot()
	if !sl.in {
		return
	}
	if o := s.orgs[sl.org]; o != nil {
		o.created.Delete(entry[R]{key: sl.created})
		o.activity.Delete(entry[R]{key: sl.activity})
		for k, v := range sl.labels {
			removeFrom(o.labels, labelKey(k, v), r)
		}
		if o.len() == 0 {
			delete(s.orgs, sl.org)
		}
	}
	if sl.linkedTo != "" {
		removeFrom(s.linked, sl.linkedTo, r)
	}
	*sl = Slot{}
}

func addTo[R comparable](sets map[string]map[R]struct{}, key string, r R) {
	set := sets[key]
	if set == nil {
		set = map[R]struct{}{}
		sets[key] = set
	}
	set[r] = struct{}{}
}

func removeFrom[R comparable](sets map[string]map[R]struct{}, key string, r R) {
	if set := sets[key]; set != nil {
		delete(set, r)
		if len(set) == 0 {
			delete(sets, key)
		}
	}
}

// orderKey places a row in an ordered index: a time cut to the milliseconds
// a list cursor carries, then the id, which is the order in which a list
// compares rows.
type orderKey struct {
	t  time.Time
	id string
}

func (a orderKey) compare(b orderKey) int {
	if c := a.t.Compare(b.t); c != 0 {
		return c
	}
	return compareStrings(a.id, b.id)
}

func orderOf(t time.Time, id string) orderKey { return orderKey{t.Truncate(time.Millisecond), id} }

// entry is one row in an ordered index.
type entry[R any] struct {
	key orderKey
	r   R
}

func lessEntry[R any](a, b entry[R]) bool { return a.key.compare(b.key) < 0 }

// btreeDegree suits indexes of up to a few hundred thousand rows.
const btreeDegree = 32

// orgRows is one organization's rows: in creation order, in activity
// order, and by label.
type orgRows[R Row] struct {
	created  *btree.BTreeG[entry[R]]
	activity *btree.BTreeG[entry[R]]
	labels   map[string]map[R]struct{} // labelKey(k, v)
}

func newOrgRows[R Row]() *orgRows[R] {
	return &orgRows[R]{
		created:  btree.NewG(btreeDegree, lessEntry[R]),
		activity: btree.NewG(btreeDegree, lessEntry[R]),
		labels:   map[string]map[R]struct{}{},
	}
}

func (o *orgRows[R]) len() int { return o.created.Len() }

func labelKey(k, v string) string { return k + "\x00" + v }

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Stats are the sizes of the store's maps, so that a test can tell that
// nothing keeps an entry of a dropped row.
type Stats struct {
	IDs, Names int
	// Orgs counts the organizations with indexes, Links the rows that
	// others link to.
	Orgs, Links int
}

// Stats reports the sizes of the store's maps.
func (s *Store[R]) Stats() Stats {
	return Stats{IDs: len(s.byID), Names: len(s.byName), Orgs: len(s.orgs), Links: len(s.linked)}
}

// OrgStats are the sizes of one organization's indexes.
type OrgStats struct {
	Created, Activity int
	// LabelSets counts the distinct label pairs; Labeled(k, v) the rows
	// of one.
	LabelSets int
}

// OrgStats reports the sizes of org's indexes.
func (s *Store[R]) OrgStats(org string) OrgStats {
	o := s.orgs[org]
	if o == nil {
		return OrgStats{}
	}
	return OrgStats{Created: o.created.Len(), Activity: o.activity.Len(), LabelSets: len(o.labels)}
}

// Labeled is how many indexed rows of org carry the label k=v.
func (s *Store[R]) Labeled(org, k, v string) int {
	if o := s.orgs[org]; o != nil {
		return len(o.labels[labelKey(k, v)])
	}
	return 0
}
