package simulator

import (
	"net/http"
	"slices"
)

// Forks, as the v0.205.1 API and the SDK's sandbox.fork document them: a
// fork is a new sandbox (its own id, name, ports, activity and costs)
// whose filesystem starts as a copy of its source's and goes its own way
// from there; the fork starts, and a started source keeps running. The
// backend copies the files at the fork's first start (Workload.ForkOf),
// which the fork call waits for, so a reply means that the copy is made.
// The lineage is kept on the fork (forkParent) and answers forks, parent
// and ancestors while the sandboxes in it exist.

// forkRequest is the ForkSandbox body.
type forkRequest struct {
	Name *string `json:"name"`
}

// forkSandbox makes a fork of a started or stopped sandbox and answers it
// once started, as a create does.
func (s extraAPI) forkSandbox(c *call) (reply, *apiError) {
	var req forkRequest
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	tbx := s.toolboxProxyURL(c.r)
	s.mu.Lock()
	src, aerr := s.lookup(c.org, c.params["sandboxIdOrName"])
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	c.sandboxID = src.ID
	fork, aerr := s.forkLocked(c, src, req)
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	s.eng.kick(fork)
	s.mu.Unlock()
	return sandboxesOf(s.Simulator).replyStarted(c, fork, tbx, true)
}

// forkCheckLocked says why src cannot be forked now, nil when it can:
// the fork copies files that stand still or a running workload's, so the
// source is started or stopped, not on its way elsewhere. Called with s.mu
// held.
func forkCheckLocked(src *sandbox) *apiError {
	switch {
	case src.inFlight():
		return errorf(http.StatusConflict, "%s: wait until the sandbox is started or stopped, then fork it", msgInProgress)
	case src.State == stPaused:
		return errorf(http.StatusBadRequest, "Sandbox %s is paused: resume it (start) before forking it", src.ID)
	case src.State != stStarted && src.State != stStopped:
		return errorf(http.StatusBadRequest, "Sandbox %s is %s: only a started or stopped sandbox can be forked", src.ID, src.State)
	}
	return nil
}

// forkLocked checks the fork's name and the source's state and makes the
// fork: a new sandbox with the source's snapshot, image, user, env,
// labels, resources, network settings, intervals and volumes. Called
// with s.mu held.
func (s extraAPI) forkLocked(c *call, src *sandbox, req forkRequest) (*sandbox, *apiError) {
	name := ""
	if req.Name != nil {
		name = *req.Name
	}
	if unsafeName.MatchString(name) {
		return nil, errorf(http.StatusBadRequest, "name must not contain HTML tags, URLs, or control characters")
	}
	if other := s.rows.ByName(c.org, name); name != "" && other != nil && !other.gone {
		return nil, errorf(http.StatusConflict, "Sandbox with name %s already exists: choose another name for the fork", name)
	}
	if aerr := forkCheckLocked(src); aerr != nil {
		return nil, aerr
	}
	snap := Snapshot{CPU: src.CPU, GPU: src.GPU, Memory: src.Memory, Disk: src.Disk}
	if src.Snapshot != nil {
		snap.Name = *src.Snapshot
	}
	fork := s.eng.newSandboxLocked(c.org, name, snap)
	copyForkedLocked(fork, src)
	creation{s.Simulator}.announceCreateLocked(c, fork)
	return fork, nil
}

// copyForkedLocked gives fork what it inherits from src. Called with s.mu
// held.
func copyForkedLocked(fork, src *sandbox) {
	if src.Snapshot == nil {
		fork.Snapshot = nil
	}
	fork.User, fork.Env, fork.Labels, fork.Public = src.User, copyMap(src.Env), copyMap(src.Labels), src.Public
	fork.Target, fork.GPUType = src.Target, copyPtr(src.GPUType)
	fork.NetworkBlockAll, fork.NetworkAllowList, fork.DomainAllowList = src.NetworkBlockAll, copyPtr(src.NetworkAllowList), copyPtr(src.DomainAllowList)
	fork.AutoStop, fork.AutoArchive, fork.AutoDelete, fork.AutoPause = src.AutoStop, src.AutoArchive, src.AutoDelete, src.AutoPause
	fork.Volumes = slices.Clone(src.Volumes)
	fork.imageRef = src.imageRef
	fork.forkParent = src.ID
}

// getSandboxForks lists the sandbox's forks, oldest first.
func (s extraAPI) getSandboxForks(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		forks := []sandboxDTO{}
		for _, f := range s.forksOfLocked(sb) {
			forks = append(forks, f.dto(tbx, false))
		}
		return reply{http.StatusOK, forks}, nil
	})
}

// forksOfLocked are the live forks of sb, oldest first. Called with s.mu
// held.
func (s extraAPI) forksOfLocked(sb *sandbox) []*sandbox {
	var out []*sandbox
	for r := range s.rows.All() {
		if r.forkParent == sb.ID && r.OrgID == sb.OrgID && !r.gone {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *sandbox) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// getSandboxParent answers the sandbox a fork was made from; 404 for a
// sandbox that is no fork, or whose parent is deleted.
func (s extraAPI) getSandboxParent(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		if sb.forkParent == "" {
			return reply{}, errorf(http.StatusNotFound, "Sandbox %s has no parent: it is not a fork", c.params["sandboxIdOrName"])
		}
		parent := s.lookupID(sb.OrgID, sb.forkParent)
		if parent == nil {
			return reply{}, errorf(http.StatusNotFound, "The parent of sandbox %s (%s) was deleted", c.params["sandboxIdOrName"], sb.forkParent)
		}
		return reply{http.StatusOK, parent.dto(tbx, false)}, nil
	})
}

// getSandboxAncestors answers the sandbox's parent, its parent's parent,
// and so on, nearest first, up to the first that is deleted.
func (s extraAPI) getSandboxAncestors(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		out := []sandboxDTO{}
		for id := sb.forkParent; id != ""; {
			parent := s.lookupID(sb.OrgID, id)
			if parent == nil {
				break
			}
			out = append(out, parent.dto(tbx, false))
			id = parent.forkParent
		}
		return reply{http.StatusOK, out}, nil
	})
}
