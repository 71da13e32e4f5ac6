package toolbox

import (
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// procEnv is the environment the toolbox hands the processes it starts:
// its own, changed by POST /env. Changes live in the toolbox only (never
// in the process's real environment, which other servers in the same
// process share) and are lost with it.
type procEnv struct {
	mu    sync.Mutex
	set   map[string]string
	unset map[string]bool
}

func newProcEnv() *procEnv {
	return &procEnv{set: map[string]string{}, unset: map[string]bool{}}
}

// environ is the environment for a new process, in os.Environ's form.
func (e *procEnv) environ() []string {
	if e == nil {
		return os.Environ()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	base := os.Environ()
	out := make([]string, 0, len(base)+len(e.set))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := e.set[name]; ok || e.unset[name] {
			continue
		}
		out = append(out, kv)
	}
	names := make([]string, 0, len(e.set))
	for k := range e.set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, k+"="+e.set[k])
	}
	return out
}

// update applies req: the removals first, then Set.
func (e *procEnv) update(req wire.UpdateEnvRequest) {
	current := e.environ()
	e.mu.Lock()
	defer e.mu.Unlock()
	remove := func(name string) {
		delete(e.set, name)
		e.unset[name] = true
	}
	for _, name := range req.Unset {
		remove(name)
	}
	if req.UnsetValuePrefix != "" {
		for _, kv := range current {
			name, value, _ := strings.Cut(kv, "=")
			if _, keep := req.Set[name]; !keep && strings.HasPrefix(value, req.UnsetValuePrefix) {
				remove(name)
			}
		}
	}
	for k, v := range req.Set {
		delete(e.unset, k)
		e.set[k] = v
	}
}

// gitConfig adds key=value to the git configuration of every process
// started from now on, through git's GIT_CONFIG_COUNT variables: no
// configuration file changes, so a sandbox whose HOME is the user's own
// leaves the user's git configuration as it was. Adding a pair already
// there does nothing.
func (e *procEnv) gitConfig(key, value string) {
	current := e.environ()
	e.mu.Lock()
	defer e.mu.Unlock()
	vars := map[string]string{}
	for _, kv := range current {
		name, v, _ := strings.Cut(kv, "=")
		vars[name] = v
	}
	n, _ := strconv.Atoi(vars["GIT_CONFIG_COUNT"])
	for i := range n {
		if vars["GIT_CONFIG_KEY_"+strconv.Itoa(i)] == key && vars["GIT_CONFIG_VALUE_"+strconv.Itoa(i)] == value {
			return
		}
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_KEY_" + strconv.Itoa(n):   key,
		"GIT_CONFIG_VALUE_" + strconv.Itoa(n): value,
		"GIT_CONFIG_COUNT":                    strconv.Itoa(n + 1),
	} {
		delete(e.unset, k)
		e.set[k] = v
	}
}

// handleUpdateEnv changes the environment of the processes started from
// now on; running sessions keep theirs, as their shells already run.
func (s *server) handleUpdateEnv(w http.ResponseWriter, r *http.Request) {
	var req wire.UpdateEnvRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Set) == 0 && len(req.Unset) == 0 && req.UnsetValuePrefix == "" {
		s.fail(w, r, errorf(http.StatusBadRequest, "nothing to change: give set, unset or unsetValuePrefix"))
		return
	}
	if err := validateEnv(req.Set); err != nil {
		s.fail(w, r, err)
		return
	}
	for _, name := range req.Unset {
		if err := validateEnv(map[string]string{name: ""}); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.opts.env.update(req)
	// Names only: values are secrets.
	writeJSON(w, http.StatusOK, map[string]string{"message": "environment updated"})
}
