package poolsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/sandplane/sandplane/provider/pool"
)

// Range is a stage's cost: each turn pays a duration drawn evenly from
// [Min, Max]. In JSON it is a Go duration ("5.15s") or a range of two
// ("100ms..220ms").
type Range struct{ Min, Max time.Duration }

// Fixed is a range of one value.
func Fixed(d time.Duration) Range { return Range{d, d} }

// Mean is the middle of the range.
func (r Range) Mean() time.Duration { return (r.Min + r.Max) / 2 }

func (r Range) draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

func (r Range) String() string {
	if r.Min == r.Max {
		return r.Min.String()
	}
	return r.Min.String() + ".." + r.Max.String()
}

func (r Range) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

func (r *Range) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`want a duration such as "5.15s" or a range such as "100ms..220ms"`)
	}
	lo, hi, isRange := strings.Cut(s, "..")
	if !isRange {
		hi = lo
	}
	var err error
	if r.Min, err = time.ParseDuration(strings.TrimSpace(lo)); err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if r.Max, err = time.ParseDuration(strings.TrimSpace(hi)); err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if r.Min < 0 || r.Max < r.Min {
		return fmt.Errorf("%q: want 0 <= min <= max", s)
	}
	return nil
}

// Stages is what each step of a turn's way to a ready sandbox costs.
type Stages struct {
	// Create is a new sandbox's create, until it runs (the provider's).
	Create Range `json:"create"`
	// Start is a stopped sandbox's start, until it runs (the provider's).
	Start Range `json:"start"`
	// HarnessRespawn is the agent harness coming up in a sandbox whose
	// processes are new: every created or resumed one.
	HarnessRespawn Range `json:"harnessRespawn"`
	// Mounts are the workspace and credential mounts the same sandboxes
	// need again.
	Mounts Range `json:"mounts"`
	// ServicesHop is the host's call through its services to the
	// sandbox, paid by every turn.
	ServicesHop Range `json:"servicesHop"`
	// Checkout is the pool checkout (fingerprint and credential checks)
	// and the prompt's forwarding, paid by every turn.
	Checkout Range `json:"checkout"`
}

// DefaultStages is the measured split. Create and start are Daytona's
// (1.2-1.7 s and 0.7-0.8 s, the simulator's daytona profile); the harness
// respawn (5.15 s) and the services hop (100-220 ms) were measured on a
// host; mounts and checkout are what is left of the measured totals (a
// new sandbox's pipeline of about 10 s, a warm turn of 2-3 s).
func DefaultStages() Stages {
	return Stages{
		Create:         Range{1200 * time.Millisecond, 1700 * time.Millisecond},
		Start:          Range{700 * time.Millisecond, 800 * time.Millisecond},
		HarnessRespawn: Fixed(5150 * time.Millisecond),
		Mounts:         Range{800 * time.Millisecond, 1200 * time.Millisecond},
		ServicesHop:    Range{100 * time.Millisecond, 220 * time.Millisecond},
		Checkout:       Range{1900 * time.Millisecond, 2800 * time.Millisecond},
	}
}

// ReadStages reads stages as JSON over DefaultStages: a stage the file
// does not name keeps its default, a field it does not know is an error.
func ReadStages(r io.Reader) (Stages, error) {
	s := DefaultStages()
	b, err := io.ReadAll(r)
	if err != nil {
		return s, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("stages: %w (fields: create, start, harnessRespawn, mounts, servicesHop, checkout)", err)
	}
	return s, nil
}

// LoadStages reads a stages file.
func LoadStages(path string) (Stages, error) {
	f, err := os.Open(path)
	if err != nil {
		return Stages{}, err
	}
	defer f.Close()
	s, err := ReadStages(f)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// hostSide are the stages a turn on path pays after its Acquire (whose
// create or start the provider charges itself).
func (s Stages) hostSide(path pool.Path) []Range {
	every := []Range{s.ServicesHop, s.Checkout}
	if path == pool.PathWarm {
		return every
	}
	return append([]Range{s.HarnessRespawn, s.Mounts}, every...)
}
