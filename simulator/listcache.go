package simulator

import (
	"maps"
	"sync/atomic"
	"time"
)

// A list page of 100 items spends most of its time encoding them, and the
// same rows are listed again and again while they do not change. So each
// row keeps its last encoded item beside the values it was encoded from,
// and a list reuses it only when the row still holds those values.
//
// The check is by value rather than by invalidation at every place that
// writes a row: the encoder reads nothing but a listFields and the labels,
// so an item is stale exactly when they differ, whatever wrote the row and
// however (a field set, a label changed in its map, a pointed-to string
// changed in place). Nothing a list item shows is derived from the clock:
// the state shown is derived from the raw and desired states only.
//
// Comparing the values costs a tenth of encoding them; a page skips even
// that for the rows it finds unchanged since the store was last written:
// every write takes s.mu exclusively, and the lock counts those takes.

// listFields is every value of a sandbox that its list item shows, but its
// labels (a map, compared apart) and its toolboxProxyUrl (which depends on
// the request). Values are copied out of pointers, so that a change made
// through a pointer is seen.
type listFields struct {
	id, orgID, name, target    string
	runnerID, snapshot         optString
	errorReason, daemonVersion optString
	gpuType                    optString
	networkAllowList           optString
	domainAllowList            optString
	networkBlockAll            bool
	state, desired, user       string
	backupState                string
	recoverable, public        bool
	cpu, gpu, memory, disk     int
	autoStop, autoArchive      int
	autoDelete                 int
	autoPause                  int
	createdAt, updatedAt       time.Time
	lastActivity               time.Time
	autoDestroyAt              time.Time // zero for none
}

// optString is a nullable string by value.
type optString struct {
	set bool
	s   string
}

func optOf(p *string) optString {
	if p == nil {
		return optString{}
	}
	return optString{true, *p}
}

// appendJSON appends the string quoted, or null.
func (o optString) appendJSON(b []byte) []byte {
	if !o.set {
		return append(b, "null"...)
	}
	return appendJSONString(b, o.s)
}

// listFields reads the values sb's list item shows. Called with s.mu held
// (shared is enough).
func (sb *sandbox) listFields() listFields {
	return listFields{
		id: sb.ID, orgID: sb.OrgID, name: sb.Name, target: sb.Target,
		runnerID: optOf(sb.RunnerID), snapshot: optOf(sb.Snapshot),
		errorReason: optOf(sb.ErrorReason), daemonVersion: optOf(sb.DaemonVersion),
		gpuType:          optOf(sb.GPUType),
		networkAllowList: optOf(sb.NetworkAllowList), domainAllowList: optOf(sb.DomainAllowList),
		networkBlockAll: sb.NetworkBlockAll,
		state:           sb.displayState(true), desired: sb.Desired, user: sb.User,
		backupState: sb.BackupState,
		recoverable: sb.Recoverable, public: sb.Public,
		cpu: sb.CPU, gpu: sb.GPU, memory: sb.Memory, disk: sb.Disk,
		autoStop: sb.AutoStop, autoArchive: sb.AutoArchive, autoDelete: sb.AutoDelete,
		autoPause: sb.AutoPause,
		createdAt: sb.CreatedAt, updatedAt: sb.UpdatedAt, lastActivity: sb.LastActivity,
		autoDestroyAt: sb.autoDestroyAt(),
	}
}

// listItemCache is one encoded item and what it was encoded from. Only
// current changes once it is stored: a newer item replaces it whole.
type listItemCache struct {
	fields listFields
	labels map[string]string // a copy
	head   []byte            // appendListItemHead of fields and labels
	// current is the store's write count when fields and labels were last
	// found to be the row's.
	current atomic.Uint64
}

// cachedListItemHead is appendListItemHead of sb's current values, from
// sb's cache when that still holds them, else encoded and cached. writes
// is s.mu.WriteCount(). Called with s.mu held (shared is enough): lists
// running side by side may check or encode the same row at once, which is
// harmless, as the cache is swapped atomically and either result is
// current.
func cachedListItemHead(sb *sandbox, writes uint64) []byte {
	c := sb.listCache.Load()
	if c != nil && c.current.Load() == writes {
		return c.head
	}
	f := sb.listFields()
	if c != nil && c.fields == f && maps.Equal(c.labels, sb.Labels) {
		c.current.Store(writes)
		return c.head
	}
	c = &listItemCache{fields: f, labels: maps.Clone(sb.Labels)}
	c.head = appendListItemHead(nil, &f, sb.Labels)
	c.current.Store(writes)
	sb.listCache.Store(c)
	return c.head
}
