package simulator

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator/internal/cost"
	"github.com/sandplane/sandplane/simulator/internal/engine"
	"github.com/sandplane/sandplane/simulator/internal/store"
)

// The raw and desired states, by their short names here (engine has the
// lifecycle).
const (
	stCreating         = engine.Creating
	stRestoring        = engine.Restoring
	stDestroyed        = engine.Destroyed
	stDestroying       = engine.Destroying
	stStarted          = engine.Started
	stStopped          = engine.Stopped
	stStarting         = engine.Starting
	stStopping         = engine.Stopping
	stError            = engine.Error
	stBuildFailed      = engine.BuildFailed
	stPendingBuild     = engine.PendingBuild
	stBuildingSnapshot = engine.BuildingSnapshot
	stUnknown          = engine.Unknown
	stArchived         = engine.Archived
	stArchiving        = engine.Archiving
	stPausing          = engine.Pausing
	stPaused           = engine.Paused
	stResuming         = engine.Resuming

	dsDestroyed = engine.WantDestroyed
	dsStarted   = engine.WantStarted
	dsStopped   = engine.WantStopped
	dsArchived  = engine.WantArchived
	dsPaused    = engine.WantPaused
)

// isoMillis is JavaScript's Date.toISOString.
const isoMillis = "2006-01-02T15:04:05.000Z"

func iso(t time.Time) string { return t.UTC().Format(isoMillis) }

type volume struct {
	VolumeID  string  `json:"volumeId"`
	MountPath string  `json:"mountPath"`
	Subpath   *string `json:"subpath,omitempty"`
}

type buildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes"`
	CreatedAt         string   `json:"createdAt"`
	UpdatedAt         string   `json:"updatedAt"`
	SnapshotRef       string   `json:"snapshotRef"`
}

// sandbox is one row, with the engine's bookkeeping beside it. Every field
// is guarded by Simulator.mu.
type sandbox struct {
	ID, OrgID, Name  string
	Snapshot         *string
	User             string
	Env, Labels      map[string]string
	Public           bool
	NetworkBlockAll  bool
	NetworkAllowList *string
	DomainAllowList  *string
	// AutoDestroyAt is the TTL deadline (ttl.go); nil for none.
	AutoDestroyAt   *time.Time
	Target          string
	CPU, GPU        int
	Memory, Disk    int
	GPUType         *string
	State, Desired  string
	Pending         bool
	ErrorReason     *string
	Recoverable     bool
	BackupState     string
	BackupCreatedAt *time.Time
	AutoStop        int
	AutoArchive     int
	AutoDelete      int
	// AutoPause is the auto-pause interval (autopause.go); 0 for none.
	AutoPause       int
	Volumes         []volume
	BuildInfo       *buildInfo
	CreatedAt       time.Time
	UpdatedAt       time.Time
	LastActivity    time.Time
	RunnerID        *string
	DaemonVersion   *string
	AuthToken       string
	LinkedSandboxID *string

	// signingKey signs the sandbox's pre-signed file URLs (signingkey.go):
	// made at the first getSandboxSigningKey, replaced by rotateSigningKey,
	// never in a DTO.
	signingKey string

	// imageRef is the image its workload runs (ImageBackend); "" is the
	// default workload. buildLogs is what building it printed.
	imageRef  string
	buildLogs *liveLog

	// forkParent is the sandbox this one was forked from (fork.go), ""
	// for none; it stays when the parent is deleted.
	forkParent string

	// gen increments at every step the engine takes, so a step that
	// completes after the row moved on (or vanished) is dropped.
	gen     uint64
	busy    bool
	gone    bool
	changed chan struct{} // closed and replaced on every raw state change

	// forceStop skips the stop's grace period.
	forceStop bool
	// failNext makes the next transition towards started end in error.
	failNext *failure

	// activity bookkeeping (see activity.go)
	lastBump time.Time // last accepted bump through the throttle

	// workload
	toolboxURL string
	// egress: the workload was started with the secrets proxy (egress.go).
	egress bool

	// the store's indexes (store.go): where sb sits in them, and the
	// simulator that keeps them.
	ix  store.Slot
	sim *Simulator

	// cost accounting
	ledger *cost.Ledger
	// pool is the warm pool sb is an unclaimed member of; nil once taken
	// (warmpools.go).
	pool *warmPool

	// events (see events.go): the bus, the toolboxProxyUrl base the
	// events' DTOs carry, and the states last announced.
	events             *eventBus
	proxyBase          string
	evState, evDesired string

	// listCache is the row's last encoded list item (listcache.go).
	listCache atomic.Pointer[listItemCache]
}

type failure struct {
	Reason      string
	Recoverable bool
}

func (sb *sandbox) ephemeral() bool { return sb.AutoDelete == 0 }

func (sb *sandbox) errored() bool { return engine.Errored(sb.State) }

// inFlight is Daytona's "state change in progress".
func (sb *sandbox) inFlight() bool { return sb.Pending || sb.State != sb.Desired }

// displayState is the derived state of the Sandbox DTO.
func (sb *sandbox) displayState(listItem bool) string {
	switch {
	case sb.State == stStarted && sb.Desired == dsStopped:
		return stStopping
	case sb.State == stStarted && sb.Desired == dsDestroyed:
		return stDestroying
	case sb.State == stStarted && sb.Desired == dsPaused:
		return stPausing
	case sb.State == stPaused && sb.Desired == dsStarted:
		return stResuming
	case sb.State == stPaused && sb.Desired == dsStopped:
		return stStopping
	case sb.State == stPaused && sb.Desired == dsDestroyed:
		return stDestroying
	case sb.State == stStopped && sb.Desired == dsStarted:
		return stStarting
	case sb.State == stStopped && sb.Desired == dsDestroyed:
		return stDestroying
	case sb.State == stStopped && sb.Desired == dsArchived:
		return stArchiving
	case sb.State == stUnknown && sb.Desired == dsStarted:
		return stCreating
	case listItem && sb.State == stArchived && sb.Desired == dsStarted:
		return stRestoring
	}
	return sb.State
}

// setState changes the raw state. Every raw change is activity in Daytona
// (the repository upserts lastActivityAt in the same transaction).
func (sb *sandbox) setState(c clock.Clock, state string) {
	if sb.State == state {
		return
	}
	now := c.Now()
	enterBilling(sb.ledger, now, state)
	sb.State = state
	sb.UpdatedAt = now
	sb.LastActivity = now
	if sb.sim != nil {
		sb.sim.rows.ActivityMoved(sb)
	}
	if state == stDestroyed || state == stArchived {
		sb.RunnerID = nil
	}
	if sb.State == sb.Desired || sb.errored() || sb.Desired == dsArchived {
		sb.Pending = false
	}
	sb.notify()
}

func (sb *sandbox) notify() {
	if sb.changed != nil {
		close(sb.changed)
	}
	sb.changed = make(chan struct{})
	sb.emitChanges()
}

// nullable renders as absent (unset), null, or a value; with the omitzero
// tag an unset one leaves the key out.
type nullable[T any] struct {
	v   T
	set bool
	ok  bool
}

func (n nullable[T]) IsZero() bool { return !n.set }

func (n nullable[T]) MarshalJSON() ([]byte, error) {
	if !n.ok {
		return []byte("null"), nil
	}
	return json.Marshal(n.v)
}

// column renders a nullable column: absent on a fresh row, null or the value
// on one read back.
func column[T any](p *T, fresh bool) nullable[T] {
	if p != nil {
		return nullable[T]{v: *p, set: true, ok: true}
	}
	if fresh {
		return nullable[T]{}
	}
	return nullable[T]{set: true}
}

func present[T any](v T) nullable[T] { return nullable[T]{v: v, set: true, ok: true} }

// sandboxDTO is the Sandbox schema.
type sandboxDTO struct {
	ID                  string              `json:"id"`
	OrganizationID      string              `json:"organizationId"`
	Name                string              `json:"name"`
	Snapshot            nullable[string]    `json:"snapshot,omitzero"`
	User                string              `json:"user"`
	Env                 map[string]string   `json:"env"`
	Labels              map[string]string   `json:"labels"`
	Public              bool                `json:"public"`
	NetworkBlockAll     bool                `json:"networkBlockAll"`
	NetworkAllowList    nullable[string]    `json:"networkAllowList,omitzero"`
	DomainAllowList     nullable[string]    `json:"domainAllowList,omitzero"`
	Target              string              `json:"target"`
	CPU                 int                 `json:"cpu"`
	GPU                 int                 `json:"gpu"`
	GPUType             nullable[string]    `json:"gpuType,omitzero"`
	Memory              int                 `json:"memory"`
	Disk                int                 `json:"disk"`
	State               string              `json:"state"`
	DesiredState        string              `json:"desiredState"`
	ErrorReason         nullable[string]    `json:"errorReason,omitzero"`
	Recoverable         bool                `json:"recoverable"`
	BackupState         string              `json:"backupState"`
	BackupCreatedAt     nullable[string]    `json:"backupCreatedAt,omitzero"`
	AutoStopInterval    int                 `json:"autoStopInterval"`
	AutoArchiveInterval int                 `json:"autoArchiveInterval"`
	AutoDeleteInterval  int                 `json:"autoDeleteInterval"`
	AutoPauseInterval   int                 `json:"autoPauseInterval"`
	Volumes             []volume            `json:"volumes"`
	BuildInfo           nullable[buildInfo] `json:"buildInfo,omitzero"`
	CreatedAt           string              `json:"createdAt"`
	UpdatedAt           string              `json:"updatedAt"`
	LastActivityAt      string              `json:"lastActivityAt"`
	SandboxClass        string              `json:"sandboxClass"`
	DaemonVersion       nullable[string]    `json:"daemonVersion,omitzero"`
	RunnerID            nullable[string]    `json:"runnerId,omitzero"`
	LinkedSandboxID     nullable[string]    `json:"linkedSandboxId,omitzero"`
	ToolboxProxyURL     string              `json:"toolboxProxyUrl"`
	AutoDestroyAt       nullable[string]    `json:"autoDestroyAt,omitzero"`
}

// sandboxListItemDTO is the SandboxListItem schema: the Sandbox minus env,
// volumes, buildInfo and backupCreatedAt (v0.205.1 added the network
// settings). A list item is
// always read back, so its nullable columns are null or a value, never
// absent: plain pointers say that, and encode without a marshaler per
// field, which a page of 200 items feels.
type sandboxListItemDTO struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Target              string            `json:"target"`
	RunnerID            *string           `json:"runnerId"`
	SandboxClass        string            `json:"sandboxClass"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	Snapshot            *string           `json:"snapshot"`
	User                string            `json:"user"`
	ErrorReason         *string           `json:"errorReason"`
	Recoverable         bool              `json:"recoverable"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList"`
	DomainAllowList     *string           `json:"domainAllowList"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	GPUType             *string           `json:"gpuType,omitempty"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	Labels              map[string]string `json:"labels"`
	BackupState         string            `json:"backupState"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoPauseInterval   int               `json:"autoPauseInterval"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	LastActivityAt      string            `json:"lastActivityAt"`
	DaemonVersion       *string           `json:"daemonVersion"`
	AutoDestroyAt       *string           `json:"autoDestroyAt,omitempty"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// dto renders the Sandbox. It copies everything, so the result may be
// encoded after the lock is released. fresh renders the row as the create
// response does: Daytona omits there the nullable columns that a later GET,
// reading the row back, shows as null.
func (sb *sandbox) dto(toolboxProxyURL string, fresh bool) sandboxDTO {
	d := sandboxDTO{
		ID:                  sb.ID,
		OrganizationID:      sb.OrgID,
		Name:                sb.Name,
		Snapshot:            column(sb.Snapshot, fresh),
		User:                sb.User,
		Env:                 copyMap(sb.Env),
		Labels:              copyMap(sb.Labels),
		Public:              sb.Public,
		NetworkBlockAll:     sb.NetworkBlockAll,
		NetworkAllowList:    column(sb.NetworkAllowList, fresh),
		DomainAllowList:     column(sb.DomainAllowList, fresh),
		Target:              sb.Target,
		CPU:                 sb.CPU,
		GPU:                 sb.GPU,
		Memory:              sb.Memory,
		Disk:                sb.Disk,
		State:               sb.displayState(false),
		DesiredState:        sb.Desired,
		ErrorReason:         column(sb.ErrorReason, fresh),
		Recoverable:         sb.Recoverable,
		BackupState:         sb.BackupState,
		AutoStopInterval:    sb.AutoStop,
		AutoArchiveInterval: sb.AutoArchive,
		AutoDeleteInterval:  sb.AutoDelete,
		AutoPauseInterval:   sb.AutoPause,
		Volumes:             append([]volume{}, sb.Volumes...),
		CreatedAt:           iso(sb.CreatedAt),
		UpdatedAt:           iso(sb.UpdatedAt),
		LastActivityAt:      iso(sb.LastActivity),
		SandboxClass:        "container",
		DaemonVersion:       column(sb.DaemonVersion, fresh),
		RunnerID:            column(sb.RunnerID, fresh),
		ToolboxProxyURL:     toolboxProxyURL,
	}
	if sb.GPUType != nil {
		d.GPUType = present(*sb.GPUType)
	}
	if sb.BackupCreatedAt != nil {
		d.BackupCreatedAt = present(iso(*sb.BackupCreatedAt))
	}
	if sb.BuildInfo != nil {
		d.BuildInfo = present(*sb.BuildInfo)
	}
	if sb.LinkedSandboxID != nil {
		d.LinkedSandboxID = present(*sb.LinkedSandboxID)
	}
	if sb.AutoDestroyAt != nil {
		d.AutoDestroyAt = present(iso(*sb.AutoDestroyAt))
	}
	return d
}

func (sb *sandbox) listItem(toolboxProxyURL string) sandboxListItemDTO {
	return sandboxListItemDTO{
		ID:                  sb.ID,
		OrganizationID:      sb.OrgID,
		Name:                sb.Name,
		Target:              sb.Target,
		RunnerID:            copyPtr(sb.RunnerID),
		SandboxClass:        "container",
		State:               sb.displayState(true),
		DesiredState:        sb.Desired,
		Snapshot:            copyPtr(sb.Snapshot),
		User:                sb.User,
		ErrorReason:         copyPtr(sb.ErrorReason),
		Recoverable:         sb.Recoverable,
		Public:              sb.Public,
		NetworkBlockAll:     sb.NetworkBlockAll,
		NetworkAllowList:    copyPtr(sb.NetworkAllowList),
		DomainAllowList:     copyPtr(sb.DomainAllowList),
		CPU:                 sb.CPU,
		GPU:                 sb.GPU,
		GPUType:             copyPtr(sb.GPUType),
		Memory:              sb.Memory,
		Disk:                sb.Disk,
		Labels:              copyMap(sb.Labels),
		BackupState:         sb.BackupState,
		AutoStopInterval:    sb.AutoStop,
		AutoArchiveInterval: sb.AutoArchive,
		AutoDeleteInterval:  sb.AutoDelete,
		AutoPauseInterval:   sb.AutoPause,
		CreatedAt:           iso(sb.CreatedAt),
		UpdatedAt:           iso(sb.UpdatedAt),
		LastActivityAt:      iso(sb.LastActivity),
		DaemonVersion:       copyPtr(sb.DaemonVersion),
		AutoDestroyAt:       isoPtr(sb.AutoDestroyAt),
		ToolboxProxyURL:     toolboxProxyURL,
	}
}

// isoPtr is iso(*t), or nil.
func isoPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	v := iso(*t)
	return &v
}

// copyPtr copies *p, so that the DTO may be encoded after the lock is
// released.
func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
