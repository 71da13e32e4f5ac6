package simulator

import (
	"time"

	"github.com/google/btree"
)

// The store's indexes keep what a list, a label lookup, a cascade or a
// count needs per organization, so that each costs what it returns rather
// than what the simulator holds: 10,000 sandboxes of other organizations,
// or other labels, are never walked. Everything here is guarded by
// Simulator.mu; readers take it shared.

// orderKey places a row in an ordered index: a time cut to the milliseconds
// a list cursor carries, then the id, which is the order in which
// listSandboxes compares rows.
type orderKey struct {
	t  time.Time
	id string
}

func (a orderKey) compare(b orderKey) int {
	if c := a.t.Compare(b.t); c != 0 {
		return c
	}
	switch {
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

func orderOf(t time.Time, id string) orderKey { return orderKey{t.Truncate(time.Millisecond), id} }

// entry is one row in an ordered index.
type entry struct {
	key orderKey
	sb  *sandbox
}

func lessEntry(a, b entry) bool { return a.key.compare(b.key) < 0 }

// btreeDegree suits indexes of up to a few hundred thousand rows.
const btreeDegree = 32

// orgRows is one organization's sandboxes: in creation order, in activity
// order, and by label.
type orgRows struct {
	created  *btree.BTreeG[entry]
	activity *btree.BTreeG[entry]
	labels   map[string]map[*sandbox]struct{} // labelKey(k, v)
}

func newOrgRows() *orgRows {
	return &orgRows{
		created:  btree.NewG(btreeDegree, lessEntry),
		activity: btree.NewG(btreeDegree, lessEntry),
		labels:   map[string]map[*sandbox]struct{}{},
	}
}

func (o *orgRows) len() int { return o.created.Len() }

func labelKey(k, v string) string { return k + "\x00" + v }

// indexState is where a sandbox sits in the indexes, so that it leaves them
// by the keys it entered with even after its fields moved on.
type indexState struct {
	in       bool
	org      string
	created  orderKey
	activity orderKey
	labels   map[string]string
	linkedTo string
}

// indexLocked adds sb to its organization's indexes.
func (s *Simulator) indexLocked(sb *sandbox) {
	if sb.ix.in {
		s.unindexLocked(sb)
	}
	o := s.orgs[sb.OrgID]
	if o == nil {
		o = newOrgRows()
		s.orgs[sb.OrgID] = o
	}
	sb.ix = indexState{in: true, org: sb.OrgID, created: orderOf(sb.CreatedAt, sb.ID),
		activity: orderOf(sb.LastActivity, sb.ID), labels: sb.Labels}
	o.created.ReplaceOrInsert(entry{sb.ix.created, sb})
	o.activity.ReplaceOrInsert(entry{sb.ix.activity, sb})
	for k, v := range sb.Labels {
		lk := labelKey(k, v)
		set := o.labels[lk]
		if set == nil {
			set = map[*sandbox]struct{}{}
			o.labels[lk] = set
		}
		set[sb] = struct{}{}
	}
	if sb.LinkedSandboxID != nil {
		sb.ix.linkedTo = *sb.LinkedSandboxID
		set := s.linked[sb.ix.linkedTo]
		if set == nil {
			set = map[*sandbox]struct{}{}
			s.linked[sb.ix.linkedTo] = set
		}
		set[sb] = struct{}{}
	}
}

// unindexLocked takes sb out of its organization's indexes.
func (s *Simulator) unindexLocked(sb *sandbox) {
	if !sb.ix.in {
		return
	}
	if o := s.orgs[sb.ix.org]; o != nil {
		o.created.Delete(entry{key: sb.ix.created})
		o.activity.Delete(entry{key: sb.ix.activity})
		for k, v := range sb.ix.labels {
			lk := labelKey(k, v)
			if set := o.labels[lk]; set != nil {
				delete(set, sb)
				if len(set) == 0 {
					delete(o.labels, lk)
				}
			}
		}
		if o.len() == 0 {
			delete(s.orgs, sb.ix.org)
		}
	}
	if sb.ix.linkedTo != "" {
		if set := s.linked[sb.ix.linkedTo]; set != nil {
			delete(set, sb)
			if len(set) == 0 {
				delete(s.linked, sb.ix.linkedTo)
			}
		}
	}
	sb.ix = indexState{}
}

// activityMovedLocked moves sb in the activity order after its
// lastActivityAt changed.
func (s *Simulator) activityMovedLocked(sb *sandbox) {
	if !sb.ix.in {
		return
	}
	k := orderOf(sb.LastActivity, sb.ID)
	if k == sb.ix.activity {
		return
	}
	if o := s.orgs[sb.ix.org]; o != nil {
		o.activity.Delete(entry{key: sb.ix.activity})
		o.activity.ReplaceOrInsert(entry{k, sb})
	}
	sb.ix.activity = k
}

// labelsChangedLocked reindexes sb after its labels were replaced.
func (s *Simulator) labelsChangedLocked(sb *sandbox) {
	if sb.ix.in {
		s.indexLocked(sb)
	}
}

// countLocked is how many indexed sandboxes org has.
func (s *Simulator) countLocked(org string) int {
	if o := s.orgs[org]; o != nil {
		return o.len()
	}
	return 0
}

// linkedToLocked are the indexed sandboxes linked to the sandbox with id
// owner.
func (s *Simulator) linkedToLocked(owner string) []*sandbox {
	set := s.linked[owner]
	out := make([]*sandbox, 0, len(set))
	for sb := range set {
		out = append(out, sb)
	}
	return out
}
