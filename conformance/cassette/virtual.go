package cassette

import (
	"time"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// Virtual is the clock of a replay. Its time moves only when someone waits,
// and then at once and by exactly the wait: a timer fires as soon as it is
// made, and AfterFunc deadlines fire when the waits add up to them. So a
// replay runs the recorded polls and backoffs in no time, and a deadline
// that did not pass in the recording does not pass in the replay either,
// because a recording's waits took at least as long.
type Virtual struct{ f *clocktest.Fake }

var _ clock.Clock = (*Virtual)(nil)

// NewVirtual returns a virtual clock at a fixed instant.
func NewVirtual() *Virtual { return &Virtual{f: clocktest.NewFake(time.Time{})} }

func (v *Virtual) Now() time.Time                  { return v.f.Now() }
func (v *Virtual) Since(t time.Time) time.Duration { return v.f.Since(t) }

// NewTimer returns a timer that has fired: time moved forward by d.
func (v *Virtual) NewTimer(d time.Duration) clock.Timer {
	t := v.f.NewTimer(d)
	v.f.Advance(d)
	return t
}

// NewTicker ticks in real time: a ticker has no end to skip to, and nothing
// a replay runs uses one.
func (v *Virtual) NewTicker(d time.Duration) clock.Ticker { return clock.Real().NewTicker(d) }

func (v *Virtual) AfterFunc(d time.Duration, f func()) clock.Timer { return v.f.AfterFunc(d, f) }
