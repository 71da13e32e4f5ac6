package poolsim

import (
	"context"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/pool"
)

func TestReadStages(t *testing.T) {
	tests := []struct {
		name, json string
		want       func(*Stages)
		err        string
	}{
		{"empty keeps the defaults", `{}`, func(*Stages) {}, ""},
		{"one fixed stage", `{"harnessRespawn": "3s"}`, func(s *Stages) { s.HarnessRespawn = Fixed(3 * time.Second) }, ""},
		{"a range", `{"create": "1s..2s"}`, func(s *Stages) { s.Create = Range{time.Second, 2 * time.Second} }, ""},
		{"unknown stage", `{"boot": "1s"}`, nil, `unknown field "boot"`},
		{"not a duration", `{"mounts": "fast"}`, nil, `"fast"`},
		{"a number", `{"mounts": 3}`, nil, `want a duration`},
		{"reversed", `{"mounts": "2s..1s"}`, nil, "min <= max"},
		{"negative", `{"mounts": "-1s"}`, nil, "min <= max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadStages(strings.NewReader(tt.json))
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			want := DefaultStages()
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

func TestRangeJSONRoundTrips(t *testing.T) {
	for _, r := range []Range{Fixed(5150 * time.Millisecond), {100 * time.Millisecond, 220 * time.Millisecond}} {
		b, err := r.MarshalJSON()
		require.NoError(t, err)
		var back Range
		require.NoError(t, back.UnmarshalJSON(b))
		assert.Equal(t, r, back)
	}
}

// A resumed turn pays the pipeline as a created one does, but for create
// swapped for start; only a warm one skips it.
func TestHostSideStagesByPath(t *testing.T) {
	s := DefaultStages()
	pipeline := []Range{s.HarnessRespawn, s.Mounts, s.ServicesHop, s.Checkout}
	assert.Equal(t, pipeline, s.hostSide(pool.PathCreated))
	assert.Equal(t, pipeline, s.hostSide(pool.PathResumed))
	assert.Equal(t, []Range{s.ServicesHop, s.Checkout}, s.hostSide(pool.PathWarm))
}

// Every turn waits what its path's stages cost, on a day small
// enough to follow: a turn, one 10 s later (warm when parked running),
// and one 30 min later (parked running or not, it was stopped by then).
func TestRunChargesEachPathItsStages(t *testing.T) {
	st := Stages{
		Create: Fixed(1500 * time.Millisecond), Start: Fixed(750 * time.Millisecond),
		HarnessRespawn: Fixed(5 * time.Second), Mounts: Fixed(time.Second),
		ServicesHop: Fixed(200 * time.Millisecond), Checkout: Fixed(2 * time.Second),
	}
	day := []Conversation{{Sessions: []Session{{Start: Duration(9 * time.Hour), Turns: []Turn{
		{Work: Duration(time.Minute)},
		{Gap: Duration(10 * time.Second), Work: Duration(time.Minute)},
		{Gap: Duration(30 * time.Minute), Work: Duration(time.Minute)},
	}}}}}
	results, err := Run(context.Background(), Options{Stages: st, Traffic: day})
	require.NoError(t, err)
	require.Len(t, results, 3)

	pipeline := st.HarnessRespawn.Min + st.Mounts.Min + st.ServicesHop.Min + st.Checkout.Min
	created, resumed, warm := st.Create.Min+pipeline, st.Start.Min+pipeline, st.ServicesHop.Min+st.Checkout.Min
	tests := []struct {
		policy string
		paths  map[pool.Path]int
		mean   time.Duration
	}{
		{"no pool", map[pool.Path]int{pool.PathCreated: 3}, created},
		{"park-to-stopped", map[pool.Path]int{pool.PathCreated: 1, pool.PathResumed: 2}, (created + 2*resumed) / 3},
		{"park-to-running", map[pool.Path]int{pool.PathCreated: 1, pool.PathWarm: 1, pool.PathResumed: 1}, (created + warm + resumed) / 3},
	}
	for i, tt := range tests {
		r := results[i]
		assert.Equal(t, tt.policy, r.Policy)
		assert.Equal(t, 3, r.Turns, r.Policy)
		assert.Equal(t, tt.paths, r.Paths, r.Policy)
		// At least: a driver that jumps the clock while a goroutine of a
		// loaded machine is late to its next sleep can only add.
		assert.GreaterOrEqual(t, r.MeanWait, tt.mean-time.Millisecond, r.Policy)
		assert.Positive(t, r.USD, r.Policy)
	}
	assert.Less(t, results[1].RunningH, results[2].RunningH, "parking running keeps it running longer")
}

// A goroutine that enters a system call for good after the driver read its
// baseline (os/signal's loop, started late on a busy machine) does not hold
// settle forever: it is learnt as parked.
func TestSettleLearnsAGoroutineParkedInASystemCall(t *testing.T) {
	d := newDriver(clocktest.NewFake(time.Unix(0, 0)), nil)
	var fds [2]int
	require.NoError(t, unix.Pipe(fds[:])) // blocking ends: a read waits in the kernel
	released := make(chan struct{})
	go func() {
		defer close(released)
		var b [1]byte
		_, _ = unix.Read(fds[0], b[:])
	}()
	t.Cleanup(func() {
		_, _ = unix.Write(fds[1], []byte{0})
		<-released
		unix.Close(fds[0])
		unix.Close(fds[1])
	})
	require.Eventually(t, func() bool {
		metrics.Read(d.sched)
		return d.sched[2].Value.Uint64() > d.idleSyscalls
	}, 10*time.Second, time.Millisecond, "the reader is in its system call")
	settled := make(chan struct{})
	go func() {
		d.settle()
		close(settled)
	}()
	select {
	case <-settled:
	case <-time.After(time.Minute):
		t.Fatal("settle waited on a goroutine parked in a system call")
	}
}
