package simulator

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/cost"
)

type createRequest struct {
	Name                *string           `json:"name"`
	Snapshot            *string           `json:"snapshot"`
	User                *string           `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              *bool             `json:"public"`
	NetworkBlockAll     *bool             `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList"`
	DomainAllowList     *string           `json:"domainAllowList"`
	Target              *string           `json:"target"`
	CPU                 *float64          `json:"cpu"`
	GPU                 *float64          `json:"gpu"`
	Memory              *float64          `json:"memory"`
	Disk                *float64          `json:"disk"`
	GPUType             []string          `json:"gpuType"`
	AutoStopInterval    *float64          `json:"autoStopInterval"`
	AutoArchiveInterval *float64          `json:"autoArchiveInterval"`
	AutoDeleteInterval  *float64          `json:"autoDeleteInterval"`
	AutoPauseInterval   *float64          `json:"autoPauseInterval"`
	Volumes             []volume          `json:"volumes"`
	BuildInfo           *struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	} `json:"buildInfo"`
	LinkedSandbox *string `json:"linkedSandbox"`
	// TTLMinutes is the TTL (v0.205.1), counted from the create.
	TTLMinutes *float64 `json:"ttlMinutes"`
	// Secrets are {ENV: secretName} objects to mount (v0.205.1).
	Secrets []map[string]string `json:"secrets"`
}

// unsafeName is what IsSafeDisplayString rejects: HTML tags, URLs and
// control characters.
var unsafeName = regexp.MustCompile(`<[^>]*>|[A-Za-z][A-Za-z0-9+.-]*://|www\.[^\s]+\.[^\s]+|\p{Cc}`)

// createSandbox is POST /sandbox: the request is checked on its own, then
// against the organization (names, snapshots, volumes, links); it gets a
// warm-pool sandbox or a new one, which is announced and held until it
// started. A create with buildInfo answers at once.
func (s *Simulator) createSandbox(c *call) (reply, *apiError) { return creation{s}.create(c) }

// sandboxAPI serves the routes of one sandbox's lifecycle and settings.
type sandboxAPI struct{ *Simulator }

func sandboxesOf(s *Simulator) sandboxAPI { return sandboxAPI{s} }

// creation is the steps of createSandbox, over the simulator.
type creation struct{ *Simulator }

func (s creation) create(c *call) (reply, *apiError) {
	var req createRequest
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	p, aerr := s.planCreate(req)
	if aerr != nil {
		return reply{}, aerr
	}
	warnDomainAllowList(c, req.DomainAllowList)
	if aerr := egressOf(s.Simulator).checkMounts(c.org, p.mounts); aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	if aerr := s.admitCreateLocked(c.org, &p); aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	sb, warm := s.sandboxForCreateLocked(c, p)
	if err := s.secrets.Mount(c.org, sb.ID, p.mounts); err != nil {
		// A secret deleted since checkMounts, which nothing orders with
		// the create: the sandbox is made, mounting none, and says so.
		c.w.Header().Add(warningHeader, mountError(err).Message+"; the sandbox mounts no secrets: mount them with PUT /sandbox/"+sb.ID+"/secrets")
	}
	p.applyTo(sb, s.clk.Now(), s.cfg.Minute)
	s.announceCreateLocked(c, sb)
	tbx := s.toolboxProxyURL(c.r)
	if p.build {
		// Image builds answer at once, without waiting.
		d := sb.dto(tbx, true)
		s.eng.kick(sb)
		s.mu.Unlock()
		return reply{http.StatusOK, d}, nil
	}
	s.eng.kick(sb)
	var hold time.Duration
	if warm {
		hold = s.cfg.Profile.WarmCreate.Draw(s.rng)
	}
	s.mu.Unlock()
	// A cold create's latency is its creating step; a warm hit's is the
	// API call alone.
	s.waitWarmCreate(c.ctx(), hold)
	return sandboxesOf(s.Simulator).replyStarted(c, sb, tbx, true)
}

// createPlan is a create request, checked, with what it resolves to.
type createPlan struct {
	req                               createRequest
	name                              string
	build                             bool
	target                            string
	autoStop, autoArchive, autoDelete int
	autoPause                         int
	ttl                               int
	// mounts are the secrets to mount, env var → secret name.
	mounts map[string]string
	// Resolved by admitCreateLocked.
	snap    Snapshot
	snapID  string
	snapRef string
	owner   *sandbox
}

// planCreate checks what a create request can be checked for alone, in
// Daytona's order: its name, resources, build, region, allow list and
// intervals.
func (s creation) planCreate(req createRequest) (createPlan, *apiError) {
	if req.Name != nil && unsafeName.MatchString(*req.Name) {
		return createPlan{}, errorf(http.StatusBadRequest, "name must not contain HTML tags, URLs, or control characters")
	}
	if err := checkResources(req); err != nil {
		return createPlan{}, err
	}
	p := createPlan{req: req, build: req.BuildInfo != nil, target: s.cfg.Regions[0]}
	if req.Name != nil {
		p.name = *req.Name
	}
	if p.build && req.Snapshot != nil && *req.Snapshot != "" {
		return createPlan{}, errorf(http.StatusBadRequest, "Cannot specify a snapshot when using a build info entry")
	}
	if !p.build && (req.CPU != nil || req.GPU != nil || req.Memory != nil || req.Disk != nil || len(req.GPUType) > 0) {
		return createPlan{}, errorf(http.StatusBadRequest, "Cannot specify Sandbox resources when using a snapshot")
	}
	if req.Target != nil && *req.Target != "" {
		if !contains(s.cfg.Regions, *req.Target) {
			return createPlan{}, errorf(http.StatusNotFound, "Region not found")
		}
		p.target = *req.Target
	}
	if req.NetworkAllowList != nil && *req.NetworkAllowList != "" {
		if err := checkAllowList(*req.NetworkAllowList); err != nil {
			return createPlan{}, err
		}
	}
	var err *apiError
	if p.mounts, err = mountsOf(req.Secrets); err != nil {
		return createPlan{}, err
	}
	if p.autoStop, p.autoArchive, p.autoDelete, err = createIntervals(req); err != nil {
		return createPlan{}, err
	}
	if p.autoPause, p.autoStop, err = createAutoPause(req, p.autoStop, p.autoDelete); err != nil {
		return createPlan{}, err
	}
	if req.TTLMinutes != nil {
		if p.ttl, err = parseTTL(strconv.FormatFloat(*req.TTLMinutes, 'f', -1, 64)); err != nil {
			return createPlan{}, err
		}
	}
	return p, nil
}

// checkResources checks the bounds of the requested resources, naming
// every field out of them.
func checkResources(req createRequest) *apiError {
	var msgs []string
	for _, f := range []struct {
		name string
		v    *float64
		max  float64
	}{{"cpu", req.CPU, math.Inf(1)}, {"gpu", req.GPU, 1}, {"memory", req.Memory, math.Inf(1)}, {"disk", req.Disk, math.Inf(1)}} {
		if f.v != nil && *f.v < 0 {
			msgs = append(msgs, f.name+" must not be less than 0")
		}
		if f.v != nil && *f.v > f.max {
			msgs = append(msgs, f.name+" must not be greater than "+strconv.FormatFloat(f.max, 'f', -1, 64))
		}
	}
	if len(msgs) > 0 {
		return errorf(http.StatusBadRequest, "%s", joinMessages(msgs))
	}
	return nil
}

// createIntervals are the auto-stop, auto-archive and auto-delete
// intervals of a create, Daytona's defaults where it gives none.
func createIntervals(req createRequest) (autoStop, autoArchive, autoDelete int, err *apiError) {
	autoStop, autoArchive, autoDelete = 15, 10080, -1
	if req.AutoStopInterval != nil {
		if *req.AutoStopInterval < 0 {
			return 0, 0, 0, errorf(http.StatusBadRequest, "Auto-stop interval must be non-negative")
		}
		autoStop = int(*req.AutoStopInterval)
	}
	if req.AutoArchiveInterval != nil {
		if *req.AutoArchiveInterval < 0 {
			return 0, 0, 0, errorf(http.StatusBadRequest, "Auto-archive interval must be non-negative")
		}
		autoArchive = clampArchive(int(*req.AutoArchiveInterval))
	}
	if req.AutoDeleteInterval != nil {
		autoDelete = int(*req.AutoDeleteInterval)
	}
	return autoStop, autoArchive, autoDelete, nil
}

// admitCreateLocked checks the create against the organization: its name
// is free, and its snapshot, volumes and linked sandbox exist. Called with
// s.mu held.
func (s creation) admitCreateLocked(org string, p *createPlan) *apiError {
	if p.name != "" {
		if other := s.rows.ByName(org, p.name); other != nil && !other.gone {
			return errorf(http.StatusConflict, "Sandbox with name %s already exists", p.name)
		}
	}
	var aerr *apiError
	p.snap, p.snapRef, p.owner, aerr = s.createChecksLocked(org, p.req, p.build)
	if aerr == nil && !p.build {
		// Resolved just now, so it is there.
		p.snapID = snapshotsOf(s.Simulator).findSnapshotLocked(org, p.snap.Name).ID
	}
	return aerr
}

// sandboxForCreateLocked is the sandbox a create gets: a started member
// of the warm pool that matches its spec, else a new one. warm tells which.
// Called with s.mu held.
func (s creation) sandboxForCreateLocked(c *call, p createPlan) (sb *sandbox, warm bool) {
	if spec, ok := s.poolSpecLocked(c, p); ok {
		if pool := s.eng.matchPoolLocked(c.org, spec); pool != nil {
			if sb := s.eng.takePoolLocked(pool); sb != nil {
				s.handOverLocked(c, sb, p.name, pool)
				return sb, true
			}
		}
	}
	sb = s.eng.newSandboxLocked(c.org, p.name, p.snap)
	sb.Target = p.target
	return sb, false
}

// poolSpecLocked is what a pool's members must have to serve the create,
// and false when no pooled sandbox can serve it: a build, a link, volumes,
// network settings and secrets all shape the sandbox before it starts (a
// secret's placeholder is in its env from the start), and a fault of the
// call's start needs a start to fail. Called with s.mu held.
func (s creation) poolSpecLocked(c *call, p createPlan) (poolSpec, bool) {
	req := p.req
	if p.build || req.GPU != nil || len(req.Volumes) > 0 || req.LinkedSandbox != nil ||
		req.NetworkBlockAll != nil && *req.NetworkBlockAll || req.NetworkAllowList != nil && *req.NetworkAllowList != "" ||
		len(p.mounts) > 0 || c.fault.FailStart != "" {
		return poolSpec{}, false
	}
	user := "daytona"
	if req.User != nil && *req.User != "" {
		user = *req.User
	}
	env := req.Env
	if env == nil {
		env = map[string]string{}
	}
	return poolSpec{SnapID: p.snapID, Target: p.target, CPU: p.snap.CPU, GPU: p.snap.GPU, Mem: p.snap.Memory,
		Disk: p.snap.Disk, OSUser: user, Env: env}, true
}

// handOverLocked gives a started member of pool to the caller's
// organization: the pool stops paying for it, Daytona resets createdAt,
// and the org change counts as activity; the pool refills. Called with
// s.mu held.
func (s creation) handOverLocked(c *call, sb *sandbox, name string, pool *warmPool) {
	now := s.clk.Now()
	enterBilling(sb.ledger, now, stDestroyed)
	sb.OrgID = c.org
	if name == "" {
		name = sb.ID
	}
	sb.Name = name
	sb.CreatedAt, sb.UpdatedAt, sb.LastActivity = now, now, now
	sb.ledger = &cost.Ledger{ID: sb.ID, OrgID: c.org, Name: name, CPU: sb.CPU, Memory: sb.Memory, Disk: sb.Disk}
	s.costs.Open(sb.ledger, now, cost.Running)
	s.eng.fillPoolLocked(pool)
	sb.proxyBase = s.toolboxProxyURL(c.r)
}

// applyTo sets what the create asks on sb, at now with minutes of minute;
// a build starts in pending_build with the requested resources.
func (p createPlan) applyTo(sb *sandbox, now time.Time, minute time.Duration) {
	req := p.req
	if req.User != nil && *req.User != "" {
		sb.User = *req.User
	}
	if req.Env != nil {
		sb.Env = copyMap(req.Env)
	}
	if req.Labels != nil {
		sb.Labels = copyMap(req.Labels)
	}
	if req.Public != nil {
		sb.Public = *req.Public
	}
	if req.NetworkBlockAll != nil {
		sb.NetworkBlockAll = *req.NetworkBlockAll
	}
	sb.NetworkAllowList, sb.DomainAllowList = req.NetworkAllowList, req.DomainAllowList
	sb.AutoStop, sb.AutoArchive, sb.AutoDelete, sb.AutoPause = p.autoStop, p.autoArchive, p.autoDelete, p.autoPause
	sb.AutoDestroyAt = ttlDeadline(now, p.ttl, minute)
	if req.Volumes != nil {
		sb.Volumes = append([]volume{}, req.Volumes...)
	}
	sb.imageRef = p.snapRef
	if p.owner != nil {
		id := p.owner.ID
		sb.LinkedSandboxID = &id
	}
	if p.build {
		p.applyBuild(sb, iso(now))
	}
}

// applyBuild makes sb a sandbox waiting for its image build.
func (p createPlan) applyBuild(sb *sandbox, now string) {
	req := p.req
	sb.Snapshot = nil
	sb.CPU, sb.GPU, sb.Memory, sb.Disk = intOr(req.CPU, 1), intOr(req.GPU, 0), intOr(req.Memory, 1), intOr(req.Disk, 3)
	sb.ledger.CPU, sb.ledger.Memory, sb.ledger.Disk = sb.CPU, sb.Memory, sb.Disk
	if len(req.GPUType) > 0 {
		t := req.GPUType[0]
		sb.GPUType = &t
	}
	hashes := req.BuildInfo.ContextHashes
	if hashes == nil {
		hashes = []string{}
	}
	sb.BuildInfo = &buildInfo{DockerfileContent: req.BuildInfo.DockerfileContent, ContextHashes: hashes,
		CreatedAt: now, UpdatedAt: now, SnapshotRef: "sandplane-sim/build-" + sb.ID[:8]}
	sb.State = stPendingBuild
}

// announceCreateLocked indexes sb and tells the organization: a new
// sandbox is created, a warm-pool handover only changes state (started to
// started). The call's faults land here: a failing start, or the sandbox
// vanishing once the answer is out. Called with s.mu held.
func (s creation) announceCreateLocked(c *call, sb *sandbox) {
	if c.fault.FailStart != "" {
		sb.failNext = &failure{Reason: c.fault.FailStart, Recoverable: c.fault.Recoverable}
	}
	s.rows.Insert(sb)
	sb.proxyBase = s.toolboxProxyURL(c.r)
	if sb.State == stStarted {
		s.events.emit(c.org, EventSandboxStateUpdated, sandboxStateEvent{Sandbox: sb.dto(sb.proxyBase, true), OldState: stStarted, NewState: stStarted})
		sb.evState, sb.evDesired = sb.State, sb.Desired
	} else {
		sb.emitCreated()
	}
	c.sandboxID = sb.ID
	if c.fault.Vanish {
		c.after = func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !sb.gone {
				s.vanishLocked(sb)
			}
		}
	}
}

// replyStarted holds a create, start or recover as the API does, then
// answers with the sandbox as it is by then; fresh as for dto.
func (s sandboxAPI) replyStarted(c *call, sb *sandbox, tbx string, fresh bool) (reply, *apiError) {
	if err := s.eng.waitStarted(c.ctx(), sb, createWait); err != nil {
		return reply{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return reply{http.StatusOK, sb.dto(tbx, fresh)}, nil
}

func intOr(v *float64, def int) int {
	if v == nil {
		return def
	}
	return int(*v)
}

func clampArchive(v int) int {
	if v == 0 || v > maxAutoArchive {
		return maxAutoArchive
	}
	return v
}

func joinMessages(msgs []string) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += ", "
		}
		out += m
	}
	return out
}

// withSandbox runs f on the sandbox the path names, under the lock.
func (s *Simulator) withSandbox(c *call, f func(sb *sandbox) (reply, *apiError)) (reply, *apiError) {
	idOrName := c.params["sandboxIdOrName"]
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, err := s.lookup(c.org, idOrName)
	if err != nil {
		return reply{}, err
	}
	c.sandboxID = sb.ID
	return f(sb)
}

// withSandboxRead is withSandbox for f that only reads: it holds the lock
// shared, beside lists and other reads.
func (s sandboxAPI) withSandboxRead(c *call, f func(sb *sandbox) (reply, *apiError)) (reply, *apiError) {
	idOrName := c.params["sandboxIdOrName"]
	s.mu.RLock()
	defer s.mu.RUnlock()
	sb, err := s.lookup(c.org, idOrName)
	if err != nil {
		return reply{}, err
	}
	c.sandboxID = sb.ID
	return f(sb)
}

func (s sandboxAPI) getSandbox(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandboxRead(c, func(sb *sandbox) (reply, *apiError) {
		return reply{http.StatusOK, sb.dto(tbx, false)}, nil
	})
}

func (s sandboxAPI) deleteSandbox(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.Pending && sb.State != stPendingBuild {
			return reply{}, errorf(http.StatusConflict, msgInProgress)
		}
		s.eng.softDeleteLocked(sb)
		d := sb.dto(tbx, false)
		s.eng.kick(sb)
		s.eng.cascadeDeleteLocked(sb)
		return reply{http.StatusOK, d}, nil
	})
}

func (s sandboxAPI) startSandbox(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	var sb *sandbox
	rep, err := s.withSandbox(c, func(x *sandbox) (reply, *apiError) {
		if x.State == stStarted && x.Desired == dsStarted && !x.Pending {
			return reply{http.StatusOK, x.dto(tbx, false)}, nil
		}
		if x.errored() {
			return reply{}, errorf(http.StatusBadRequest, msgErrored)
		}
		if x.inFlight() {
			return reply{}, errorf(http.StatusConflict, msgInProgress)
		}
		if x.State != stStopped && x.State != stArchived && x.State != stPaused {
			return reply{}, errorf(http.StatusBadRequest, msgNotValidState)
		}
		resume := x.State == stPaused
		x.Desired = dsStarted
		x.Pending = true
		x.UpdatedAt = s.clk.Now()
		if !resume {
			// The preview token rotates on every start from stopped or
			// archived; a resumed sandbox is the same running one.
			x.AuthToken = newToken(32, authTokenAlphabet)
		}
		if c.fault.FailStart != "" {
			x.failNext = &failure{Reason: c.fault.FailStart, Recoverable: c.fault.Recoverable}
		}
		x.notify()
		// Daytona skips the wait when the derived state is already
		// archived (a restore), restoring or started, and answers with the
		// row as saved, before the runner moves it.
		switch x.displayState(false) {
		case stArchived, stRestoring, stStarted:
			d := x.dto(tbx, false)
			s.eng.kick(x)
			return reply{http.StatusOK, d}, nil
		}
		s.eng.kick(x)
		sb = x
		return reply{}, nil
	})
	if err != nil || sb == nil {
		return rep, err
	}
	return s.replyStarted(c, sb, tbx, false)
}

func (s sandboxAPI) stopSandbox(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		force := false
		switch v := c.r.URL.Query().Get("force"); v {
		case "", "false":
		case "true":
			force = true
		default:
			return reply{}, errorf(http.StatusBadRequest, msgBoolExpected)
		}
		if sb.errored() {
			return reply{}, errorf(http.StatusBadRequest, msgErrored)
		}
		if sb.inFlight() {
			return reply{}, errorf(http.StatusConflict, msgInProgress)
		}
		if sb.State != stStarted && sb.State != stPaused {
			return reply{}, errorf(http.StatusBadRequest, msgNotStoppable)
		}
		if sb.ephemeral() {
			s.eng.softDeleteLocked(sb)
		} else {
			sb.Desired = dsStopped
			sb.Pending = true
			sb.forceStop = force
			sb.UpdatedAt = s.clk.Now()
			sb.notify()
		}
		d := sb.dto(tbx, false)
		s.eng.kick(sb)
		return reply{http.StatusOK, d}, nil
	})
}

// pauseSandbox freezes a started sandbox: started → pausing → paused, its
// processes stopped where they are with their memory kept, on a backend that
// can (PauseBackend); elsewhere a change of state only, which the warning
// header says. Start resumes it, as Daytona's start does.
func (s sandboxAPI) pauseSandbox(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.State != stStarted {
			return reply{}, errorf(http.StatusBadRequest, msgNotPausable)
		}
		if sb.inFlight() {
			return reply{}, errorf(http.StatusConflict, msgInProgress)
		}
		if _, ok := s.backend.(PauseBackend); !ok {
			c.w.Header().Add(warningHeader, "the "+s.backend.Name()+" backend cannot freeze a workload: the pause is a change of state only")
		}
		s.eng.pauseLocked(sb)
		d := sb.dto(tbx, false)
		s.eng.kick(sb)
		return reply{http.StatusOK, d}, nil
	})
}

func (s sandboxAPI) archiveSandbox(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.errored() {
			return reply{}, errorf(http.StatusBadRequest, msgErrored)
		}
		if sb.inFlight() {
			return reply{}, errorf(http.StatusConflict, msgInProgress)
		}
		if sb.State != stStopped {
			return reply{}, errorf(http.StatusBadRequest, msgNotStopped)
		}
		if sb.ephemeral() {
			return reply{}, errorf(http.StatusBadRequest, msgEphemeralArchive)
		}
		// Archive sets the raw state itself, not just the desired one.
		sb.Desired = dsArchived
		sb.setState(s.clk, stArchiving)
		d := sb.dto(tbx, false)
		s.eng.kick(sb)
		return reply{http.StatusOK, d}, nil
	})
}

func (s sandboxAPI) recoverSandbox(c *call) (reply, *apiError) {
	skipStart := c.r.URL.Query().Get("skipStart") == "true"
	tbx := s.toolboxProxyURL(c.r)
	var sb *sandbox
	rep, err := s.withSandbox(c, func(x *sandbox) (reply, *apiError) {
		if x.State != stError {
			return reply{}, errorf(http.StatusBadRequest, "Sandbox is not in an errored state")
		}
		if !x.Recoverable {
			return reply{}, errorf(http.StatusBadRequest, "Sandbox is not recoverable")
		}
		x.ErrorReason = nil
		x.Recoverable = false
		x.Desired = dsStarted
		if skipStart {
			x.Desired = dsStopped
		}
		x.Pending = true
		x.setState(s.clk, stStopped)
		s.eng.kick(x)
		if skipStart {
			return reply{http.StatusOK, x.dto(tbx, false)}, nil
		}
		sb = x
		return reply{}, nil
	})
	if err != nil || sb == nil {
		return rep, err
	}
	return s.replyStarted(c, sb, tbx, false)
}

func (s sandboxAPI) createBackup(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.errored() {
			return reply{}, errorf(http.StatusBadRequest, msgErrored)
		}
		sb.BackupState = "Pending"
		d := sb.dto(tbx, false)
		delay := s.cfg.Profile.Backup.Draw(s.rng)
		done := func() {
			if sb.gone {
				return
			}
			now := s.clk.Now()
			sb.BackupState = "Completed"
			sb.BackupCreatedAt = &now
		}
		if delay <= 0 {
			done()
		} else {
			s.clk.AfterFunc(delay, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				done()
			})
		}
		return reply{http.StatusCreated, d}, nil
	})
}

type labelsRequest struct {
	Labels map[string]string `json:"labels"`
}

func (s sandboxAPI) replaceLabels(c *call) (reply, *apiError) {
	var req labelsRequest
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		sb.Labels = copyMap(req.Labels)
		s.rows.Reindex(sb)
		sb.UpdatedAt = s.clk.Now()
		return reply{http.StatusOK, sb.dto(tbx, false)}, nil
	})
}

// intervalParam parses an interval path value. A non-number reaches an
// integer column in Daytona and comes back as a 500.
func intervalParam(c *call) (int, *apiError) {
	v, err := strconv.ParseFloat(c.params["interval"], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errorf(http.StatusInternalServerError, msgUnexpected)
	}
	return int(v), nil
}

// setInterval is the three interval setters: set checks and stores the
// path's interval. None is activity or gated on state, and like every
// parameter check, theirs comes after the access guard's 404.
func (s sandboxAPI) setInterval(c *call, set func(sb *sandbox, n int) *apiError) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		n, err := intervalParam(c)
		if err != nil {
			return reply{}, err
		}
		if err := set(sb, n); err != nil {
			return reply{}, err
		}
		sb.UpdatedAt = s.clk.Now()
		return reply{http.StatusCreated, sb.dto(tbx, false)}, nil
	})
}

func (s sandboxAPI) setAutostop(c *call) (reply, *apiError) {
	return s.setInterval(c, func(sb *sandbox, n int) *apiError {
		if n < 0 {
			return errorf(http.StatusBadRequest, "Auto-stop interval must be non-negative")
		}
		if n != 0 && sb.AutoPause != 0 {
			return errorf(http.StatusBadRequest, msgAutoPauseExclusive)
		}
		sb.AutoStop = n
		return nil
	})
}

func (s sandboxAPI) setAutoArchive(c *call) (reply, *apiError) {
	return s.setInterval(c, func(sb *sandbox, n int) *apiError {
		if n < 0 {
			return errorf(http.StatusBadRequest, "Auto-archive interval must be non-negative")
		}
		sb.AutoArchive = clampArchive(n)
		return nil
	})
}

func (s sandboxAPI) setAutoDelete(c *call) (reply, *apiError) {
	return s.setInterval(c, func(sb *sandbox, n int) *apiError {
		if sb.GPU > 0 && n != 0 {
			return errorf(http.StatusBadRequest, "GPU sandboxes must remain ephemeral")
		}
		if n == 0 && sb.AutoPause != 0 {
			return errorf(http.StatusBadRequest, msgAutoPauseEphemeral)
		}
		sb.AutoDelete = n
		return nil
	})
}

func (s sandboxAPI) setPublic(c *call) (reply, *apiError) {
	public := c.params["isPublic"] == "true"
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		sb.Public = public
		sb.UpdatedAt = s.clk.Now()
		return reply{http.StatusCreated, sb.dto(tbx, false)}, nil
	})
}

// lastActivity is the SDKs' refreshActivity. The guard resolves names too,
// but the service records the raw parameter, so a name is a silent no-op.
func (s sandboxAPI) lastActivity(c *call) (reply, *apiError) {
	param := c.params["sandboxId"]
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, err := s.lookup(c.org, param)
	if err != nil {
		return reply{}, err
	}
	c.sandboxID = sb.ID
	if param == sb.ID {
		s.eng.bumpLocked(sb)
	}
	return reply{status: http.StatusCreated}, nil
}

func portParam(c *call) (int, *apiError) {
	v, err := strconv.ParseFloat(c.params["port"], 64)
	if err != nil || v < 1 || v > 65535 || v != math.Trunc(v) {
		return 0, errorf(http.StatusBadRequest, "Invalid port")
	}
	return int(v), nil
}

type previewURLDTO struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

type signedPreviewURLDTO struct {
	SandboxID string `json:"sandboxId"`
	Port      int    `json:"port"`
	Token     string `json:"token"`
	URL       string `json:"url"`
}

// signedToken is a signed preview URL's token; it survives restarts and
// expires on the clock.
type signedToken struct {
	sandboxID string
	port      int
	expires   time.Time
}

func (s sandboxAPI) previewURL(c *call) (reply, *apiError) {
	base := s.baseURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		port, perr := portParam(c)
		if perr != nil {
			return reply{}, perr
		}
		return reply{http.StatusOK, previewURLDTO{SandboxID: sb.ID, URL: previewLink(base, port, sb.ID), Token: sb.AuthToken}}, nil
	})
}

func previewLink(base string, port int, label string) string {
	return base + "/_preview/" + strconv.Itoa(port) + "-" + label
}

func (s sandboxAPI) signedPreviewURL(c *call) (reply, *apiError) {
	base := s.baseURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		port, perr := portParam(c)
		if perr != nil {
			return reply{}, perr
		}
		expires := defaultSignedPreviewS
		if v := c.r.URL.Query().Get("expiresInSeconds"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 86400 {
				return reply{}, errorf(http.StatusBadRequest, "expiresInSeconds must be between 1 second and 24 hours")
			}
			expires = n
		}
		tok := newToken(16, signedAlphabet)
		s.signed[tok] = &signedToken{sandboxID: sb.ID, port: port, expires: s.clk.Now().Add(time.Duration(expires) * time.Second)}
		return reply{http.StatusOK, signedPreviewURLDTO{SandboxID: sb.ID, Port: port, Token: tok, URL: previewLink(base, port, tok)}}, nil
	})
}

// expireSignedPreviewURL succeeds even for an unknown token, as a Redis DEL
// does.
func (s sandboxAPI) expireSignedPreviewURL(c *call) (reply, *apiError) {
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if _, err := portParam(c); err != nil {
			return reply{}, err
		}
		if t := s.signed[c.params["token"]]; t != nil && t.sandboxID == sb.ID {
			delete(s.signed, c.params["token"])
		}
		return reply{status: http.StatusCreated}, nil
	})
}

func (s sandboxAPI) toolboxProxyURLHandler(c *call) (reply, *apiError) {
	id := c.params["sandboxId"]
	tbx := s.toolboxProxyURL(c.r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.lookup(c.org, id); err != nil {
		return reply{}, err
	}
	sb := s.lookupID(c.org, id)
	if sb == nil {
		return reply{}, errorf(http.StatusNotFound, "Sandbox with ID %s not found", id)
	}
	c.sandboxID = sb.ID
	return reply{http.StatusOK, map[string]string{"url": tbx}}, nil
}

func (s sandboxAPI) buildLogsURL(c *call) (reply, *apiError) {
	base := s.baseURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.BuildInfo == nil {
			return reply{}, errorf(http.StatusNotFound, "Sandbox %s has no build info", c.params["sandboxIdOrName"])
		}
		return reply{http.StatusOK, map[string]string{"url": base + "/api/sandbox/" + sb.ID + "/build-logs"}}, nil
	})
}
