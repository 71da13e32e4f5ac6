package engine

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDue is the crons' table: which job a sandbox is owed, with its last
// activity two minutes ago and a one-minute minute.
func TestDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := now.Add(-2 * time.Minute)
	row := func(state string, stop, archive, del int) Row {
		return Row{State: state, Desired: state, Settled: true, LastActivity: ago,
			AutoStop: stop, AutoArchive: archive, AutoDelete: del}
	}
	tests := []struct {
		name string
		r    Row
		want Job
	}{
		{"started idle past auto-stop", row(Started, 1, 10080, -1), StopJob},
		{"started within auto-stop", row(Started, 3, 10080, -1), NoJob},
		{"auto-stop 0 never stops", row(Started, 0, 10080, -1), NoJob},
		{"stopped idle past auto-delete", row(Stopped, 15, 1, 1), DeleteJob},
		{"auto-delete 0 deletes at once", row(Stopped, 15, 10080, 0), DeleteJob},
		{"auto-delete before auto-archive", row(Stopped, 15, 1, 1), DeleteJob},
		{"stopped idle past auto-archive", row(Stopped, 15, 1, -1), ArchiveJob},
		{"stopped within both", row(Stopped, 15, 3, 3), NoJob},
		{"archived: nothing", row(Archived, 1, 1, -1), NoJob},
		{"an interval past what a Duration holds never runs out", row(Started, math.MaxInt32, 10080, -1), NoJob},
		{"started idle past auto-pause", func() Row { r := row(Started, 0, 10080, -1); r.AutoPause = 1; return r }(), PauseJob},
		{"started within auto-pause", func() Row { r := row(Started, 0, 10080, -1); r.AutoPause = 3; return r }(), NoJob},
		{"auto-pause 0 never pauses", row(Started, 0, 10080, -1), NoJob},
		{"auto-stop before auto-pause", func() Row { r := row(Started, 1, 10080, -1); r.AutoPause = 1; return r }(), StopJob},
		{"paused: nothing", func() Row { r := row(Paused, 1, 1, 1); r.AutoPause = 1; return r }(), NoJob},
		{"paused past its TTL", func() Row { r := row(Paused, 0, 10080, -1); r.AutoPause = 1; r.AutoDestroyAt = ago; return r }(), ExpireJob},
		{"warm pool left alone", func() Row { r := row(Started, 1, 1, 1); r.Pool = true; return r }(), NoJob},
		{"not settled", func() Row { r := row(Started, 1, 1, 1); r.Settled = false; return r }(), NoJob},
		{"on its way elsewhere", func() Row { r := row(Started, 1, 1, 1); r.Desired = WantStopped; return r }(), NoJob},
		{"past its TTL, busy or not", func() Row { r := row(Started, 0, 10080, -1); r.LastActivity = now; r.AutoDestroyAt = now; return r }(), ExpireJob},
		{"TTL before auto-stop", func() Row { r := row(Started, 1, 1, 1); r.AutoDestroyAt = ago; return r }(), ExpireJob},
		{"past its TTL on its way to archive", func() Row { r := row(Stopped, 15, 1, -1); r.Desired = WantArchived; r.AutoDestroyAt = ago; return r }(), ExpireJob},
		{"within its TTL", func() Row { r := row(Started, 0, 10080, -1); r.AutoDestroyAt = now.Add(time.Nanosecond); return r }(), NoJob},
		{"past its TTL, already going", func() Row {
			r := row(Started, 0, 10080, -1)
			r.Desired = WantDestroyed
			r.AutoDestroyAt = ago
			return r
		}(), NoJob},
		{"past its TTL, not settled", func() Row { r := row(Started, 0, 10080, -1); r.Settled = false; r.AutoDestroyAt = ago; return r }(), NoJob},
		{"past its TTL in the warm pool", func() Row { r := row(Started, 0, 10080, -1); r.Pool = true; r.AutoDestroyAt = ago; return r }(), NoJob},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Due(tc.r, now, time.Minute))
		})
	}
}

// TestDueScalesWithTheMinute: with a one-second minute, a one-minute
// auto-stop runs out after a second.
func TestDueScalesWithTheMinute(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := Row{State: Started, Desired: Started, Settled: true, AutoStop: 1, LastActivity: now.Add(-1500 * time.Millisecond)}
	assert.Equal(t, StopJob, Due(r, now, time.Second))
	assert.Equal(t, NoJob, Due(r, now, time.Minute))
}
