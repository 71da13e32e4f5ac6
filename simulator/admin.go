package simulator

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sandplane/sandplane/simulator/internal/cost"
)

// Info describes a running simulator (GET /_sim/info).
type Info struct {
	Profile string `json:"profile"`
	Backend string `json:"backend"`
	Minute  string `json:"minute"`
	Seed    uint64 `json:"seed"`
	// Sandboxes counts the sandboxes of the call's organization (or of
	// every one, for org=all); absent when the call names none.
	Sandboxes      *int            `json:"sandboxes,omitempty"`
	Validation     bool            `json:"validation"`
	SpecExceptions []SpecException `json:"specExceptions"`
}

const (
	// AdminOrgParam names the organization an admin call acts on: an
	// organizationId, or AllOrgs.
	AdminOrgParam = "org"
	// AllOrgs is the AdminOrgParam value of a call that acts on every
	// organization.
	AllOrgs = "all"
	// AdminAPIKeyHeader carries an API key whose organization an admin call
	// acts on, in place of AdminOrgParam.
	AdminAPIKeyHeader = "X-Sim-Api-Key"
)

// scope is the organizations an admin call acts on: one, or all.
type scope struct {
	org string
	all bool
}

// everyOrg is the scope of the Go API, which the embedding test owns.
var everyOrg = scope{all: true}

// owns reports whether state of org (or global state, for "") is in sc.
// A single organization's scope never owns global state.
func (sc scope) owns(org string) bool { return sc.all || org != "" && org == sc.org }

// faultOrg is the Org a fault added in sc gets: "" (everyone) for all.
func (sc scope) faultOrg() string { return sc.org }

// scope reads the organization an admin call names. ok is false when it
// names none.
func (a adminAPI) scope(r *http.Request) (sc scope, ok bool, e *apiError) {
	param := r.URL.Query().Get(AdminOrgParam)
	key := r.Header.Get(AdminAPIKeyHeader)
	if param == AllOrgs {
		if key != "" {
			return scope{}, false, errorf(http.StatusBadRequest, "org=all acts on every organization: drop the %s header", AdminAPIKeyHeader)
		}
		return everyOrg, true, nil
	}
	if key != "" {
		if len(a.s.cfg.APIKeys) > 0 && !containsSecret(a.s.cfg.APIKeys, key) {
			return scope{}, false, errorf(http.StatusUnauthorized, "the %s header holds no accepted API key", AdminAPIKeyHeader)
		}
		org := a.s.orgNames.of(key)
		if param != "" && param != org {
			return scope{}, false, errorf(http.StatusBadRequest, "org=%s is not the organization of the API key in %s", param, AdminAPIKeyHeader)
		}
		return scope{org: org}, true, nil
	}
	if param != "" {
		return scope{org: param}, true, nil
	}
	return scope{}, false, nil
}

// errNoScope is the answer to an admin call that changes or reads an
// organization's state without naming one.
var errNoScope = errorf(http.StatusBadRequest,
	"an admin call acts on one organization: name it with ?%s=ORGANIZATION_ID or the header %s set to one of its API keys, or ask for every organization with ?%s=%s",
	AdminOrgParam, AdminAPIKeyHeader, AdminOrgParam, AllOrgs)

// AdminKey is the bearer key of the admin API: Config.AdminKey, or the one
// New generated.
func (s *Simulator) AdminKey() string { return s.cfg.AdminKey }

// adminRoutes serves the test-facing API under /_sim/. Every call needs
// Authorization: Bearer <admin key> and, except GET /_sim/info, names the
// organization it acts on (?org=<organizationId>, the header X-Sim-Api-Key:
// <API key>, or ?org=all for every organization):
//
//	GET    /_sim/info                      profile, backend, counts, spec exceptions
//	GET    /_sim/faults                    scripted faults
//	POST   /_sim/faults                    add one Fault or a list of them (201)
//	DELETE /_sim/faults                    clear scripted and random faults
//	PUT    /_sim/faults/random             set RandomFaults; DELETE turns them off
//	GET    /_sim/calls                     the call log and per-operation counts
//	DELETE /_sim/calls                     clear the call log
//	GET    /_sim/cost                      CostReport; query overrides the prices, limit and cursor page its rows
//	POST   /_sim/sandboxes/{id}/vanish     make a sandbox disappear
//	POST   /_sim/jobs/run                  run the auto-stop/archive/delete jobs now
//	GET    /_sim/webhooks                  webhook endpoints and every delivery attempt
//	PUT    /_sim/webhooks                  replace the endpoints and/or the secret (org=all)
//
// Errors have the main API's NestJS body and status (writeAPIError).
func (s *Simulator) adminRoutes(mux *http.ServeMux) {
	a := adminAPI{s}
	for _, rt := range a.routes() {
		mux.HandleFunc(rt.pattern, a.guard(rt))
	}
}

// adminAPI is the admin API's handlers, over the simulator they act on.
type adminAPI struct{ s *Simulator }

// adminRoute is one route of the admin API. A scoped route needs the
// organization it acts on; an unscoped one gets the scope the call names,
// if any (scoped tells).
type adminRoute struct {
	pattern string
	scoped  bool
	serve   func(w http.ResponseWriter, r *http.Request, sc scope, scoped bool)
}

// routes is the admin API's route table.
func (a adminAPI) routes() []adminRoute {
	return []adminRoute{
		{"GET /_sim/info", false, a.info},
		{"GET /_sim/faults", true, a.listFaults},
		{"POST /_sim/faults", true, a.addFaults},
		{"DELETE /_sim/faults", true, a.clearFaults},
		{"PUT /_sim/faults/random", true, a.setRandomFaults},
		{"DELETE /_sim/faults/random", true, a.clearRandomFaults},
		{"GET /_sim/calls", true, a.listCalls},
		{"DELETE /_sim/calls", true, a.clearCalls},
		{"GET /_sim/cost", true, a.cost},
		{"POST /_sim/sandboxes/{id}/vanish", true, a.vanish},
		{"POST /_sim/jobs/run", true, a.runJobs},
		{"GET /_sim/webhooks", true, a.webhookStatus},
		{"PUT /_sim/webhooks", true, a.setWebhooks},
	}
}

// guard serves rt after the admin key and the scope are checked.
func (a adminAPI) guard(rt adminRoute) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.authorised(w, r) {
			return
		}
		sc, scoped, err := a.scope(r)
		if err == nil && rt.scoped && !scoped {
			err = errNoScope
		}
		if err != nil {
			a.s.writeAPIError(w, r, err)
			return
		}
		rt.serve(w, r, sc, scoped)
	}
}

// authorised reports whether r carries the admin key, answering it when
// not.
func (a adminAPI) authorised(w http.ResponseWriter, r *http.Request) bool {
	if subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(a.s.cfg.AdminKey)) != 1 {
		a.s.writeAPIError(w, r, errorf(http.StatusUnauthorized,
			"the admin API wants the simulator's admin key as its bearer token (--admin-key, $SANDPLANE_SIM_ADMIN_KEY, or the one sandplane sim printed at start)"))
		return false
	}
	return true
}

func (a adminAPI) info(w http.ResponseWriter, r *http.Request, sc scope, scoped bool) {
	s := a.s
	info := Info{Profile: s.cfg.Profile.Name, Backend: s.backend.Name(), Minute: s.cfg.Minute.String(),
		Seed: s.cfg.Seed, Validation: s.spec != nil && !s.cfg.DisableValidation, SpecExceptions: SpecExceptions()}
	if scoped {
		s.mu.RLock()
		n := s.rows.CountOrgs(func(org string) bool { return !isPoolOrg(org) && sc.owns(org) })
		s.mu.RUnlock()
		info.Sandboxes = &n
	}
	writeJSON(w, http.StatusOK, info)
}

func (a adminAPI) listFaults(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	writeJSON(w, http.StatusOK, a.s.faults.Snapshot(sc.owns))
}

func (a adminAPI) addFaults(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		a.s.writeAPIError(w, r, errorf(http.StatusBadRequest, "could not read body"))
		return
	}
	list, aerr := decodeFaults(b, sc)
	if aerr != nil {
		a.s.writeAPIError(w, r, aerr)
		return
	}
	out := make([]Fault, 0, len(list))
	for _, f := range list {
		out = append(out, a.s.faults.Add(f))
	}
	writeJSON(w, http.StatusCreated, out)
}

func (a adminAPI) clearFaults(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	a.s.faults.Clear(sc.owns)
	w.WriteHeader(http.StatusNoContent)
}

func (a adminAPI) setRandomFaults(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		a.s.writeAPIError(w, r, errorf(http.StatusBadRequest, "invalid random faults: %v", err))
		return
	}
	rf, aerr := decodeRandomFaults(b)
	if aerr != nil {
		a.s.writeAPIError(w, r, aerr)
		return
	}
	a.s.faults.SetRandom(sc.faultOrg(), &rf)
	writeJSON(w, http.StatusOK, rf)
}

func (a adminAPI) clearRandomFaults(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	a.s.faults.SetRandom(sc.faultOrg(), nil)
	w.WriteHeader(http.StatusNoContent)
}

func (a adminAPI) listCalls(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	writeJSON(w, http.StatusOK, map[string]any{"calls": a.s.calls.snapshot(sc), "counts": a.s.calls.counts(sc)})
}

func (a adminAPI) clearCalls(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	a.s.calls.reset(sc)
	w.WriteHeader(http.StatusNoContent)
}

func (a adminAPI) cost(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	q := r.URL.Query()
	p, limit, aerr := costQuery(q, a.s.cfg.Prices)
	if aerr != nil {
		a.s.writeAPIError(w, r, aerr)
		return
	}
	rep, aerr := a.s.cost(p, sc, q.Get("cursor"), limit)
	if aerr != nil {
		a.s.writeAPIError(w, r, aerr)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// costQuery reads GET /_sim/cost's query: prices that override p, and the
// page's limit (0 for every row).
func costQuery(q url.Values, p Prices) (Prices, int, *apiError) {
	for key, dst := range map[string]*float64{"cpuPerSecond": &p.CPUPerSecond, "memoryGiBPerSecond": &p.MemoryGiBPerSecond,
		"diskGiBPerSecond": &p.DiskGiBPerSecond} {
		if v := q.Get(key); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return p, 0, errorf(http.StatusBadRequest, "%s must be a number", key)
			}
			*dst = f
		}
	}
	if v := q.Get("freeDiskGiB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return p, 0, errorf(http.StatusBadRequest, "freeDiskGiB must be an integer")
		}
		p.FreeDiskGiB = n
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > cost.MaxPage {
			return p, 0, errorf(http.StatusBadRequest, "limit must be an integer from 1 to %d", cost.MaxPage)
		}
		limit = n
	}
	return p, limit, nil
}

func (a adminAPI) vanish(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	if !a.s.vanish(r.PathValue("id"), sc) {
		a.s.writeAPIError(w, r, notFound(r.PathValue("id")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a adminAPI) runJobs(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	a.s.eng.runJobs(sc)
	w.WriteHeader(http.StatusNoContent)
}

// Vanish makes the sandbox with this id disappear, as if deleted out of
// band. It reports whether there was such a sandbox.
func (s *Simulator) Vanish(id string) bool { return s.vanish(id, everyOrg) }

// vanish is Vanish for a sandbox of sc.
func (s *Simulator) vanish(id string, sc scope) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.rows.Get(id)
	if sb == nil || sb.gone || !sc.owns(sb.OrgID) {
		return false
	}
	s.vanishLocked(sb)
	return true
}

// decodeFaults reads the body of POST /_sim/faults, one Fault or a list of
// them, as faults of sc: each checked, and its Org set to sc's, so that
// every fault it returns can be added as it is. A fault of a single
// organization's call that names another organization is refused.
func decodeFaults(b []byte, sc scope) ([]Fault, *apiError) {
	var list []Fault
	var err error
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		err = decodeStrict(b, &list)
	} else {
		var one Fault
		err = decodeStrict(b, &one)
		list = []Fault{one}
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid fault: %v", err)
	}
	for i, f := range list {
		if err := f.Check(faultOps()); err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid fault: %v", err)
		}
		if !sc.all {
			if f.Org != "" && f.Org != sc.org {
				return nil, errorf(http.StatusBadRequest, "the fault names org %s, not the organization of this call", f.Org)
			}
			list[i].Org = sc.faultOrg()
		}
	}
	return list, nil
}

// decodeRandomFaults reads the body of PUT /_sim/faults/random, checked.
func decodeRandomFaults(b []byte) (RandomFaults, *apiError) {
	var rf RandomFaults
	err := decodeStrict(b, &rf)
	if err == nil {
		err = rf.Check(faultOps())
	}
	if err != nil {
		return RandomFaults{}, errorf(http.StatusBadRequest, "invalid random faults: %v", err)
	}
	return rf, nil
}

// decodeStrict decodes the JSON value b into v, refusing a field v does
// not have: a misspelt one would otherwise be dropped without a word.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value: send one fault, or a list of them in [ ]")
	}
	return nil
}
