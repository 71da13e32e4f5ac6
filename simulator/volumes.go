package simulator

import (
	"context"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"
)

// volumeAPI serves the volume routes and keeps the volume records
// (Simulator.vols, volNames), over the simulator's store lock.
type volumeAPI struct{ *Simulator }

func volumesOf(s *Simulator) volumeAPI { return volumeAPI{s} }

// Volume states (VolumeState).
const (
	volPendingCreate = "pending_create"
	volCreating      = "creating"
	volReady         = "ready"
	volPendingDelete = "pending_delete"
	volDeleting      = "deleting"
	volDeleted       = "deleted"
	volError         = "error"
)

// volumeRec is one volume of an organization. Guarded by Simulator.mu.
type volumeRec struct {
	ID, OrgID, Name string
	State           string
	ErrorReason     *string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	LastUsedAt      *time.Time
}

// volumeDTO is the VolumeDto schema.
type volumeDTO struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	OrganizationID string  `json:"organizationId"`
	State          string  `json:"state"`
	CreatedAt      string  `json:"createdAt"`
	UpdatedAt      string  `json:"updatedAt"`
	LastUsedAt     *string `json:"lastUsedAt"`
	ErrorReason    *string `json:"errorReason"`
}

func (v *volumeRec) dto() volumeDTO {
	d := volumeDTO{ID: v.ID, Name: v.Name, OrganizationID: v.OrgID, State: v.State,
		CreatedAt: iso(v.CreatedAt), UpdatedAt: iso(v.UpdatedAt), ErrorReason: v.ErrorReason}
	if v.LastUsedAt != nil {
		t := iso(*v.LastUsedAt)
		d.LastUsedAt = &t
	}
	return d
}

// volumeEvent is the payload of volume.state.updated.
type volumeEvent struct {
	Volume   volumeDTO `json:"volume"`
	OldState string    `json:"oldState"`
	NewState string    `json:"newState"`
}

func (s volumeAPI) setVolumeState(v *volumeRec, state string) {
	if v.State == state {
		return
	}
	old := v.State
	v.State = state
	v.UpdatedAt = s.clk.Now()
	s.events.emit(v.OrgID, EventVolumeStateUpdated, volumeEvent{Volume: v.dto(), OldState: old, NewState: state})
}

func volumeNotFound(idOrName string) *apiError {
	return errorf(http.StatusNotFound, "Volume %s not found", idOrName)
}

// volumeLocked finds a volume of org by id (byName: by name), deleted
// ones excluded.
func (s volumeAPI) volumeLocked(org, key string, byName bool) *volumeRec {
	var v *volumeRec
	if byName {
		v = s.volNames[nameKey(org, key)]
	} else {
		v = s.vols[key]
	}
	if v == nil || v.OrgID != org || v.State == volDeleted {
		return nil
	}
	return v
}

func (s volumeAPI) createVolume(c *call) (reply, *apiError) {
	var req struct {
		Name string `json:"name"`
	}
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	name := strings.TrimSpace(req.Name)
	switch {
	case name == "":
		return reply{}, errorf(http.StatusBadRequest, "name should not be empty")
	case unsafeName.MatchString(name) || strings.ContainsAny(name, "/\\"):
		return reply{}, errorf(http.StatusBadRequest, "name must not contain HTML tags, URLs, slashes or control characters")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.volumeLocked(c.org, name, true) != nil {
		return reply{}, errorf(http.StatusConflict, "Volume with name %s already exists", name)
	}
	now := s.clk.Now()
	v := &volumeRec{ID: s.newID(), OrgID: c.org, Name: name, State: volPendingCreate, CreatedAt: now, UpdatedAt: now}
	s.vols[v.ID] = v
	s.volNames[nameKey(c.org, name)] = v
	d := v.dto()
	s.events.emit(c.org, EventVolumeCreated, d)
	vb, real := s.backend.(VolumeBackend)
	if !real {
		c.w.Header().Add(warningHeader, "the "+s.backend.Name()+" backend keeps volumes as records: nothing is mounted into sandboxes")
	}
	delay := s.cfg.Profile.Create.Draw(s.rng)
	s.goBackground(func(ctx context.Context) {
		s.mu.Lock()
		s.setVolumeState(v, volCreating)
		s.mu.Unlock()
		var err error
		if real {
			err = vb.CreateVolume(ctx, v.ID)
		}
		if delay > 0 {
			_ = clockSleep(ctx, s.Simulator, delay)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if v.State != volCreating {
			return
		}
		if err != nil {
			reason := err.Error()
			v.ErrorReason = &reason
			s.setVolumeState(v, volError)
			return
		}
		s.setVolumeState(v, volReady)
	})
	return reply{http.StatusOK, d}, nil
}

func (s volumeAPI) listVolumes(c *call) (reply, *apiError) {
	withDeleted := c.r.URL.Query().Get("includeDeleted") == "true"
	s.mu.Lock()
	out := []volumeDTO{}
	var all []*volumeRec
	for _, v := range s.vols {
		if v.OrgID == c.org && (withDeleted || v.State != volDeleted) {
			all = append(all, v)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID < all[j].ID
	})
	for _, v := range all {
		out = append(out, v.dto())
	}
	s.mu.Unlock()
	return reply{http.StatusOK, out}, nil
}

func (s volumeAPI) getVolume(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.volumeLocked(c.org, c.params["volumeId"], false)
	if v == nil {
		return reply{}, volumeNotFound(c.params["volumeId"])
	}
	return reply{http.StatusOK, v.dto()}, nil
}

func (s volumeAPI) getVolumeByName(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.volumeLocked(c.org, c.params["name"], true)
	if v == nil {
		return reply{}, errorf(http.StatusNotFound, "Volume with name %s not found", c.params["name"])
	}
	return reply{http.StatusOK, v.dto()}, nil
}

// deleteVolume refuses a volume that a sandbox still mounts (409), then
// deletes it: pending_delete, deleting, deleted.
func (s volumeAPI) deleteVolume(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.volumeLocked(c.org, c.params["volumeId"], false)
	if v == nil {
		return reply{}, volumeNotFound(c.params["volumeId"])
	}
	if v.State != volReady && v.State != volError {
		return reply{}, errorf(http.StatusConflict, "Volume %s is in state %s and cannot be deleted", v.Name, v.State)
	}
	for sb := range s.rows.All() {
		if sb.gone || sb.OrgID != v.OrgID || sb.State == stDestroyed {
			continue
		}
		for _, m := range sb.Volumes {
			if m.VolumeID == v.ID {
				return reply{}, errorf(http.StatusConflict, "Volume %s is in use by sandbox %s", v.Name, sb.ID)
			}
		}
	}
	s.setVolumeState(v, volPendingDelete)
	vb, real := s.backend.(VolumeBackend)
	s.goBackground(func(ctx context.Context) {
		s.mu.Lock()
		s.setVolumeState(v, volDeleting)
		s.mu.Unlock()
		var err error
		if real {
			err = vb.RemoveVolume(ctx, v.ID)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			reason := err.Error()
			v.ErrorReason = &reason
			s.setVolumeState(v, volError)
			return
		}
		delete(s.volNames, nameKey(v.OrgID, v.Name))
		s.setVolumeState(v, volDeleted)
	})
	return reply{status: http.StatusOK}, nil
}

// checkVolumesLocked validates a create's volumes: each one the
// organization's (by id or name, resolved to the id in mounts) and ready,
// each mount path absolute, clean and not the root, no path twice. It
// stamps lastUsedAt. Called with s.mu held.
func (s volumeAPI) checkVolumesLocked(org string, mounts []volume) *apiError {
	seen := map[string]bool{}
	for i, m := range mounts {
		v := s.volumeLocked(org, m.VolumeID, false)
		if v == nil {
			v = s.volumeLocked(org, m.VolumeID, true)
		}
		if v == nil {
			return volumeNotFound(m.VolumeID)
		}
		mounts[i].VolumeID = v.ID
		if v.State != volReady {
			return errorf(http.StatusBadRequest, "Volume %s is not in a ready state. Current state: %s", v.Name, v.State)
		}
		p := m.MountPath
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return errorf(http.StatusBadRequest, "Invalid mount path %s: it must be an absolute, clean path other than /", p)
		}
		if m.Subpath != nil && (path.IsAbs(*m.Subpath) || strings.HasPrefix(path.Clean(*m.Subpath), "..")) {
			return errorf(http.StatusBadRequest, "Invalid subpath %s: it must be relative and stay inside the volume", *m.Subpath)
		}
		if seen[p] {
			return errorf(http.StatusBadRequest, "Mount path %s is used twice", p)
		}
		seen[p] = true
	}
	now := s.clk.Now()
	for _, m := range mounts {
		v := s.vols[m.VolumeID]
		v.LastUsedAt = &now
		s.events.emit(org, EventVolumeLastUsedAtUpdated, v.dto())
	}
	return nil
}
