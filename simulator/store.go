package simulator

import "github.com/sandplane/sandplane/simulator/internal/store"

// The sandboxes live in a store.Store (Simulator.rows), guarded by
// Simulator.mu; readers take it shared. A sandbox tells the store its keys
// here; lookup and lookupID (simulator.go) add what counts as gone.

// Keys are what the store indexes sb by. Called with s.mu held.
func (sb *sandbox) Keys() store.Keys {
	k := store.Keys{ID: sb.ID, Org: sb.OrgID, Name: sb.Name, Created: sb.CreatedAt,
		Activity: sb.LastActivity, Labels: sb.Labels}
	if sb.LinkedSandboxID != nil {
		k.LinkedTo = *sb.LinkedSandboxID
	}
	return k
}

// Slot is sb's place in the store's indexes.
func (sb *sandbox) Slot() *store.Slot { return &sb.ix }
