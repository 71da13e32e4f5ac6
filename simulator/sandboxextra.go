package simulator

import (
	"context"
	"crypto/subtle"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator/internal/backend"
)

// extraAPI serves the routes beyond a sandbox's lifecycle: network
// settings, forks, SSH access, telemetry, build logs and resize, and the
// deployment's health and config.
type extraAPI struct{ *Simulator }

func extrasOf(s *Simulator) extraAPI { return extraAPI{s} }

// extraRoutes are the routes beyond the sandbox lifecycle: snapshots,
// volumes, network settings, SSH access, fork, telemetry, health, and the
// signing key of pre-signed file URLs.
func extraRoutes() []route {
	return []route{
		{"GET", "/api/health/ready", "HealthController_check", part(extrasOf, extraAPI.healthReady)},
		{"GET", "/api/config", "ConfigController_getConfig", part(extrasOf, extraAPI.config)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/network-settings", "updateNetworkSettings", part(extrasOf, extraAPI.updateNetworkSettings)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/fork", "forkSandbox", part(extrasOf, extraAPI.forkSandbox)},
		{"GET", "/api/sandbox/{sandboxIdOrName}/forks", "getSandboxForks", part(extrasOf, extraAPI.getSandboxForks)},
		{"GET", "/api/sandbox/{sandboxIdOrName}/parent", "getSandboxParent", part(extrasOf, extraAPI.getSandboxParent)},
		{"GET", "/api/sandbox/{sandboxIdOrName}/ancestors", "getSandboxAncestors", part(extrasOf, extraAPI.getSandboxAncestors)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/snapshot", "createSandboxSnapshot", part(snapshotsOf, snapshotAPI.createSandboxSnapshot)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/ssh-access", "createSshAccess", part(extrasOf, extraAPI.createSSHAccess)},
		{"DELETE", "/api/sandbox/{sandboxIdOrName}/ssh-access", "revokeSshAccess", part(extrasOf, extraAPI.revokeSSHAccess)},
		{"GET", "/api/sandbox/ssh-access/validate", "validateSshAccess", part(extrasOf, extraAPI.validateSSHAccess)},
		{"GET", "/api/sandbox/{sandboxId}/telemetry/logs", "getSandboxLogs", part(extrasOf, extraAPI.telemetryLogs)},
		{"GET", "/api/sandbox/{sandboxId}/telemetry/traces", "getSandboxTraces", part(extrasOf, extraAPI.telemetryTraces)},
		{"GET", "/api/sandbox/{sandboxId}/telemetry/traces/{traceId}", "getSandboxTraceSpans", part(extrasOf, extraAPI.telemetrySpans)},
		{"GET", "/api/sandbox/{sandboxId}/telemetry/metrics", "getSandboxMetrics", part(extrasOf, extraAPI.telemetryMetrics)},
		{"GET", "/api/sandbox/{sandboxIdOrName}/build-logs", "getBuildLogs", part(extrasOf, extraAPI.sandboxBuildLogs)},
		{"GET", "/api/snapshots", "getAllSnapshots", part(snapshotsOf, snapshotAPI.listSnapshots)},
		{"POST", "/api/snapshots", "createSnapshot", part(snapshotsOf, snapshotAPI.createSnapshot)},
		{"GET", "/api/snapshots/{id}", "getSnapshot", part(snapshotsOf, snapshotAPI.getSnapshot)},
		{"DELETE", "/api/snapshots/{id}", "removeSnapshot", part(snapshotsOf, snapshotAPI.removeSnapshot)},
		{"POST", "/api/snapshots/{id}/activate", "activateSnapshot", part(snapshotsOf, snapshotAPI.activateSnapshot)},
		{"POST", "/api/snapshots/{id}/deactivate", "deactivateSnapshot", part(snapshotsOf, snapshotAPI.deactivateSnapshot)},
		{"GET", "/api/snapshots/{id}/build-logs-url", "getSnapshotBuildLogsUrl", part(snapshotsOf, snapshotAPI.snapshotBuildLogsURL)},
		{"GET", "/api/snapshots/{id}/build-logs", "getSnapshotBuildLogs", part(snapshotsOf, snapshotAPI.snapshotBuildLogs)},
		{"GET", "/api/volumes", "listVolumes", part(volumesOf, volumeAPI.listVolumes)},
		{"POST", "/api/volumes", "createVolume", part(volumesOf, volumeAPI.createVolume)},
		{"GET", "/api/volumes/{volumeId}", "getVolume", part(volumesOf, volumeAPI.getVolume)},
		{"DELETE", "/api/volumes/{volumeId}", "deleteVolume", part(volumesOf, volumeAPI.deleteVolume)},
		{"GET", "/api/volumes/by-name/{name}", "getVolumeByName", part(volumesOf, volumeAPI.getVolumeByName)},
		{"GET", "/api/object-storage/push-access", "getPushAccess", part(extrasOf, extraAPI.pushAccess)},
		// The signing key of pre-signed file URLs (v0.205.1), which
		// @daytonaio/sdk 0.218.0 calls.
		{"GET", "/api/sandbox/{sandboxId}/signing-key", "getSandboxSigningKey", part(extrasOf, extraAPI.getSigningKey)},
		{"POST", "/api/sandbox/{sandboxId}/signing-key/rotate", "rotateSigningKey", part(extrasOf, extraAPI.rotateSigningKey)},
	}
}

// pushAccess: image build contexts go to Daytona's object storage, which
// the simulator does not run; a deployment without one answers 503.
func (s extraAPI) pushAccess(c *call) (reply, *apiError) {
	return reply{}, errorf(http.StatusServiceUnavailable,
		"Object storage is not available: the simulator builds images from their Dockerfile content only, without local context files")
}

// rawReply marks a handler that wrote its answer itself.
const rawReply = -1

func clockSleep(ctx context.Context, s *Simulator, d time.Duration) error {
	return clock.Sleep(ctx, s.clk, d)
}

// healthReady is the readiness check (terminus's shape); public, as
// GET /api/health is.
func (s extraAPI) healthReady(c *call) (reply, *apiError) {
	up := map[string]any{"database": map[string]string{"status": "up"}, "redis": map[string]string{"status": "up"}}
	return reply{http.StatusOK, map[string]any{"status": "ok", "info": up, "error": map[string]any{}, "details": up}}, nil
}

// config is the deployment's configuration, which the dashboard and the
// SDKs read (public). It names no analytics API, so the SDKs ask the API
// itself for metrics.
func (s extraAPI) config(c *call) (reply, *apiError) {
	base := s.baseURL(c.r)
	return reply{http.StatusOK, map[string]any{
		"version":                "v" + strings.TrimPrefix(SpecVersion(), "v") + "-sandplane-sim",
		"oidc":                   map[string]string{"issuer": base, "clientId": "sandplane-sim", "audience": "sandplane-sim"},
		"linkedAccountsEnabled":  false,
		"announcements":          map[string]any{},
		"proxyTemplateUrl":       base + "/_preview/{{PORT}}-{{sandboxId}}",
		"proxyToolboxUrl":        s.toolboxProxyURL(c.r),
		"defaultSnapshot":        s.cfg.DefaultSnapshot,
		"dashboardUrl":           base,
		"maxAutoArchiveInterval": maxAutoArchive,
		"maintananceMode":        false,
		"environment":            "sandplane-sim",
	}}, nil
}

type networkSettingsRequest struct {
	NetworkBlockAll  *bool   `json:"networkBlockAll"`
	NetworkAllowList *string `json:"networkAllowList"`
	DomainAllowList  *string `json:"domainAllowList"`
}

// checkAllowList validates Daytona's comma-separated CIDR list.
func checkAllowList(list string) *apiError {
	parts := strings.Split(list, ",")
	if len(parts) > 5 {
		return errorf(http.StatusBadRequest, "networkAllowList may hold at most 5 CIDR blocks")
	}
	for _, p := range parts {
		if _, err := netip.ParsePrefix(strings.TrimSpace(p)); err != nil {
			return errorf(http.StatusBadRequest, "Invalid CIDR %q in networkAllowList", strings.TrimSpace(p))
		}
	}
	return nil
}

func (s extraAPI) updateNetworkSettings(c *call) (reply, *apiError) {
	var req networkSettingsRequest
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	if req.NetworkAllowList != nil && *req.NetworkAllowList != "" {
		if err := checkAllowList(*req.NetworkAllowList); err != nil {
			return reply{}, err
		}
	}
	warnDomainAllowList(c, req.DomainAllowList)
	tbx := s.toolboxProxyURL(c.r)
	var id string
	rep, err := s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if req.NetworkBlockAll != nil {
			sb.NetworkBlockAll = *req.NetworkBlockAll
		}
		if req.NetworkAllowList != nil {
			v := *req.NetworkAllowList
			sb.NetworkAllowList = &v
		}
		if req.DomainAllowList != nil {
			v := *req.DomainAllowList
			sb.DomainAllowList = &v
		}
		sb.UpdatedAt = s.clk.Now()
		id = sb.ID
		return reply{http.StatusOK, sb.dto(tbx, false)}, nil
	})
	if err != nil {
		return rep, err
	}
	if s.egress != nil {
		// The secrets proxy's pooled connections must not outlive the
		// settings they were dialled under.
		s.egress.Redial(id)
	}
	note, aerr := s.eng.enforceNetwork(c.ctx(), id)
	if aerr != nil {
		return reply{}, errorf(http.StatusInternalServerError, "apply the network settings: %v", aerr)
	}
	if note != "" {
		c.w.Header().Add(warningHeader, note)
	}
	return rep, nil
}

// warnDomainAllowList says, for a request that sets one, that the domain
// allow list is kept and not enforced: no backend resolves what a
// sandbox looks up.
func warnDomainAllowList(c *call, list *string) {
	if list != nil && *list != "" {
		c.w.Header().Add(warningHeader, "domainAllowList is recorded but not enforced: the simulator does not filter by domain")
	}
}

// enforceNetwork applies the sandbox's network settings, as they are now,
// to its running workload; a workload that is not running gets them at its
// next start. Changes are applied one at a time, each reading the settings
// anew, so that the last ones stored are the ones in force, however
// requests and starts interleave. The note says what the backend does not
// enforce.
func (s reconciler) enforceNetwork(ctx context.Context, id string) (note string, err error) {
	nb, ok := s.backend.(NetworkBackend)
	if !ok {
		return backend.NetworkNote(s.backend), nil
	}
	s.netMu.Lock()
	defer s.netMu.Unlock()
	s.mu.RLock()
	sb := s.rows.Get(id)
	running := sb != nil && !sb.gone && sb.State == stStarted && sb.toolboxURL != ""
	var policy NetworkPolicy
	if running {
		policy = sb.policy()
	}
	s.mu.RUnlock()
	if !running {
		return "", nil
	}
	return nb.ApplyNetwork(ctx, id, policy)
}

// policy is the sandbox's network settings for the backend.
func (sb *sandbox) policy() NetworkPolicy {
	p := NetworkPolicy{BlockAll: sb.NetworkBlockAll}
	if sb.NetworkAllowList != nil {
		p.AllowList = *sb.NetworkAllowList
	}
	return p
}

// sshAccess is one SSH access token of a sandbox.
type sshAccess struct {
	ID, SandboxID, Token string
	CreatedAt, ExpiresAt time.Time
}

type sshAccessDTO struct {
	ID         string `json:"id"`
	SandboxID  string `json:"sandboxId"`
	Token      string `json:"token"`
	ExpiresAt  string `json:"expiresAt"`
	CreatedAt  string `json:"createdAt"`
	UpdatedAt  string `json:"updatedAt"`
	SSHCommand string `json:"sshCommand"`
}

// sshGatewayPort is the port of Daytona's SSH gateway, for sshCommand.
const sshGatewayPort = 22222

// createSSHAccess makes a token that validateSshAccess accepts, and the
// SSH gateway opens, until it expires (default 60 minutes). sshCommand
// names the gateway's port; a simulator that serves none (ServeSSH was not
// called) says so in warningHeader.
func (s extraAPI) createSSHAccess(c *call) (reply, *apiError) {
	minutes := 60.0
	if v := c.r.URL.Query().Get("expiresInMinutes"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 24*60 {
			return reply{}, errorf(http.StatusBadRequest, "expiresInMinutes must be between 1 and 1440")
		}
		minutes = f
	}
	host := "localhost"
	if u, err := url.Parse(s.baseURL(c.r)); err == nil {
		host = u.Hostname()
	}
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		now := s.clk.Now()
		a := &sshAccess{ID: s.newID(), SandboxID: sb.ID, Token: newToken(32, signedAlphabet), CreatedAt: now,
			ExpiresAt: now.Add(time.Duration(minutes * float64(time.Minute)))}
		s.ssh[a.Token] = a
		port, served := s.sshCommandPort()
		if !served {
			c.w.Header().Add(warningHeader, "this simulator serves no SSH gateway: the token validates, but nothing answers ssh; run sandplane sim, whose gateway --ssh-listen places")
		}
		return reply{http.StatusOK, sshAccessDTO{ID: a.ID, SandboxID: sb.ID, Token: a.Token, ExpiresAt: iso(a.ExpiresAt),
			CreatedAt: iso(now), UpdatedAt: iso(now),
			SSHCommand: "ssh -p " + strconv.Itoa(port) + " " + a.Token + "@" + host}}, nil
	})
}

// revokeSSHAccess revokes one token of the sandbox, or all of them when
// the call names none, and answers the sandbox.
func (s extraAPI) revokeSSHAccess(c *call) (reply, *apiError) {
	token := c.r.URL.Query().Get("token")
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		for t, a := range s.ssh {
			if a.SandboxID == sb.ID && (token == "" || subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1) {
				delete(s.ssh, t)
			}
		}
		return reply{http.StatusOK, sb.dto(tbx, false)}, nil
	})
}

// validateSSHAccess answers whether a token is live, and for which of the
// caller's sandboxes.
func (s extraAPI) validateSSHAccess(c *call) (reply, *apiError) {
	token := c.r.URL.Query().Get("token")
	if token == "" {
		return reply{}, errorf(http.StatusBadRequest, "token should not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.ssh[token]
	valid := false
	id := ""
	if a != nil {
		sb := s.lookupID(c.org, a.SandboxID)
		if sb != nil && s.clk.Now().Before(a.ExpiresAt) {
			valid, id = true, sb.ID
		}
		if !s.clk.Now().Before(a.ExpiresAt) {
			delete(s.ssh, token)
		}
	}
	return reply{http.StatusOK, map[string]any{"valid": valid, "sandboxId": id}}, nil
}

type paginated[T any] struct {
	Items      []T `json:"items"`
	Total      int `json:"total"`
	Page       int `json:"page"`
	TotalPages int `json:"totalPages"`
}

// The telemetry routes answer as Daytona does for a sandbox that exported
// nothing: the simulator collects no OpenTelemetry data.
func (s extraAPI) telemetryLogs(c *call) (reply, *apiError) {
	if err := telemetryRange(c); err != nil {
		return reply{}, err
	}
	return reply{http.StatusOK, paginated[any]{Items: []any{}, Page: pageOf(c)}}, nil
}

func (s extraAPI) telemetryTraces(c *call) (reply, *apiError) {
	if err := telemetryRange(c); err != nil {
		return reply{}, err
	}
	return reply{http.StatusOK, paginated[any]{Items: []any{}, Page: pageOf(c)}}, nil
}

func (s extraAPI) telemetrySpans(c *call) (reply, *apiError) {
	return reply{http.StatusOK, []any{}}, nil
}

func (s extraAPI) telemetryMetrics(c *call) (reply, *apiError) {
	if err := telemetryRange(c); err != nil {
		return reply{}, err
	}
	return reply{http.StatusOK, map[string]any{"series": []any{}}}, nil
}

// telemetryRange checks from and to, which the validator has seen present.
func telemetryRange(c *call) *apiError {
	q := c.r.URL.Query()
	from, err1 := time.Parse(time.RFC3339Nano, q.Get("from"))
	to, err2 := time.Parse(time.RFC3339Nano, q.Get("to"))
	if err1 != nil || err2 != nil {
		return errorf(http.StatusBadRequest, "from and to must be ISO 8601 date-time strings")
	}
	if to.Before(from) {
		return errorf(http.StatusBadRequest, "to must not be before from")
	}
	return nil
}

func pageOf(c *call) int {
	if n, err := strconv.Atoi(c.r.URL.Query().Get("page")); err == nil && n > 0 {
		return n
	}
	return 1
}

// sandboxBuildLogs answers the deprecated build-logs route and the URL of
// getBuildLogsUrl: what building the sandbox's image printed, as plain
// text; with follow=true, as it prints it, until the build ends.
func (s extraAPI) sandboxBuildLogs(c *call) (reply, *apiError) {
	var logs *liveLog
	rep, err := s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.BuildInfo == nil {
			return reply{}, errorf(http.StatusNotFound, "Sandbox %s has no build info", c.params["sandboxIdOrName"])
		}
		logs = sb.buildLogs
		return reply{}, nil
	})
	if err != nil {
		return rep, err
	}
	serveLogs(c.w, c.r, logs, "")
	return reply{status: rawReply}, nil
}

// resolveLinkLocked checks a create's linkedSandbox: a sandbox of the same
// organization that is not itself linked. Called with s.mu held.
func (s creation) resolveLinkLocked(org, idOrName string) (*sandbox, *apiError) {
	owner, err := s.lookup(org, idOrName)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "Linked sandbox %s not found", idOrName)
	}
	if owner.LinkedSandboxID != nil {
		return nil, errorf(http.StatusBadRequest, "Sandbox %s is itself linked to another sandbox", idOrName)
	}
	if owner.Desired == dsDestroyed {
		return nil, errorf(http.StatusBadRequest, "Linked sandbox %s is being deleted", idOrName)
	}
	return owner, nil
}

// cascadeDeleteLocked deletes the sandboxes linked to owner with it.
// Called with s.mu held.
func (s reconciler) cascadeDeleteLocked(owner *sandbox) {
	for _, sb := range s.rows.LinkedTo(owner.ID) {
		if sb.gone || sb.LinkedSandboxID == nil || *sb.LinkedSandboxID != owner.ID || sb.Desired == dsDestroyed {
			continue
		}
		sb.gen++ // drop a step in flight: the delete wins
		sb.busy = false
		s.softDeleteLocked(sb)
		s.eng.kick(sb)
	}
}

// workloadLocked is what the backend runs for sb. Called with s.mu held.
func (s reconciler) workloadLocked(sb *sandbox) Workload {
	w := Workload{SandboxID: sb.ID, User: sb.User, Env: copyMap(sb.Env), Labels: copyMap(sb.Labels),
		Image: sb.imageRef, Network: sb.policy(), CPU: sb.CPU, Memory: sb.Memory, Egress: s.egressLocked(sb),
		ForkOf: sb.forkParent}
	if sb.Snapshot != nil {
		w.Snapshot = *sb.Snapshot
		if sn := snapshotsOf(s.Simulator).findSnapshotLocked(sb.OrgID, *sb.Snapshot); sn != nil {
			w.Entrypoint = slices.Clone(sn.Entrypoint)
		}
	}
	for _, m := range sb.Volumes {
		vm := VolumeMount{VolumeID: m.VolumeID, MountPath: m.MountPath}
		if m.Subpath != nil {
			vm.Subpath = *m.Subpath
		}
		w.Volumes = append(w.Volumes, vm)
	}
	if sb.LinkedSandboxID != nil {
		if owner := s.rows.Get(*sb.LinkedSandboxID); owner != nil && !owner.gone {
			w.Link = &Link{OwnerID: owner.ID, OwnerName: owner.Name}
		}
	}
	return w
}

// resizeRequest is the ResizeSandbox body.
type resizeRequest struct {
	CPU    *int `json:"cpu"`
	Memory *int `json:"memory"`
	Disk   *int `json:"disk"`
}

// resizeSandbox changes cpu and memory (on a started or stopped sandbox)
// and grows the disk (stopped only). A running workload gets the new CPU
// and memory at once where the backend can (ResizeBackend), otherwise at
// its next start, which the answer's warning says.
func (s sandboxAPI) resizeSandbox(c *call) (reply, *apiError) {
	if s.cfg.DisableResize {
		return reply{}, errorf(http.StatusNotFound, "Cannot POST %s", c.r.URL.Path)
	}
	var req resizeRequest
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	for _, v := range []struct {
		name string
		v    *int
	}{{"cpu", req.CPU}, {"memory", req.Memory}, {"disk", req.Disk}} {
		if v.v != nil && *v.v < 1 {
			return reply{}, errorf(http.StatusBadRequest, "%s must not be less than 1", v.name)
		}
	}
	if req.CPU == nil && req.Memory == nil && req.Disk == nil {
		return reply{}, errorf(http.StatusBadRequest, "At least one of cpu, memory or disk must be given")
	}
	tbx := s.toolboxProxyURL(c.r)
	var live bool
	var id string
	rep, err := s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.errored() {
			return reply{}, errorf(http.StatusBadRequest, msgErrored)
		}
		if sb.inFlight() || sb.busy {
			return reply{}, errorf(http.StatusConflict, msgInProgress)
		}
		if sb.State != stStarted && sb.State != stStopped {
			return reply{}, errorf(http.StatusBadRequest, "Sandbox must be started or stopped to be resized")
		}
		if req.Disk != nil && *req.Disk != sb.Disk {
			if *req.Disk < sb.Disk {
				return reply{}, errorf(http.StatusBadRequest, "Disk size cannot be decreased")
			}
			if sb.State != stStopped {
				return reply{}, errorf(http.StatusBadRequest, "Sandbox must be stopped to resize its disk")
			}
			sb.Disk = *req.Disk
		}
		if req.CPU != nil {
			sb.CPU = *req.CPU
		}
		if req.Memory != nil {
			sb.Memory = *req.Memory
		}
		sb.ledger.CPU, sb.ledger.Memory, sb.ledger.Disk = sb.CPU, sb.Memory, sb.Disk
		sb.UpdatedAt = s.clk.Now()
		live, id = sb.State == stStarted && sb.toolboxURL != "", sb.ID
		return reply{http.StatusOK, sb.dto(tbx, false)}, nil
	})
	if err != nil {
		return rep, err
	}
	rb, ok := s.backend.(ResizeBackend)
	switch {
	case !ok:
		c.w.Header().Add(warningHeader, "the "+s.backend.Name()+" backend does not limit CPU or memory: the new values are recorded only")
	case live && (req.CPU != nil || req.Memory != nil):
		if err := rb.Resize(c.ctx(), id, ptrOr(req.CPU, 0), ptrOr(req.Memory, 0)); err != nil {
			return reply{}, errorf(http.StatusInternalServerError, "resize the workload: %v", err)
		}
	}
	return rep, nil
}

// createChecksLocked resolves what a create names beyond itself: the
// snapshot (with the image it runs), the volumes, the linked sandbox.
// Called with s.mu held.
func (s creation) createChecksLocked(org string, req createRequest, build bool) (snap Snapshot, ref string, owner *sandbox, err *apiError) {
	if build {
		if err := snapshotsOf(s.Simulator).buildRefused(); err != nil {
			return Snapshot{}, "", nil, err
		}
	} else {
		name := s.cfg.DefaultSnapshot
		if req.Snapshot != nil && *req.Snapshot != "" {
			name = *req.Snapshot
		}
		sn, err := snapshotsOf(s.Simulator).sandboxSnapshotLocked(org, name)
		if err != nil {
			return Snapshot{}, "", nil, err
		}
		snap = Snapshot{Name: sn.Name, CPU: sn.CPU, GPU: sn.GPU, Memory: sn.Mem, Disk: sn.Disk}
		ref = sn.ref
	}
	if err := volumesOf(s.Simulator).checkVolumesLocked(org, req.Volumes); err != nil {
		return Snapshot{}, "", nil, err
	}
	if req.LinkedSandbox != nil && *req.LinkedSandbox != "" {
		o, err := s.resolveLinkLocked(org, *req.LinkedSandbox)
		if err != nil {
			return Snapshot{}, "", nil, err
		}
		owner = o
	}
	return snap, ref, owner, nil
}

// buildRefused is the answer to a declarative build (buildInfo: Dockerfile
// content) on a backend that runs real workloads but no images (native):
// nothing there could run what the Dockerfile describes, so the create is
// refused, as Daytona refuses what its runners cannot do, rather than run
// the default workload under the image's name. The none backend, a pure
// state machine, keeps the build as a record.
func (s snapshotAPI) buildRefused() *apiError {
	if _, ok := s.backend.(ImageBackend); ok || s.backend.Name() == "none" {
		return nil
	}
	return errorf(http.StatusBadRequest,
		"Building an image from a Dockerfile (buildInfo) is not available on the %s backend, whose sandboxes run host processes rather than images: run the simulator with --backend docker, or create the sandbox from a snapshot",
		s.backend.Name())
}

// buildWork is the image build of a create with buildInfo: a real build on
// an ImageBackend, whose reference the sandbox then runs; nothing
// elsewhere. Its logs are the sandbox's build logs. Called with s.mu held.
func (s reconciler) buildWork(sb *sandbox) func(ctx context.Context) (string, error) {
	ib, ok := s.backend.(ImageBackend)
	if !ok || sb.BuildInfo == nil {
		return nil
	}
	logs := newLiveLog()
	sb.buildLogs = logs
	spec := ImageSpec{SnapshotID: sb.ID, Dockerfile: sb.BuildInfo.DockerfileContent, Logs: logs}
	return func(ctx context.Context) (string, error) {
		defer logs.finish()
		ref, _, err := ib.PrepareImage(ctx, spec)
		if err != nil {
			// Followers read why it failed at the end, as the state says.
			_, _ = io.WriteString(logs, "build failed: "+err.Error()+"\n")
		}
		return ref, err
	}
}
