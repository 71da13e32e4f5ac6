package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPlan is the lifecycle's table: for each raw state and desired state,
// the step Daytona's reconciler takes next, or none.
func TestPlan(t *testing.T) {
	p := DaytonaProfile()
	none := Step{}
	tests := []struct {
		state, desired string
		want           Step
	}{
		// Settled: nothing to do.
		{Started, WantStarted, none},
		{Stopped, WantStopped, none},
		{Archived, WantArchived, none},
		{Destroyed, WantDestroyed, none},

		// Towards started.
		{Unknown, WantStarted, Step{Creating, Started, p.Create, Start}},
		{Creating, WantStarted, Step{Creating, Started, p.Create, Start}},
		{Stopped, WantStarted, Step{Starting, Started, p.Start, Start}},
		{Starting, WantStarted, Step{Starting, Started, p.Start, Start}},
		{Archived, WantStarted, Step{Restoring, Started, p.Restore, Start}},
		{Restoring, WantStarted, Step{Restoring, Started, p.Restore, Start}},
		{PendingBuild, WantStarted, Step{BuildingSnapshot, Unknown, p.Build, Build}},
		{Error, WantStarted, none},
		{BuildFailed, WantStarted, none},

		// Resuming a paused sandbox is a start.
		{Paused, WantStarted, Step{Resuming, Started, p.Resume, Resume}},
		{Resuming, WantStarted, Step{Resuming, Started, p.Resume, Resume}},

		// Towards paused: only from started.
		{Started, WantPaused, Step{Pausing, Paused, p.Pause, Pause}},
		{Pausing, WantPaused, Step{Pausing, Paused, p.Pause, Pause}},
		{Paused, WantPaused, none},
		{Stopped, WantPaused, none},

		// Towards stopped: from started, or paused.
		{Started, WantStopped, Step{Stopping, Stopped, p.Stop, Stop}},
		{Paused, WantStopped, Step{Stopping, Stopped, p.Stop, Stop}},
		{Stopping, WantStopped, Step{Stopping, Stopped, p.Stop, Stop}},
		{Archived, WantStopped, none},
		{Error, WantStopped, none},

		// Towards archived: only from stopped.
		{Stopped, WantArchived, Step{Archiving, Archived, p.Archive, NoWork}},
		{Archiving, WantArchived, Step{Archiving, Archived, p.Archive, NoWork}},
		{Started, WantArchived, none},

		// Towards destroyed: through destroying where a workload ran,
		// straight there from the others, errored ones included.
		{Started, WantDestroyed, Step{Destroying, Destroyed, p.Destroy, Remove}},
		{Stopped, WantDestroyed, Step{Destroying, Destroyed, p.Destroy, Remove}},
		{Paused, WantDestroyed, Step{Destroying, Destroyed, p.Destroy, Remove}},
		{Destroying, WantDestroyed, Step{Destroying, Destroyed, p.Destroy, Remove}},
		{Error, WantDestroyed, Step{"", Destroyed, p.Destroy, Remove}},
		{BuildFailed, WantDestroyed, Step{"", Destroyed, p.Destroy, Remove}},
		{Archived, WantDestroyed, Step{"", Destroyed, p.Destroy, Remove}},
		{PendingBuild, WantDestroyed, Step{"", Destroyed, p.Destroy, Remove}},
	}
	for _, tc := range tests {
		t.Run(tc.state+"→"+tc.desired, func(t *testing.T) {
			got, ok := Plan(tc.state, tc.desired, p)
			assert.Equal(t, tc.want != none, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestPlanReachesEveryDesiredState walks each desired state from every
// state that reaches it, following Plan with every step completing: the
// walk must end settled, within a few steps, never loop.
func TestPlanReachesEveryDesiredState(t *testing.T) {
	p := InstantProfile()
	tests := []struct {
		desired string
		from    []string
	}{
		{WantStarted, []string{Unknown, Creating, Stopped, Starting, Archived, Restoring, PendingBuild, Paused, Resuming}},
		{WantStopped, []string{Started, Stopping, Paused}},
		{WantPaused, []string{Started, Pausing}},
		{WantArchived, []string{Stopped, Archiving}},
		{WantDestroyed, []string{Unknown, Started, Stopped, Paused, Archived, Error, BuildFailed, PendingBuild, Destroying}},
	}
	for _, tc := range tests {
		for _, from := range tc.from {
			t.Run(fmt.Sprintf("%s→%s", from, tc.desired), func(t *testing.T) {
				state := from
				for range 4 {
					st, ok := Plan(state, tc.desired, p)
					if !ok {
						break
					}
					state = st.To
				}
				assert.Equal(t, tc.desired, state)
			})
		}
	}
}

func TestRangeDraw(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		r    Range
	}{
		{"fixed", Range{time.Second, time.Second}},
		{"zero", Range{}},
		{"max below min is min", Range{2 * time.Second, time.Second}},
		{"spread", Range{time.Second, 3 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 200 {
				d := tc.r.Draw(rng)
				assert.GreaterOrEqual(t, d, tc.r.Min)
				assert.LessOrEqual(t, d, max(tc.r.Min, tc.r.Max))
			}
		})
	}
}

func TestProfileByName(t *testing.T) {
	for name, want := range map[string]string{"": "instant", "instant": "instant", "daytona": "daytona"} {
		p, err := ProfileByName(name)
		assert.NoError(t, err)
		assert.Equal(t, want, p.Name)
	}
	_, err := ProfileByName("fast")
	assert.ErrorContains(t, err, "want instant or daytona")
}
