package simulator

import "sync"

// maxOrgNames bounds the organizations orgNames remembers. A simulator
// without Config.APIKeys accepts any key, so the keys it sees are not
// bounded; beyond this many the organization is derived afresh each time,
// which is correct, only not shared.
const maxOrgNames = 1024

// orgNames maps API keys to their organization's id, one string per
// organization. Every row, ledger and call-log entry keeps the id of its
// organization: derived afresh per request, each kept a 48-byte copy of
// its own, one per live sandbox and one per logged call, scattered among
// each request's garbage, so that a churning run left the heap more
// fragmented than the same rows created once.
type orgNames struct {
	mu   sync.RWMutex
	byID map[string]string // API key → orgOf(key)
}

func newOrgNames() *orgNames { return &orgNames{byID: map[string]string{}} }

// of is orgOf(key), the same string for every call with the same key.
func (n *orgNames) of(key string) string {
	n.mu.RLock()
	org, ok := n.byID[key]
	n.mu.RUnlock()
	if ok {
		return org
	}
	org = orgOf(key)
	n.mu.Lock()
	defer n.mu.Unlock()
	if known, ok := n.byID[key]; ok {
		return known
	}
	if len(n.byID) < maxOrgNames {
		n.byID[key] = org
	}
	return org
}
