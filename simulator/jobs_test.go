package simulator

import (
	"testing"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/engine"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJobsCheckAgainBeforeActing: the jobs find what is due under the lock
// shared and act under it exclusively, so a sandbox found due that moved on
// in between (here: its activity refreshed) is left alone.
func TestJobsCheckAgainBeforeActing(t *testing.T) {
	h := newHarness(t)
	created := h.create(apiclient.CreateSandbox{AutoStopInterval: ptr(int32(1))})
	now := h.clk.Now()

	h.sim.mu.Lock()
	defer h.sim.mu.Unlock()
	sb := h.sim.rows.Get(created.Id)
	require.NotNil(t, sb)
	sb.LastActivity = now.Add(-2 * time.Minute)
	h.sim.rows.ActivityMoved(sb)
	require.Equal(t, engine.StopJob, h.sim.eng.jobFor(sb, now), "idle for two minutes with a one-minute auto-stop")

	sb.LastActivity = now // a refresh lands between the look and the act
	h.sim.rows.ActivityMoved(sb)
	assert.False(t, h.sim.eng.runJobLocked(sb, now))
	assert.Equal(t, dsStarted, sb.Desired)
	assert.False(t, sb.Pending)

	sb.LastActivity = now.Add(-2 * time.Minute)
	h.sim.rows.ActivityMoved(sb)
	assert.True(t, h.sim.eng.runJobLocked(sb, now))
	assert.Equal(t, dsStopped, sb.Desired)
}
