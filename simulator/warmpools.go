package simulator

import (
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// warmPool is a pool by spec (Daytona's /warm-pools): it keeps Size
// sandboxes of one snapshot in one target created and started in the
// background, with the snapshot's resources, OS user and env. A create
// whose spec matches takes a started member at once and the pool refills.
//
// Members are rows of the store under the pool's own key (storeOrg), so
// that no caller's list, count or job sees them, and so that counting and
// taking a member looks at the pool alone, never at the other sandboxes.
// Until taken, a member is billed to the pool: its ledger names the pool's
// organization and the pool.
type warmPool struct {
	ID string
	// OrgID owns the pool and pays for its members; warmPoolOrg for the
	// default pool (Config.WarmPool), which every organization sees.
	OrgID string
	// Snapshot is the snapshot's name; snapID and ref are its id and the
	// image its workloads run ("" for the default workload).
	Snapshot, snapID, ref string
	Target                string
	Size                  int
	CPU, GPU, Mem, Disk   int
	OSUser                string
	Env                   map[string]string
	// ErrorReason is the last failure to start a member; nil until one
	// fails, and again after an update replaced the failed ones.
	ErrorReason          *string
	CreatedAt, UpdatedAt time.Time
	// members are the unclaimed sandboxes, oldest first, started or still
	// starting.
	members []*sandbox
}

const (
	// poolOrgPrefix keys the members of an organization's pool in the
	// store; the default pool's keep warmPoolOrg.
	poolOrgPrefix = "warm-pool:"
	// maxPoolSize stands for the organization quota that caps a pool.
	maxPoolSize = 100
)

// storeOrg is the organization the pool's members are indexed under.
func (p *warmPool) storeOrg() string {
	if p.OrgID == warmPoolOrg {
		return warmPoolOrg
	}
	return poolOrgPrefix + p.ID
}

// isDefault reports whether p is the simulator's own pool (--warm-pool).
func (p *warmPool) isDefault() bool { return p.OrgID == warmPoolOrg }

// isPoolOrg reports whether org is the store key of a pool's members, not
// a caller's organization.
func isPoolOrg(org string) bool { return org == warmPoolOrg || strings.HasPrefix(org, poolOrgPrefix) }

// poolKey indexes pools by what a create must share with one: the owner,
// the snapshot and the target. One pool per key.
func poolKey(org, snapID, target string) string { return org + "\x00" + snapID + "\x00" + target }

func (p *warmPool) key() string { return poolKey(p.OrgID, p.snapID, p.Target) }

// currentSize is how many members are started and ready to be taken.
func (p *warmPool) currentSize() int {
	n := 0
	for _, sb := range p.members {
		if takeable(sb) {
			n++
		}
	}
	return n
}

// takeable reports whether a member can be handed over now.
func takeable(sb *sandbox) bool {
	return sb.State == stStarted && sb.Desired == dsStarted && !sb.busy && !sb.gone
}

// poolSpec is what a create asks of a sandbox that a pool's members must
// have for the create to take one.
type poolSpec struct {
	SnapID, Target      string
	CPU, GPU, Mem, Disk int
	OSUser              string
	Env                 map[string]string
}

// fits reports whether p's members have exactly what spec asks.
func (p *warmPool) fits(spec poolSpec) bool {
	return p.snapID == spec.SnapID && p.Target == spec.Target &&
		p.CPU == spec.CPU && p.GPU == spec.GPU && p.Mem == spec.Mem && p.Disk == spec.Disk &&
		p.OSUser == spec.OSUser && maps.Equal(p.Env, spec.Env)
}

// newPoolLocked makes a pool of snapshot sn for org and fills it. Called
// with s.mu held.
func (s reconciler) newPoolLocked(org string, sn *snapshotRec, target string, size int) *warmPool {
	now := s.clk.Now()
	p := &warmPool{ID: s.newID(), OrgID: org, Snapshot: sn.Name, snapID: sn.ID, ref: sn.ref, Target: target,
		Size: size, CPU: sn.CPU, GPU: sn.GPU, Mem: sn.Mem, Disk: sn.Disk,
		// A snapshot carries no user or env of its own here: its sandboxes
		// run as Daytona's default user with an empty env.
		OSUser: "daytona", Env: map[string]string{}, CreatedAt: now, UpdatedAt: now}
	s.pools[p.ID] = p
	s.poolIndex[p.key()] = p
	s.fillPoolLocked(p)
	return p
}

// defaultPoolLocked makes the pool of Config.WarmPool: the default
// snapshot's in the default region, the simulator's own, which every
// organization's creates take from and GET /warm-pools lists. Called with
// s.mu held.
func (s reconciler) defaultPoolLocked() {
	if s.cfg.WarmPool <= 0 {
		return
	}
	sn := s.snapNames[nameKey("", s.cfg.DefaultSnapshot)]
	s.newPoolLocked(warmPoolOrg, sn, s.cfg.Regions[0], s.cfg.WarmPool)
}

// fillPoolLocked tops p up to its size with new members, which start in
// the background. Called with s.mu held.
func (s reconciler) fillPoolLocked(p *warmPool) {
	if p == nil || s.closed {
		return
	}
	for len(p.members) < p.Size {
		sb := s.newSandboxLocked(p.storeOrg(), "", Snapshot{Name: p.Snapshot, CPU: p.CPU, GPU: p.GPU, Memory: p.Mem, Disk: p.Disk})
		sb.pool = p
		sb.Target, sb.User, sb.Env, sb.imageRef = p.Target, p.OSUser, copyMap(p.Env), p.ref
		sb.ledger.OrgID, sb.ledger.WarmPool = p.OrgID, p.ID
		p.members = append(p.members, sb)
		s.rows.Insert(sb)
		s.kick(sb)
	}
}

// takePoolLocked hands the oldest started member of p over, or returns
// nil when none is ready. The member leaves the pool and its store key;
// the caller refills. Called with s.mu held.
func (s reconciler) takePoolLocked(p *warmPool) *sandbox {
	for i, sb := range p.members {
		if takeable(sb) {
			p.members = slices.Delete(p.members, i, i+1)
			s.rows.Drop(sb)
			sb.pool = nil
			return sb
		}
	}
	return nil
}

// shrinkPoolLocked destroys the members beyond p's size, the newest
// first: the oldest are the likeliest to be started and useful. Called
// with s.mu held.
func (s reconciler) shrinkPoolLocked(p *warmPool) {
	for len(p.members) > p.Size {
		sb := p.members[len(p.members)-1]
		p.members = p.members[:len(p.members)-1]
		s.softDeleteLocked(sb)
		s.kick(sb)
	}
}

// leavePoolLocked takes sb out of its pool's members, when something
// other than a handover ends it (a vanish, a destroy), so that the pool
// refills in its place. Called with s.mu held.
func (s reconciler) leavePoolLocked(sb *sandbox) {
	p := sb.pool
	if p == nil {
		return
	}
	if i := slices.Index(p.members, sb); i >= 0 {
		p.members = slices.Delete(p.members, i, i+1)
		s.fillPoolLocked(p)
	}
}

// poolFailedLocked records why a member of p failed to start. The member
// stays, errored, in its place, so that a backend that cannot start it
// is not asked again at once; an update of the pool replaces it, a delete
// removes it.
// Called with s.mu held.
func (s reconciler) poolFailedLocked(sb *sandbox, reason string) {
	if sb.pool != nil {
		sb.pool.ErrorReason = &reason
		sb.pool.UpdatedAt = s.clk.Now()
	}
}

// dropFailedLocked destroys p's members that failed to start and clears
// its errorReason, so that an update tries again with new ones. Called
// with s.mu held.
func (s reconciler) dropFailedLocked(p *warmPool) {
	kept := p.members[:0]
	for _, sb := range p.members {
		if sb.errored() {
			s.softDeleteLocked(sb)
			s.kick(sb)
			continue
		}
		kept = append(kept, sb)
	}
	clear(p.members[len(kept):])
	p.members = kept
	p.ErrorReason = nil
}

// matchPoolLocked is the pool whose members a create of org with spec can
// take: the organization's own first, then the default pool. Called with
// s.mu held.
func (s reconciler) matchPoolLocked(org string, spec poolSpec) *warmPool {
	for _, owner := range []string{org, warmPoolOrg} {
		if p := s.poolIndex[poolKey(owner, spec.SnapID, spec.Target)]; p != nil && p.fits(spec) {
			return p
		}
	}
	return nil
}

// poolUsingLocked is a pool of org that keeps sandboxes of snapshot id,
// or nil. Called with s.mu held.
func (s reconciler) poolUsingLocked(org, snapID string) *warmPool {
	for _, p := range s.sortedPoolsLocked() {
		if p.OrgID == org && p.snapID == snapID {
			return p
		}
	}
	return nil
}

// sortedPoolsLocked is every pool, the oldest first (pools are few: one
// per snapshot and target of an organization).
func (s reconciler) sortedPoolsLocked() []*warmPool {
	out := make([]*warmPool, 0, len(s.pools))
	for _, p := range s.pools {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *warmPool) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// warmPoolAPI serves /warm-pools: an organization's pools, beside the
// simulator's default pool, which every organization sees and none
// changes.
type warmPoolAPI struct{ *Simulator }

func warmPoolsOf(s *Simulator) warmPoolAPI { return warmPoolAPI{s} }

func warmPoolRoutes() []route {
	return []route{
		{"GET", "/api/warm-pools", "listWarmPools", part(warmPoolsOf, warmPoolAPI.list)},
		{"POST", "/api/warm-pools", "createWarmPool", part(warmPoolsOf, warmPoolAPI.create)},
		{"PATCH", "/api/warm-pools/{id}", "updateWarmPool", part(warmPoolsOf, warmPoolAPI.update)},
		{"DELETE", "/api/warm-pools/{id}", "deleteWarmPool", part(warmPoolsOf, warmPoolAPI.remove)},
	}
}

// warmPoolDTO is the WarmPool schema.
type warmPoolDTO struct {
	ID             string            `json:"id"`
	OrganizationID string            `json:"organizationId"`
	Snapshot       string            `json:"snapshot"`
	Target         string            `json:"target"`
	Pool           int               `json:"pool"`
	CurrentSize    int               `json:"currentSize"`
	CPU            int               `json:"cpu"`
	Mem            int               `json:"mem"`
	Disk           int               `json:"disk"`
	OSUser         string            `json:"osUser"`
	Env            map[string]string `json:"env"`
	ErrorReason    *string           `json:"errorReason"`
	CreatedAt      string            `json:"createdAt"`
	UpdatedAt      string            `json:"updatedAt"`
}

func (p *warmPool) dto() warmPoolDTO {
	return warmPoolDTO{ID: p.ID, OrganizationID: p.OrgID, Snapshot: p.Snapshot, Target: p.Target, Pool: p.Size,
		CurrentSize: p.currentSize(), CPU: p.CPU, Mem: p.Mem, Disk: p.Disk, OSUser: p.OSUser, Env: copyMap(p.Env),
		ErrorReason: p.ErrorReason, CreatedAt: iso(p.CreatedAt), UpdatedAt: iso(p.UpdatedAt)}
}

// list is GET /warm-pools: the default pool and the organization's, the
// oldest first.
func (s warmPoolAPI) list(c *call) (reply, *apiError) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []warmPoolDTO{}
	for _, p := range s.eng.sortedPoolsLocked() {
		if p.OrgID == c.org || p.isDefault() {
			out = append(out, p.dto())
		}
	}
	return reply{http.StatusOK, out}, nil
}

// createWarmPoolBody is the CreateWarmPool schema.
type createWarmPoolBody struct {
	Snapshot *string  `json:"snapshot"`
	Pool     *float64 `json:"pool"`
	Target   *string  `json:"target"`
}

// create is POST /warm-pools: 201 with the pool, whose members start in
// the background; 400 for a body out of bounds or a snapshot the
// organization cannot use, 409 for a second pool of the same snapshot and
// target.
func (s warmPoolAPI) create(c *call) (reply, *apiError) {
	var body createWarmPoolBody
	if err := c.decodeBody(&body); err != nil {
		return reply{}, err
	}
	size, target, err := s.checkCreate(body)
	if err != nil {
		return reply{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := snapshotsOf(s.Simulator).sandboxSnapshotLocked(c.org, *body.Snapshot)
	if err != nil {
		return reply{}, err
	}
	if other := s.poolIndex[poolKey(c.org, sn.ID, target)]; other != nil {
		return reply{}, errorf(http.StatusConflict,
			"Warm pool %s already keeps sandboxes of snapshot %s in target %s: change its size with PATCH /warm-pools/%s",
			other.ID, sn.Name, target, other.ID)
	}
	p := s.eng.newPoolLocked(c.org, sn, target, size)
	return reply{http.StatusCreated, p.dto()}, nil
}

// checkCreate checks a CreateWarmPool body alone: its snapshot is named,
// its size in bounds and its target a region.
func (s warmPoolAPI) checkCreate(body createWarmPoolBody) (size int, target string, err *apiError) {
	if body.Snapshot == nil || strings.TrimSpace(*body.Snapshot) == "" {
		return 0, "", errorf(http.StatusBadRequest, "snapshot must be the id or name of the snapshot to keep warm sandboxes of")
	}
	if size, err = poolSize(body.Pool, 1); err != nil {
		return 0, "", err
	}
	target = s.cfg.Regions[0]
	if body.Target != nil && *body.Target != "" {
		if !contains(s.cfg.Regions, *body.Target) {
			return 0, "", errorf(http.StatusBadRequest, "target %s is not a region: use one of %s, or leave it out for %s",
				*body.Target, strings.Join(s.cfg.Regions, ", "), s.cfg.Regions[0])
		}
		target = *body.Target
	}
	return size, target, nil
}

// poolSize checks a requested pool size: a whole number from least to
// maxPoolSize.
func poolSize(v *float64, least int) (int, *apiError) {
	if v == nil {
		return 0, errorf(http.StatusBadRequest, "pool must be the number of warm sandboxes to keep ready, at least %d", least)
	}
	if *v != math.Trunc(*v) || *v < float64(least) || *v > maxPoolSize {
		return 0, errorf(http.StatusBadRequest, "pool must be a whole number from %d to %d (the warm pool quota), not %v",
			least, maxPoolSize, *v)
	}
	return int(*v), nil
}

// ownPoolLocked is the pool the call names, which the caller's
// organization may change: the default pool is the simulator's. Called
// with s.mu held.
func (s warmPoolAPI) ownPoolLocked(c *call) (*warmPool, *apiError) {
	id := c.params["id"]
	p := s.pools[id]
	if p == nil || p.OrgID != c.org && !p.isDefault() {
		return nil, errorf(http.StatusNotFound, "Warm pool %s not found", id)
	}
	if p.isDefault() {
		return nil, errorf(http.StatusForbidden,
			"Warm pool %s is the simulator's default pool (--warm-pool), shared by every organization: restart the simulator with another --warm-pool to change it, or create a pool of your own",
			id)
	}
	return p, nil
}

// updateWarmPoolBody is the UpdateWarmPool schema.
type updateWarmPoolBody struct {
	Pool *float64 `json:"pool"`
}

// update is PATCH /warm-pools/{id}: the pool's new size, which destroys
// the surplus members (shrink) or starts new ones (grow); 0 drains it.
// Members that failed to start are replaced, as a retry.
func (s warmPoolAPI) update(c *call) (reply, *apiError) {
	var body updateWarmPoolBody
	if err := c.decodeBody(&body); err != nil {
		return reply{}, err
	}
	size, err := poolSize(body.Pool, 0)
	if err != nil {
		return reply{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.ownPoolLocked(c)
	if err != nil {
		return reply{}, err
	}
	p.Size, p.UpdatedAt = size, s.clk.Now()
	s.eng.dropFailedLocked(p)
	s.eng.shrinkPoolLocked(p)
	s.eng.fillPoolLocked(p)
	return reply{http.StatusOK, p.dto()}, nil
}

// remove is DELETE /warm-pools/{id}: 204, its unclaimed members
// destroyed; the sandboxes it handed over are the callers' and stay.
func (s warmPoolAPI) remove(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.ownPoolLocked(c)
	if err != nil {
		return reply{}, err
	}
	p.Size = 0
	s.eng.shrinkPoolLocked(p)
	delete(s.pools, p.ID)
	delete(s.poolIndex, p.key())
	return reply{status: http.StatusNoContent}, nil
}

// waitWarmCreate charges a create that took a pooled sandbox its latency,
// d on the simulator's clock, until the caller or the simulator goes.
func (s creation) waitWarmCreate(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := s.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	case <-s.bg.Done():
	}
}
