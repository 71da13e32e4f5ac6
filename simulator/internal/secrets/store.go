package secrets

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandplane/sandplane/provider/clock"
)

// The SDK documents a secret's name pattern; the spec gives no length,
// so a name is capped where a path segment stays reasonable.
var (
	namePattern   = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)
	envVarPattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

const (
	maxNameLen        = 255
	maxDescriptionLen = 1024
	maxValueLen       = 64 << 10

	// PlaceholderPrefix begins every placeholder, as Daytona's do
	// ("dtn_secret_…"), so that it reads as a token a client sends.
	PlaceholderPrefix = "dtn_secret_"
	placeholderBytes  = 16
	// PlaceholderLen is every placeholder's length: the proxy's body
	// rewriting relies on them all being one length.
	PlaceholderLen = len(PlaceholderPrefix) + 2*placeholderBytes
)

// Secret is what the API shows of a secret: everything but its value.
type Secret struct {
	ID          string
	Name        string
	Description string
	// Placeholder is what a sandbox's env var holds instead of the
	// value: random, so that it says nothing of the value or of other
	// secrets, and the secret's own for its life, as Daytona's is.
	Placeholder string
	Hosts       []string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Spec is a new secret, as POST /secret gives it.
type Spec struct {
	Name        string
	Value       Value
	Description string
	Hosts       []string
}

// Patch changes a secret, as PATCH /secret/{id} does: a nil field is
// left as it is.
type Patch struct {
	Value       *Value
	Description *string
	Hosts       *[]string
}

// stored is a secret with its value.
type stored struct {
	meta  Secret
	value Value
}

// mount is what a sandbox was given: the org whose secrets it names and
// the secret ID behind each env var.
type mount struct {
	org  string
	envs map[string]string
}

// Store keeps the secrets of every organization and which sandbox
// mounts which. It is safe for concurrent use; every change is seen by
// the next lookup, so rotating, detaching or deleting takes effect for
// the proxy's next request.
type Store struct {
	clk clock.Clock

	mu     sync.RWMutex
	orgs   map[string]map[string]*stored // org → secret ID → secret
	mounts map[string]mount              // sandbox ID → its mounts
}

// NewStore returns an empty store that stamps times from clk.
func NewStore(clk clock.Clock) *Store {
	return &Store{clk: clk, orgs: map[string]map[string]*stored{}, mounts: map[string]mount{}}
}

// Create adds a secret to org; a name already there is ErrConflict.
func (s *Store) Create(org string, spec Spec) (Secret, error) {
	hosts, err := validateSpec(spec)
	if err != nil {
		return Secret{}, err
	}
	placeholder, err := newPlaceholder()
	if err != nil {
		return Secret{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName(org, spec.Name) != nil {
		return Secret{}, fmt.Errorf("%w: a secret named %q already exists", ErrConflict, spec.Name)
	}
	now := s.clk.Now().UTC()
	sec := &stored{value: spec.Value, meta: Secret{
		ID: uuid.NewString(), Name: spec.Name, Description: spec.Description,
		Placeholder: placeholder, Hosts: hosts, CreatedAt: now, UpdatedAt: now,
	}}
	s.secretsOf(org)[sec.meta.ID] = sec
	return sec.meta.clone(), nil
}

// Get returns one of org's secrets by ID.
func (s *Store) Get(org, id string) (Secret, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sec, ok := s.orgs[org][id]
	if !ok {
		return Secret{}, fmt.Errorf("%w: secret %q", ErrNotFound, id)
	}
	return sec.meta.clone(), nil
}

// List returns org's secrets oldest first; paging, filtering and other
// orders are the handler's.
func (s *Store) List(org string) []Secret {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Secret, 0, len(s.orgs[org]))
	for _, sec := range s.orgs[org] {
		out = append(out, sec.meta.clone())
	}
	slices.SortFunc(out, func(a, b Secret) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Update applies p to one of org's secrets. A new value is what the
// proxy substitutes from its next request on; the placeholder stays, so
// sandboxes need no new env.
func (s *Store) Update(org, id string, p Patch) (Secret, error) {
	hosts, err := validatePatch(p)
	if err != nil {
		return Secret{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.orgs[org][id]
	if !ok {
		return Secret{}, fmt.Errorf("%w: secret %q", ErrNotFound, id)
	}
	applyPatch(sec, p, hosts)
	sec.meta.UpdatedAt = s.clk.Now().UTC()
	return sec.meta.clone(), nil
}

// Delete removes one of org's secrets. Sandboxes that mounted it keep
// the env var, but its placeholder is substituted no more.
func (s *Store) Delete(org, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orgs[org][id]; !ok {
		return fmt.Errorf("%w: secret %q", ErrNotFound, id)
	}
	delete(s.orgs[org], id)
	return nil
}

// Mount replaces the secrets sandbox mounts, env var name → secret name
// in org, as creating a sandbox with secrets or PUT
// /sandbox/{id}/secrets does. An empty map detaches them all. Every
// name must exist: otherwise nothing changes and the error is
// ErrNotFound.
func (s *Store) Mount(org, sandbox string, envs map[string]string) error {
	for env := range envs {
		if !envVarPattern.MatchString(env) {
			return fmt.Errorf("%w: env var name %q", ErrInvalid, env)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make(map[string]string, len(envs))
	for env, name := range envs {
		sec := s.byName(org, name)
		if sec == nil {
			return fmt.Errorf("%w: secret %q", ErrNotFound, name)
		}
		ids[env] = sec.meta.ID
	}
	if len(ids) == 0 {
		delete(s.mounts, sandbox)
		return nil
	}
	s.mounts[sandbox] = mount{org: org, envs: ids}
	return nil
}

// Check reports what Mount(org, _, envs) would refuse, without mounting:
// ErrInvalid for an env var name, ErrNotFound for a secret name.
func (s *Store) Check(org string, envs map[string]string) error {
	for env := range envs {
		if !envVarPattern.MatchString(env) {
			return fmt.Errorf("%w: env var name %q", ErrInvalid, env)
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, name := range envs {
		if s.byName(org, name) == nil {
			return fmt.Errorf("%w: secret %q", ErrNotFound, name)
		}
	}
	return nil
}

// Forget drops what sandbox mounts, when it is deleted.
func (s *Store) Forget(sandbox string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mounts, sandbox)
}

// Env is what sandbox's processes see of its secrets: each mounted env
// var with its secret's placeholder. A secret deleted since is left out.
func (s *Store) Env(sandbox string) map[string]string {
	out := map[string]string{}
	s.eachMounted(sandbox, func(env string, sec *stored) { out[env] = sec.meta.Placeholder })
	return out
}

// Mounts is env var → secret name for what sandbox mounts, as the
// sandbox's API view shows it.
func (s *Store) Mounts(sandbox string) map[string]string {
	out := map[string]string{}
	s.eachMounted(sandbox, func(env string, sec *stored) { out[env] = sec.meta.Name })
	return out
}

// substitution is one placeholder to replace by its value.
type substitution struct {
	placeholder string
	value       string
}

// substitutions are the placeholders the proxy replaces in sandbox's
// request to host: those of its mounted secrets that allow host. This is
// the only path by which a value leaves the store.
func (s *Store) substitutions(sandbox, host string) []substitution {
	var out []substitution
	s.eachMounted(sandbox, func(_ string, sec *stored) {
		if allows(sec.meta.Hosts, host) {
			out = append(out, substitution{sec.meta.Placeholder, sec.value.reveal()})
		}
	})
	return out
}

// intercepts says whether the proxy must open sandbox's TLS to host:
// only when some secret it mounts may be sent there.
func (s *Store) intercepts(sandbox, host string) bool {
	found := false
	s.eachMounted(sandbox, func(_ string, sec *stored) { found = found || allows(sec.meta.Hosts, host) })
	return found
}

func (s *Store) eachMounted(sandbox string, f func(env string, sec *stored)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.mounts[sandbox]
	for env, id := range m.envs {
		if sec, ok := s.orgs[m.org][id]; ok {
			f(env, sec)
		}
	}
}

func (s *Store) secretsOf(org string) map[string]*stored {
	if s.orgs[org] == nil {
		s.orgs[org] = map[string]*stored{}
	}
	return s.orgs[org]
}

func (s *Store) byName(org, name string) *stored {
	for _, sec := range s.orgs[org] {
		if sec.meta.Name == name {
			return sec
		}
	}
	return nil
}

func validateSpec(spec Spec) ([]string, error) {
	if len(spec.Name) > maxNameLen || !namePattern.MatchString(spec.Name) {
		return nil, fmt.Errorf("%w: name must match %s and be at most %d characters", ErrInvalid, namePattern, maxNameLen)
	}
	if err := validateValue(spec.Value); err != nil {
		return nil, err
	}
	if err := validateDescription(spec.Description); err != nil {
		return nil, err
	}
	return normalizeHosts(spec.Hosts)
}

func validatePatch(p Patch) ([]string, error) {
	if p.Value != nil {
		if err := validateValue(*p.Value); err != nil {
			return nil, err
		}
	}
	if p.Description != nil {
		if err := validateDescription(*p.Description); err != nil {
			return nil, err
		}
	}
	if p.Hosts == nil {
		return nil, nil
	}
	return normalizeHosts(*p.Hosts)
}

// An empty value is refused: it would make the placeholder vanish from
// the requests it is in rather than authenticate them.
func validateValue(v Value) error {
	if v.Len() == 0 || v.Len() > maxValueLen {
		return fmt.Errorf("%w: value must be 1 to %d bytes", ErrInvalid, maxValueLen)
	}
	return nil
}

func validateDescription(d string) error {
	if len(d) > maxDescriptionLen {
		return fmt.Errorf("%w: description is longer than %d characters", ErrInvalid, maxDescriptionLen)
	}
	return nil
}

func applyPatch(sec *stored, p Patch, hosts []string) {
	if p.Value != nil {
		sec.value = *p.Value
	}
	if p.Description != nil {
		sec.meta.Description = *p.Description
	}
	if p.Hosts != nil {
		sec.meta.Hosts = hosts
	}
}

// clone copies the hosts, so that a caller changing them does not
// change the store's.
func (m Secret) clone() Secret {
	m.Hosts = slices.Clone(m.Hosts)
	if m.Hosts == nil {
		m.Hosts = []string{}
	}
	return m
}

func newPlaceholder() (string, error) {
	b := make([]byte, placeholderBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("placeholder: %w", err)
	}
	return PlaceholderPrefix + hex.EncodeToString(b), nil
}

// Mounted is one env var of a sandbox and the secret behind it, as far
// as anyone but the proxy may see it: no value.
type Mounted struct {
	Env         string
	Name        string
	Placeholder string
	Hosts       []string
}

// Mounted lists what sandbox mounts, by env var name. A secret deleted
// since is left out.
func (s *Store) Mounted(sandbox string) []Mounted {
	var out []Mounted
	s.eachMounted(sandbox, func(env string, sec *stored) {
		m := sec.meta.clone()
		out = append(out, Mounted{Env: env, Name: m.Name, Placeholder: m.Placeholder, Hosts: m.Hosts})
	})
	slices.SortFunc(out, func(a, b Mounted) int { return cmp.Compare(a.Env, b.Env) })
	return out
}
