package pool_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/pool"
)

// The local daemon: real `sandplane serve`, native workloads running the
// toolbox, stop events with the pool's reasons, and no auto-delete, so the
// pool deletes what stays parked stopped.
func TestPoolOnLocal(t *testing.T) {
	const minute = time.Second
	d := testdaemon.Start(t, testdaemon.Options{Minute: minute})
	w := world{
		prov:   d.P,
		minute: minute,
		events: func(t *testing.T, name string) *eventLog { return watchEvents(t, d.P, name) },
	}
	scenarios(t, w)

	t.Run("the pool deletes what stays parked stopped", func(t *testing.T) {
		r := newRig(t, w, pool.WithKeepWarm(0), pool.WithStoppedTTL(time.Second))
		l := r.acquire("conv", spec)
		r.release(l, pool.OutcomeOK)
		r.expectStopEvent(l.Sandbox.ID, "pool: parked")
		r.eventuallyState(l.Sandbox.ID, "", "the parked-stopped TTL")
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonTTLExpired))
	})

	t.Run("a manual stop says stopped", func(t *testing.T) {
		r := newRig(t, w)
		l := r.acquire("conv", spec)
		_, err := d.P.Stop(r.ctx, l.Sandbox.ID)
		assert.NoError(t, err)
		r.expectStopEvent(l.Sandbox.ID, provider.StopReasonManual)
		r.release(l, pool.OutcomeOK)
		next := r.acquire("conv", spec)
		assert.Equal(t, pool.PathResumed, next.Path, "stopped underneath the pool: resumed")
		r.release(next, pool.OutcomeOK)
	})
}
