package simulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// Info describes a running simulator (GET /_sim/info).
type Info struct {
	Profile        string          `json:"profile"`
	Backend        string          `json:"backend"`
	Minute         string          `json:"minute"`
	Seed           uint64          `json:"seed"`
	Sandboxes      int             `json:"sandboxes"`
	Validation     bool            `json:"validation"`
	SpecExceptions []SpecException `json:"specExceptions"`
}

// adminRoutes serves the test-facing API under /_sim/:
//
//	GET    /_sim/info                      profile, backend, counts, spec exceptions
//	GET    /_sim/faults                    scripted faults
//	POST   /_sim/faults                    add one Fault or a list of them (201)
//	DELETE /_sim/faults                    clear scripted and random faults
//	PUT    /_sim/faults/random             set RandomFaults; DELETE turns them off
//	GET    /_sim/calls                     the call log and per-operation counts
//	DELETE /_sim/calls                     clear the call log
//	GET    /_sim/cost                      CostReport; query overrides the prices
//	POST   /_sim/sandboxes/{id}/vanish     make a sandbox disappear
//	POST   /_sim/jobs/run                  run the auto-stop/archive/delete jobs now
//
// When API keys are configured, the admin API wants one of them too.
func (s *Simulator) adminRoutes(mux *http.ServeMux) {
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if len(s.cfg.APIKeys) > 0 {
				if _, err := s.authenticate(r); err != nil {
					s.writeAPIError(w, r, err)
					return
				}
			}
			f(w, r)
		})
	}
	h("GET /_sim/info", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.byID)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, Info{Profile: s.cfg.Profile.Name, Backend: s.backend.Name(), Minute: s.cfg.Minute.String(),
			Seed: s.cfg.Seed, Sandboxes: n, Validation: s.spec != nil && !s.cfg.DisableValidation, SpecExceptions: SpecExceptions()})
	})
	h("GET /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.faults.snapshot())
	})
	h("POST /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			s.writeAPIError(w, r, errorf(http.StatusBadRequest, "could not read body"))
			return
		}
		var list []Fault
		if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
			err = json.Unmarshal(b, &list)
		} else {
			var one Fault
			err = json.Unmarshal(b, &one)
			list = []Fault{one}
		}
		if err != nil {
			s.writeAPIError(w, r, errorf(http.StatusBadRequest, "invalid fault: %v", err))
			return
		}
		out := make([]Fault, 0, len(list))
		for _, f := range list {
			if f.Op == "" {
				s.writeAPIError(w, r, errorf(http.StatusBadRequest, "a fault needs an op (an operationId, toolbox, preview or *)"))
				return
			}
		}
		for _, f := range list {
			out = append(out, s.faults.add(f))
		}
		writeJSON(w, http.StatusCreated, out)
	})
	h("DELETE /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		s.faults.clear()
		w.WriteHeader(http.StatusNoContent)
	})
	h("PUT /_sim/faults/random", func(w http.ResponseWriter, r *http.Request) {
		var rf RandomFaults
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rf); err != nil {
			s.writeAPIError(w, r, errorf(http.StatusBadRequest, "invalid random faults: %v", err))
			return
		}
		s.faults.setRandom(&rf)
		writeJSON(w, http.StatusOK, rf)
	})
	h("DELETE /_sim/faults/random", func(w http.ResponseWriter, r *http.Request) {
		s.faults.setRandom(nil)
		w.WriteHeader(http.StatusNoContent)
	})
	h("GET /_sim/calls", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"calls": s.calls.snapshot(), "counts": s.calls.counts()})
	})
	h("DELETE /_sim/calls", func(w http.ResponseWriter, r *http.Request) {
		s.calls.reset()
		w.WriteHeader(http.StatusNoContent)
	})
	h("GET /_sim/cost", func(w http.ResponseWriter, r *http.Request) {
		p := s.cfg.Prices
		q := r.URL.Query()
		for key, dst := range map[string]*float64{"cpuPerSecond": &p.CPUPerSecond, "memoryGiBPerSecond": &p.MemoryGiBPerSecond,
			"diskGiBPerSecond": &p.DiskGiBPerSecond} {
			if v := q.Get(key); v != "" {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					s.writeAPIError(w, r, errorf(http.StatusBadRequest, "%s must be a number", key))
					return
				}
				*dst = f
			}
		}
		if v := q.Get("freeDiskGiB"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				s.writeAPIError(w, r, errorf(http.StatusBadRequest, "freeDiskGiB must be an integer"))
				return
			}
			p.FreeDiskGiB = n
		}
		writeJSON(w, http.StatusOK, s.Cost(p))
	})
	h("POST /_sim/sandboxes/{id}/vanish", func(w http.ResponseWriter, r *http.Request) {
		if !s.Vanish(r.PathValue("id")) {
			s.writeAPIError(w, r, notFound(r.PathValue("id")))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h("POST /_sim/jobs/run", func(w http.ResponseWriter, r *http.Request) {
		s.RunJobs()
		w.WriteHeader(http.StatusNoContent)
	})
}

// Vanish makes the sandbox with this id disappear, as if deleted out of
// band. It reports whether there was such a sandbox.
func (s *Simulator) Vanish(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.byID[id]
	if sb == nil || sb.gone {
		return false
	}
	s.vanishLocked(sb)
	return true
}
