package engine

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Range is a delay drawn uniformly from [Min, Max].
type Range struct{ Min, Max time.Duration }

// Draw picks a delay from r. A Range whose Max is not above its Min is
// always Min.
func (r Range) Draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

// Profile holds how long each raw-state transition takes.
type Profile struct {
	Name string
	// Create is unknown→creating→started.
	Create Range
	// Start is stopped→starting→started.
	Start Range
	// Stop is started→stopping→stopped.
	Stop Range
	// Destroy is *→destroying→destroyed.
	Destroy Range
	// Archive is stopped→archiving→archived.
	Archive Range
	// Restore is archived→restoring→started.
	Restore Range
	// Pause is started→pausing→paused.
	Pause Range
	// Resume is paused→resuming→started.
	Resume Range
	// Build is pending_build→building_snapshot→unknown for buildInfo creates.
	Build Range
	// Backup is how long createBackup takes to complete.
	Backup Range
	// WarmCreate is a create that takes a started sandbox from a warm
	// pool: the API call alone, no creating step.
	WarmCreate Range
}

// InstantProfile makes every transition take no time at all: create and
// start answer started, and stop or delete finish right after answering.
func InstantProfile() Profile { return Profile{Name: "instant"} }

// DaytonaProfile uses the figures measured against Daytona: create 1.2-1.7 s,
// start from stopped 0.7-0.8 s, restore from archive 33-66 s. The others
// were not measured and are plausible guesses.
func DaytonaProfile() Profile {
	return Profile{
		Name:    "daytona",
		Create:  Range{1200 * time.Millisecond, 1700 * time.Millisecond},
		Start:   Range{700 * time.Millisecond, 800 * time.Millisecond},
		Restore: Range{33 * time.Second, 66 * time.Second},
		Pause:   Range{300 * time.Millisecond, 600 * time.Millisecond},
		Resume:  Range{300 * time.Millisecond, 600 * time.Millisecond},
		Stop:    Range{400 * time.Millisecond, 900 * time.Millisecond},
		Destroy: Range{300 * time.Millisecond, 600 * time.Millisecond},
		Archive: Range{10 * time.Second, 20 * time.Second},
		Build:   Range{10 * time.Second, 30 * time.Second},
		Backup:  Range{2 * time.Second, 5 * time.Second},
		// Not measured: an API round trip that updates the row.
		WarmCreate: Range{30 * time.Millisecond, 90 * time.Millisecond},
	}
}

// ProfileByName returns "instant" (also for "") or "daytona".
func ProfileByName(name string) (Profile, error) {
	switch name {
	case "instant", "":
		return InstantProfile(), nil
	case "daytona":
		return DaytonaProfile(), nil
	}
	return Profile{}, fmt.Errorf("unknown profile %q (want instant or daytona)", name)
}
