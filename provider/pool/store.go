package pool

import (
	"context"
	"crypto/rand"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// RecordState is where a key's sandbox is.
type RecordState string

const (
	// StateInUse: a turn holds it.
	StateInUse RecordState = "in_use"
	// StateParkedRunning: between turns, running, warm.
	StateParkedRunning RecordState = "parked_running"
	// StateParkedStopped: between turns, stopped.
	StateParkedStopped RecordState = "parked_stopped"
)

// Record is a key's pointer to its sandbox. It holds no secret: the
// fingerprint is a keyed hash.
type Record struct {
	Key         string      `json:"key"`
	Gen         uint64      `json:"gen"`
	SandboxID   string      `json:"sandboxId"`
	Fingerprint string      `json:"fingerprint"`
	State       RecordState `json:"state"`
	// Since is when the record entered State, for TTLs that must survive a
	// restart of the host.
	Since time.Time `json:"since"`
}

// ErrConflict is wrapped by Swap's failed_precondition when the generation
// it was given is not the stored one: somebody replaced the record since it
// was read.
var ErrConflict = errors.New("the record changed since it was read")

// Store holds the pointers from keys to sandboxes. One Pool uses a Store at
// a time. Implementations are safe for concurrent use.
type Store interface {
	// Load returns the key's record; false when it has none.
	Load(ctx context.Context, key string) (Record, bool, error)
	// Swap replaces the key's record, if its generation is gen (0: the key
	// has no record), with next, or removes it when next is nil. next gets a
	// generation the store has never given before and is returned.
	// failed_precondition wrapping ErrConflict: gen is not the stored one.
	Swap(ctx context.Context, key string, gen uint64, next *Record) (Record, error)
	// List returns every record, by key.
	List(ctx context.Context) ([]Record, error)
	// Secret is 32 random bytes made with the store and kept as private as
	// it. Fingerprints are keyed with it, so that they stay comparable for
	// as long as the records live and tell nothing about env values.
	Secret(ctx context.Context) ([]byte, error)
	// Durable reports whether the records outlive the process.
	Durable() bool
}

// state is what a store keeps; MemoryStore keeps it in memory, FileStore in
// a file.
type state struct {
	Version int               `json:"version"`
	LastGen uint64            `json:"lastGen"`
	Secret  []byte            `json:"secret"`
	Records map[string]Record `json:"records"`
}

func newState() (*state, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, provider.Errorf(provider.Internal, "make the store's secret: %v", err)
	}
	return &state{Version: 1, Secret: secret, Records: map[string]Record{}}, nil
}

// swap applies a Swap to s and returns the new record, or the error.
func (s *state) swap(key string, gen uint64, next *Record) (Record, error) {
	cur, ok := s.Records[key]
	if (ok && cur.Gen != gen) || (!ok && gen != 0) {
		return Record{}, provider.Errorf(provider.FailedPrecondition, "key %q: generation %d is stale (stored: %d): %w", key, gen, cur.Gen, ErrConflict)
	}
	if next == nil {
		delete(s.Records, key)
		return Record{}, nil
	}
	s.LastGen++
	rec := *next
	rec.Key, rec.Gen = key, s.LastGen
	s.Records[key] = rec
	return rec, nil
}

func (s *state) list() []Record {
	out := make([]Record, 0, len(s.Records))
	for _, r := range s.Records {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// MemoryStore is a Store in memory: the pool's default. Its records die
// with the process, so Shutdown deletes what it parked wherever the
// provider would not delete it on its own.
type MemoryStore struct {
	mu sync.Mutex
	s  *state
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

func (m *MemoryStore) init() error {
	if m.s != nil {
		return nil
	}
	s, err := newState()
	if err != nil {
		return err
	}
	m.s = s
	return nil
}

func (m *MemoryStore) Load(_ context.Context, key string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.init(); err != nil {
		return Record{}, false, err
	}
	r, ok := m.s.Records[key]
	return r, ok, nil
}

func (m *MemoryStore) Swap(_ context.Context, key string, gen uint64, next *Record) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.init(); err != nil {
		return Record{}, err
	}
	return m.s.swap(key, gen, next)
}

func (m *MemoryStore) List(context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.init(); err != nil {
		return nil, err
	}
	return m.s.list(), nil
}

func (m *MemoryStore) Secret(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.init(); err != nil {
		return nil, err
	}
	return append([]byte(nil), m.s.Secret...), nil
}

// Durable is false: the records die with the process.
func (m *MemoryStore) Durable() bool { return false }
