package poolsim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"time"
)

// Conversation is one agent conversation's day: sessions that start at
// their own time of day, each a run of turns.
type Conversation struct {
	Sessions []Session `json:"sessions"`
}

// Session is a burst of turns that starts Start after midnight.
type Session struct {
	Start Duration `json:"start"`
	Turns []Turn   `json:"turns"`
}

// Turn waits Gap after the previous turn of its session ended, then works
// for Work on its sandbox.
type Turn struct {
	Gap  Duration `json:"gap"`
	Work Duration `json:"work"`
}

// Duration is a time.Duration that JSON spells as Go does ("90s").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`want a duration such as "90s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q: want a duration of 0 or more", s)
	}
	*d = Duration(v)
	return nil
}

// DayOfTraffic is a bursty day of n conversations: one to four sessions
// each, mostly in working hours, of 2-10 turns of 20-120 s of work whose
// gaps are mostly short (the user answers at once: 60% 5-50 s), sometimes
// longer (30% 50 s-5 min) and now and then long (10% 5-40 min: the user
// went away). The same seed gives the same day.
func DayOfTraffic(seed uint64, n int) []Conversation {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) Duration { return Duration(lo + time.Duration(rng.Int64N(int64(hi-lo)+1))) }
	convs := make([]Conversation, n)
	for i := range convs {
		sessions := make([]Session, 1+rng.IntN(4))
		for s := range sessions {
			if rng.Float64() < 0.85 {
				sessions[s].Start = between(8*time.Hour, 19*time.Hour)
			} else {
				sessions[s].Start = between(0, 22*time.Hour)
			}
		}
		sort.Slice(sessions, func(a, b int) bool { return sessions[a].Start < sessions[b].Start })
		for s := range sessions {
			turns := make([]Turn, 2+rng.IntN(9))
			for t := range turns {
				turns[t].Work = between(20*time.Second, 120*time.Second)
				switch r := rng.Float64(); {
				case r < 0.6:
					turns[t].Gap = between(5*time.Second, 50*time.Second)
				case r < 0.9:
					turns[t].Gap = between(50*time.Second, 5*time.Minute)
				default:
					turns[t].Gap = between(5*time.Minute, 40*time.Minute)
				}
			}
			sessions[s].Turns = turns
		}
		convs[i].Sessions = sessions
	}
	return convs
}

// LoadTraffic reads a day of conversations as JSON: a list of
// {"sessions": [{"start": "9h", "turns": [{"gap": "10s", "work": "60s"}]}]}.
func LoadTraffic(path string) ([]Conversation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var convs []Conversation
	if err := json.Unmarshal(b, &convs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, c := range convs {
		for j, s := range c.Sessions {
			if time.Duration(s.Start) >= 24*time.Hour {
				return nil, fmt.Errorf("%s: conversation %d, session %d starts at %s: a day has 24h", path, i, j, time.Duration(s.Start))
			}
		}
	}
	return convs, nil
}

// turns counts the turns of convs.
func turns(convs []Conversation) int {
	n := 0
	for _, c := range convs {
		for _, s := range c.Sessions {
			n += len(s.Turns)
		}
	}
	return n
}
