package simulator

import (
	"context"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// snapshotAPI serves the snapshot routes and keeps the snapshot records
// (Simulator.snaps, snapNames), over the simulator's store lock.
type snapshotAPI struct{ *Simulator }

func snapshotsOf(s *Simulator) snapshotAPI { return snapshotAPI{s} }

// Snapshot states (SnapshotState).
const (
	snapPending     = "pending"
	snapPulling     = "pulling"
	snapBuilding    = "building"
	snapActive      = "active"
	snapInactive    = "inactive"
	snapError       = "error"
	snapBuildFailed = "build_failed"
	snapRemoving    = "removing"
)

// snapshotRec is one snapshot: an organization's own, or a general one (the
// default and Config.Snapshots) that every organization sees. Guarded by
// Simulator.mu.
type snapshotRec struct {
	ID, OrgID, Name string
	General         bool
	ImageName       string
	Entrypoint      []string
	CPU, GPU        int
	Mem, Disk       int
	State           string
	ErrorReason     *string
	Size            *float64
	CreatedAt       time.Time
	UpdatedAt       time.Time
	LastUsedAt      *time.Time
	BuildInfo       *buildInfo
	// SourceSandboxID is the sandbox a sandbox snapshot was taken of; nil
	// for a snapshot made from an image.
	SourceSandboxID *string
	// ref is what the ImageBackend runs for it; "" runs the default
	// workload.
	ref string
	// owned marks a ref the backend made (built or committed), which goes
	// with the snapshot.
	owned bool
	logs  *liveLog
	gone  bool
}

// snapshotDTO is the SnapshotDto schema.
type snapshotDTO struct {
	ID             string              `json:"id"`
	OrganizationID string              `json:"organizationId,omitempty"`
	General        bool                `json:"general"`
	Name           string              `json:"name"`
	ImageName      string              `json:"imageName,omitempty"`
	State          string              `json:"state"`
	Size           *float64            `json:"size"`
	Entrypoint     []string            `json:"entrypoint"`
	CPU            int                 `json:"cpu"`
	GPU            int                 `json:"gpu"`
	Mem            int                 `json:"mem"`
	Disk           int                 `json:"disk"`
	ErrorReason    *string             `json:"errorReason"`
	CreatedAt      string              `json:"createdAt"`
	UpdatedAt      string              `json:"updatedAt"`
	LastUsedAt     *string             `json:"lastUsedAt"`
	BuildInfo      nullable[buildInfo] `json:"buildInfo,omitzero"`
	RegionIDs      []string            `json:"regionIds"`
	Ref            string              `json:"ref,omitempty"`
	SandboxClass   string              `json:"sandboxClass"`
	// SourceSandboxID is required (and nullable) since v0.205.1.
	SourceSandboxID *string `json:"sourceSandboxId"`
}

func (s snapshotAPI) snapshotDTO(sn *snapshotRec) snapshotDTO {
	d := snapshotDTO{
		ID: sn.ID, OrganizationID: sn.OrgID, General: sn.General, Name: sn.Name, ImageName: sn.ImageName,
		State: sn.State, Size: sn.Size, Entrypoint: sn.Entrypoint, CPU: sn.CPU, GPU: sn.GPU, Mem: sn.Mem, Disk: sn.Disk,
		ErrorReason: sn.ErrorReason, CreatedAt: iso(sn.CreatedAt), UpdatedAt: iso(sn.UpdatedAt),
		RegionIDs: append([]string{}, s.cfg.Regions...), Ref: sn.ref, SandboxClass: "container",
		SourceSandboxID: copyPtr(sn.SourceSandboxID),
	}
	if sn.LastUsedAt != nil {
		t := iso(*sn.LastUsedAt)
		d.LastUsedAt = &t
	}
	if sn.BuildInfo != nil {
		d.BuildInfo = present(*sn.BuildInfo)
	}
	return d
}

// snapshotEvent is the payload of snapshot.state.updated.
type snapshotEvent struct {
	Snapshot snapshotDTO `json:"snapshot"`
	OldState string      `json:"oldState"`
	NewState string      `json:"newState"`
}

// setSnapshotState moves sn and tells its organization. Called with s.mu
// held.
func (s snapshotAPI) setSnapshotState(sn *snapshotRec, state string) {
	if sn.State == state {
		return
	}
	old := sn.State
	sn.State = state
	sn.UpdatedAt = s.clk.Now()
	s.events.emit(sn.OrgID, EventSnapshotStateUpdated, snapshotEvent{Snapshot: s.snapshotDTO(sn), OldState: old, NewState: state})
}

// addGeneralSnapshot registers one of Config's snapshots. Called by New.
func (s snapshotAPI) addGeneralSnapshot(sn Snapshot) {
	now := s.clk.Now()
	rec := &snapshotRec{ID: s.newID(), Name: sn.Name, General: true, ImageName: sn.Name, CPU: sn.CPU, GPU: sn.GPU,
		Mem: sn.Memory, Disk: sn.Disk, State: snapActive, CreatedAt: now, UpdatedAt: now}
	s.snaps[rec.ID] = rec
	s.snapNames[nameKey("", rec.Name)] = rec
}

// findSnapshotLocked resolves an id or name inside org, then among the
// general snapshots.
func (s snapshotAPI) findSnapshotLocked(org, idOrName string) *snapshotRec {
	if sn := s.snaps[idOrName]; sn != nil && !sn.gone && (sn.OrgID == org || sn.General) {
		return sn
	}
	if sn := s.snapNames[nameKey(org, idOrName)]; sn != nil && !sn.gone {
		return sn
	}
	if sn := s.snapNames[nameKey("", idOrName)]; sn != nil && !sn.gone {
		return sn
	}
	return nil
}

func snapshotNotFound(idOrName string) *apiError {
	return errorf(http.StatusNotFound, "Snapshot %s not found", idOrName)
}

// sandboxSnapshotLocked is the snapshot a create names, checked as Daytona
// checks it: known to the organization and active. Called with s.mu held.
func (s snapshotAPI) sandboxSnapshotLocked(org, name string) (*snapshotRec, *apiError) {
	sn := s.findSnapshotLocked(org, name)
	if sn == nil {
		if !s.anySnap {
			return nil, errorf(http.StatusBadRequest, "Snapshot %s not found. Did you add it through the Daytona Dashboard?", name)
		}
		s.addGeneralSnapshot(Snapshot{Name: name, CPU: 1, Memory: 1, Disk: 3})
		sn = s.snapNames[nameKey("", name)]
	}
	if sn.State != snapActive {
		return nil, errorf(http.StatusBadRequest, "Snapshot %s is %s", name, sn.State)
	}
	now := s.clk.Now()
	sn.LastUsedAt = &now
	return sn, nil
}

type createSnapshotRequest struct {
	Name       string   `json:"name"`
	ImageName  *string  `json:"imageName"`
	Entrypoint []string `json:"entrypoint"`
	CPU        *int     `json:"cpu"`
	GPU        *int     `json:"gpu"`
	Memory     *int     `json:"memory"`
	Disk       *int     `json:"disk"`
	BuildInfo  *struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	} `json:"buildInfo"`
	RegionID *string `json:"regionId"`
}

func (s snapshotAPI) createSnapshot(c *call) (reply, *apiError) {
	var req createSnapshotRequest
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	name := strings.TrimSpace(req.Name)
	switch {
	case name == "":
		return reply{}, errorf(http.StatusBadRequest, "name should not be empty")
	case unsafeName.MatchString(name):
		return reply{}, errorf(http.StatusBadRequest, "name must not contain HTML tags, URLs, or control characters")
	case req.BuildInfo != nil && req.ImageName != nil && *req.ImageName != "":
		return reply{}, errorf(http.StatusBadRequest, "Cannot specify an image name when using a build info entry")
	case req.BuildInfo == nil && (req.ImageName == nil || strings.TrimSpace(*req.ImageName) == ""):
		return reply{}, errorf(http.StatusBadRequest, "Must specify either an image name or a build info entry")
	case req.BuildInfo != nil && strings.TrimSpace(req.BuildInfo.DockerfileContent) == "":
		return reply{}, errorf(http.StatusBadRequest, "dockerfileContent should not be empty")
	}
	if req.RegionID != nil && *req.RegionID != "" && !contains(s.cfg.Regions, *req.RegionID) {
		return reply{}, errorf(http.StatusNotFound, "Region not found")
	}
	if req.BuildInfo != nil {
		if err := s.buildRefused(); err != nil {
			return reply{}, err
		}
	}
	for _, v := range []struct {
		name string
		v    *int
	}{{"cpu", req.CPU}, {"gpu", req.GPU}, {"memory", req.Memory}, {"disk", req.Disk}} {
		if v.v != nil && *v.v < 0 {
			return reply{}, errorf(http.StatusBadRequest, "%s must not be less than 0", v.name)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other := s.snapNames[nameKey(c.org, name)]; other != nil && !other.gone {
		return reply{}, errorf(http.StatusConflict, "Snapshot with name %s already exists", name)
	}
	now := s.clk.Now()
	sn := &snapshotRec{ID: s.newID(), OrgID: c.org, Name: name, Entrypoint: req.Entrypoint,
		CPU: ptrOr(req.CPU, 1), GPU: ptrOr(req.GPU, 0), Mem: ptrOr(req.Memory, 1), Disk: ptrOr(req.Disk, 3),
		State: snapPending, CreatedAt: now, UpdatedAt: now}
	spec := ImageSpec{SnapshotID: sn.ID, Entrypoint: req.Entrypoint}
	if req.BuildInfo != nil {
		hashes := req.BuildInfo.ContextHashes
		if hashes == nil {
			hashes = []string{}
		}
		sn.BuildInfo = &buildInfo{DockerfileContent: req.BuildInfo.DockerfileContent, ContextHashes: hashes,
			CreatedAt: iso(now), UpdatedAt: iso(now), SnapshotRef: "sandplane-sim/snapshot-" + sn.ID[:8]}
		spec.Dockerfile = req.BuildInfo.DockerfileContent
	} else {
		sn.ImageName = strings.TrimSpace(*req.ImageName)
		spec.ImageName = sn.ImageName
	}
	s.snaps[sn.ID] = sn
	s.snapNames[nameKey(c.org, name)] = sn
	d := s.snapshotDTO(sn)
	s.events.emit(c.org, EventSnapshotCreated, d)
	s.prepareSnapshotLocked(sn, spec)
	s.warnImages(c)
	return reply{http.StatusOK, d}, nil
}

// prepareSnapshotLocked runs the snapshot's pull or build: pending, then
// pulling or building for the profile's delay and the backend's work, then
// active, or error / build_failed. Called with s.mu held.
func (s snapshotAPI) prepareSnapshotLocked(sn *snapshotRec, spec ImageSpec) {
	via, delay := snapPulling, s.cfg.Profile.Create.Draw(s.rng)
	if spec.Dockerfile != "" {
		via, delay = snapBuilding, s.cfg.Profile.Build.Draw(s.rng)
	}
	ib, real := s.backend.(ImageBackend)
	logs := newLiveLog()
	sn.logs = logs
	spec.Logs = logs
	s.goBackground(func(ctx context.Context) {
		defer logs.finish()
		s.mu.Lock()
		if sn.gone {
			s.mu.Unlock()
			return
		}
		s.setSnapshotState(sn, via)
		s.mu.Unlock()
		var ref string
		var err error
		if real {
			ref, _, err = ib.PrepareImage(ctx, spec)
		} else {
			_, _ = io.WriteString(logs, "the "+s.backend.Name()+" backend runs the default workload for every snapshot: nothing to pull or build\n")
		}
		if delay > 0 {
			_ = clockSleep(ctx, s.Simulator, delay)
		}
		if err != nil {
			_, _ = io.WriteString(logs, "failed: "+err.Error()+"\n")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if sn.gone {
			if real && ref != "" && spec.ImageName == "" {
				go func() { _ = ib.RemoveImage(context.WithoutCancel(ctx), ref) }()
			}
			return
		}
		if err != nil {
			reason := err.Error()
			sn.ErrorReason = &reason
			if spec.Dockerfile != "" {
				s.setSnapshotState(sn, snapBuildFailed)
			} else {
				s.setSnapshotState(sn, snapError)
			}
			return
		}
		sn.ref, sn.owned = ref, spec.ImageName == "" && ref != ""
		sn.ErrorReason = nil
		s.setSnapshotState(sn, snapActive)
	})
}

// warnImages notes on the answer that snapshots are records on a backend
// without images.
func (s snapshotAPI) warnImages(c *call) {
	if _, ok := s.backend.(ImageBackend); !ok {
		c.w.Header().Add(warningHeader, "the "+s.backend.Name()+" backend keeps snapshots as records: their sandboxes run the default workload, not the image")
	}
}

// warningHeader carries what the simulator could not do as Daytona would,
// on the answer that asked for it.
const warningHeader = "X-Sandplane-Warning"

func ptrOr(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

func (s snapshotAPI) getSnapshot(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.findSnapshotLocked(c.org, c.params["id"])
	if sn == nil {
		return reply{}, snapshotNotFound(c.params["id"])
	}
	return reply{http.StatusOK, s.snapshotDTO(sn)}, nil
}

type paginatedSnapshots struct {
	Items      []snapshotDTO `json:"items"`
	Total      int           `json:"total"`
	Page       int           `json:"page"`
	TotalPages int           `json:"totalPages"`
}

func (s snapshotAPI) listSnapshots(c *call) (reply, *apiError) {
	q := c.r.URL.Query()
	page, limit := 1, 100
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return reply{}, errorf(http.StatusBadRequest, "page must not be less than 1")
		}
		page = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return reply{}, errorf(http.StatusBadRequest, "limit must be between 1 and 200")
		}
		limit = n
	}
	name := strings.ToLower(q.Get("name"))
	sortBy, order := q.Get("sort"), q.Get("order")
	if sortBy == "" {
		sortBy = "lastUsedAt"
	}
	s.mu.Lock()
	var all []*snapshotRec
	for _, sn := range s.snaps {
		if sn.gone || !(sn.OrgID == c.org || sn.General) || name != "" && !strings.Contains(strings.ToLower(sn.Name), name) {
			continue
		}
		all = append(all, sn)
	}
	less := snapshotOrder(sortBy)
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if order == "asc" {
			a, b = b, a
		}
		if less(b, a) != less(a, b) {
			return less(b, a)
		}
		return all[i].ID < all[j].ID
	})
	out := paginatedSnapshots{Items: []snapshotDTO{}, Total: len(all), Page: page, TotalPages: (len(all) + limit - 1) / limit}
	for i := (page - 1) * limit; i < len(all) && i < page*limit; i++ {
		out.Items = append(out.Items, s.snapshotDTO(all[i]))
	}
	s.mu.Unlock()
	return reply{http.StatusOK, out}, nil
}

// snapshotOrder is the ascending order of a sort field; never-used
// snapshots sort before used ones.
func snapshotOrder(field string) func(a, b *snapshotRec) bool {
	switch field {
	case "name":
		return func(a, b *snapshotRec) bool { return a.Name < b.Name }
	case "state":
		return func(a, b *snapshotRec) bool { return a.State < b.State }
	case "createdAt":
		return func(a, b *snapshotRec) bool { return a.CreatedAt.Before(b.CreatedAt) }
	}
	return func(a, b *snapshotRec) bool {
		switch {
		case a.LastUsedAt == nil:
			return b.LastUsedAt != nil || a.CreatedAt.Before(b.CreatedAt)
		case b.LastUsedAt == nil:
			return false
		}
		return a.LastUsedAt.Before(*b.LastUsedAt)
	}
}

// ownSnapshotLocked is a snapshot the call's organization may change: its
// own, not a general one.
func (s snapshotAPI) ownSnapshotLocked(c *call) (*snapshotRec, *apiError) {
	sn := s.findSnapshotLocked(c.org, c.params["id"])
	if sn == nil {
		return nil, snapshotNotFound(c.params["id"])
	}
	if sn.General {
		return nil, errorf(http.StatusForbidden, "Snapshot %s is a general snapshot and cannot be changed", sn.Name)
	}
	return sn, nil
}

func (s snapshotAPI) removeSnapshot(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.ownSnapshotLocked(c)
	if err != nil {
		return reply{}, err
	}
	if p := s.eng.poolUsingLocked(sn.OrgID, sn.ID); p != nil {
		// The pool would keep sandboxes of a snapshot nobody can name.
		return reply{}, errorf(http.StatusConflict,
			"Snapshot %s is in use by warm pool %s: delete the warm pool first (DELETE /warm-pools/%s)", sn.Name, p.ID, p.ID)
	}
	s.setSnapshotState(sn, snapRemoving)
	sn.gone = true
	delete(s.snapNames, nameKey(sn.OrgID, sn.Name))
	s.events.emit(sn.OrgID, EventSnapshotRemoved, s.snapshotDTO(sn))
	if ib, ok := s.backend.(ImageBackend); ok && sn.owned {
		ref := sn.ref
		s.goBackground(func(ctx context.Context) {
			if err := ib.RemoveImage(ctx, ref); err != nil {
				s.cfg.Logger.Warn("remove the image of a deleted snapshot", "snapshot", sn.ID, "err", err)
			}
		})
	}
	return reply{status: http.StatusOK}, nil
}

func (s snapshotAPI) activateSnapshot(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.ownSnapshotLocked(c)
	if err != nil {
		return reply{}, err
	}
	switch sn.State {
	case snapActive:
		return reply{}, errorf(http.StatusBadRequest, "Snapshot %s is already active", sn.Name)
	case snapInactive:
	default:
		return reply{}, errorf(http.StatusBadRequest, "Snapshot %s cannot be activated in state %s", sn.Name, sn.State)
	}
	s.setSnapshotState(sn, snapActive)
	return reply{http.StatusOK, s.snapshotDTO(sn)}, nil
}

func (s snapshotAPI) deactivateSnapshot(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.ownSnapshotLocked(c)
	if err != nil {
		return reply{}, err
	}
	switch sn.State {
	case snapInactive:
		return reply{}, errorf(http.StatusBadRequest, "Snapshot %s is already inactive", sn.Name)
	case snapActive:
	default:
		return reply{}, errorf(http.StatusBadRequest, "Snapshot %s cannot be deactivated in state %s", sn.Name, sn.State)
	}
	s.setSnapshotState(sn, snapInactive)
	return reply{status: http.StatusNoContent}, nil
}

func (s snapshotAPI) snapshotBuildLogsURL(c *call) (reply, *apiError) {
	base := s.baseURL(c.r)
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.findSnapshotLocked(c.org, c.params["id"])
	if sn == nil {
		return reply{}, snapshotNotFound(c.params["id"])
	}
	return reply{http.StatusOK, map[string]string{"url": base + "/api/snapshots/" + sn.ID + "/build-logs"}}, nil
}

// snapshotBuildLogs answers the deprecated build-logs route and the URL
// above: what the pull or build printed, as plain text.
func (s snapshotAPI) snapshotBuildLogs(c *call) (reply, *apiError) {
	s.mu.Lock()
	sn := s.findSnapshotLocked(c.org, c.params["id"])
	var logs *liveLog
	if sn != nil {
		logs = sn.logs
	}
	s.mu.Unlock()
	if sn == nil {
		return reply{}, snapshotNotFound(c.params["id"])
	}
	serveLogs(c.w, c.r, logs, "")
	return reply{status: -1}, nil
}

// createSandboxSnapshot is sandbox.createSnapshot(name): the sandbox shows
// snapshotting while its filesystem is saved as a new snapshot of the
// organization, then goes back to what it was.
func (s snapshotAPI) createSandboxSnapshot(c *call) (reply, *apiError) {
	name, err := sandboxSnapshotName(c)
	if err != nil {
		return reply{}, err
	}
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if err := canSnapshot(sb); err != nil {
			return reply{}, err
		}
		if other := s.snapNames[nameKey(c.org, name)]; other != nil && !other.gone {
			return reply{}, errorf(http.StatusConflict, "Snapshot with name %s already exists", name)
		}
		job := startSandboxSnapshotLocked(s, c.org, sb, name)
		d := sb.dto(tbx, false)
		if job.images == nil {
			c.w.Header().Add(warningHeader, "the "+s.backend.Name()+" backend records the snapshot: sandboxes from it run the default workload, not this sandbox's files")
		}
		s.goBackground(job.run)
		return reply{http.StatusOK, d}, nil
	})
}

// sandboxSnapshotName is the name the body of createSandboxSnapshot asks
// for.
func sandboxSnapshotName(c *call) (string, *apiError) {
	var req struct {
		Name string `json:"name"`
	}
	if err := c.decodeBody(&req); err != nil {
		return "", err
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		return "", errorf(http.StatusBadRequest, "name should not be empty")
	}
	return name, nil
}

// canSnapshot says why sb cannot be snapshotted now, as Daytona does.
func canSnapshot(sb *sandbox) *apiError {
	switch {
	case sb.errored():
		return errorf(http.StatusBadRequest, msgErrored)
	case sb.inFlight() || sb.busy:
		return errorf(http.StatusConflict, msgInProgress)
	case sb.State != stStarted && sb.State != stStopped:
		return errorf(http.StatusBadRequest, "Sandbox must be started or stopped to create a snapshot")
	}
	return nil
}

// sandboxSnapshot is one createSandboxSnapshot under way: the new
// snapshot's record, and the sandbox it saves, which goes back to its state
// before unless it moved on meanwhile (its gen).
type sandboxSnapshot struct {
	s      snapshotAPI
	sb     *sandbox
	sn     *snapshotRec
	back   string
	gen    uint64
	images ImageBackend // nil: the backend only records the snapshot
	delay  time.Duration
}

// startSandboxSnapshotLocked records the snapshot, announces it and shows
// sb snapshotting. Called with s.mu held.
func startSandboxSnapshotLocked(s snapshotAPI, org string, sb *sandbox, name string) *sandboxSnapshot {
	now := s.clk.Now()
	sn := &snapshotRec{ID: s.newID(), OrgID: org, Name: name, CPU: sb.CPU, GPU: sb.GPU, Mem: sb.Memory, Disk: sb.Disk,
		State: snapPending, CreatedAt: now, UpdatedAt: now, SourceSandboxID: copyPtr(&sb.ID)}
	if sb.Snapshot != nil {
		sn.ImageName = *sb.Snapshot
	}
	s.snaps[sn.ID] = sn
	s.snapNames[nameKey(org, name)] = sn
	s.events.emit(org, EventSnapshotCreated, s.snapshotDTO(sn))
	j := &sandboxSnapshot{s: s, sb: sb, sn: sn, back: sb.State}
	sb.busy = true
	sb.gen++
	j.gen = sb.gen
	sb.setState(s.clk, stSnapshotting)
	j.images, _ = s.backend.(ImageBackend)
	j.delay = s.cfg.Profile.Backup.Draw(s.rng)
	return j
}

// run saves the filesystem (with an ImageBackend) and waits out the
// profile's backup time, then settles the sandbox and the snapshot.
func (j *sandboxSnapshot) run(ctx context.Context) {
	s := j.s
	s.mu.Lock()
	s.setSnapshotState(j.sn, snapPulling)
	s.mu.Unlock()
	var ref string
	var err error
	if j.images != nil {
		ref, err = j.images.CommitSandbox(ctx, j.sb.ID, j.sn.ID)
	}
	if j.delay > 0 {
		_ = clockSleep(ctx, s.Simulator, j.delay)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j.settleSandboxLocked()
	j.settleSnapshotLocked(ref, err)
}

// settleSandboxLocked puts the sandbox back in its state before, unless it
// moved on or vanished meanwhile.
func (j *sandboxSnapshot) settleSandboxLocked() {
	sb := j.sb
	if sb.gen == j.gen && !sb.gone {
		sb.busy = false
		sb.setState(j.s.clk, j.back)
		j.s.eng.kick(sb)
	}
}

// settleSnapshotLocked makes the snapshot active on ref, or errored.
func (j *sandboxSnapshot) settleSnapshotLocked(ref string, err error) {
	if err != nil {
		reason := err.Error()
		j.sn.ErrorReason = &reason
		j.s.setSnapshotState(j.sn, snapError)
		return
	}
	j.sn.ref, j.sn.owned = ref, ref != ""
	j.s.setSnapshotState(j.sn, snapActive)
}

const stSnapshotting = "snapshotting"
