package native

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// counterScript writes an ever-growing count to file every 50 ms, through a
// child (sleep) each round, so that a pause must stop a tree of processes.
func counterScript(file string) string {
	return `i=0; while :; do i=$((i+1)); echo $i > '` + file + `.tmp'; mv '` + file + `.tmp' '` + file + `'; sleep 0.05; done`
}

// readCounter is the count in file, 0 before the first write.
func readCounter(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// requireAllStopped checks that every process of h's workload is stopped.
func requireAllStopped(t *testing.T, h driver.Handle) {
	t.Helper()
	procs, err := processTable()
	require.NoError(t, err)
	ms := members(procs, h.PID)
	require.NotEmpty(t, ms)
	for _, pid := range ms {
		assert.True(t, stopped(procs[pid]), "process %d of the workload is in state %c after Pause", pid, procs[pid].State)
	}
}

func TestPauseFreezesAndResumeContinues(t *testing.T) {
	for _, mode := range containments {
		t.Run(mode, func(t *testing.T) {
			r := New(WithContainment(mode))
			spec := newSpec(t, "", "sh")
			counter := filepath.Join(spec.Dir, "counter")
			spec.Command = []string{"sh", "-c", counterScript(counter)}
			h := start(t, r, spec)
			require.Eventually(t, func() bool { return readCounter(counter) >= 2 }, hangGuard, 10*time.Millisecond)

			require.NoError(t, r.Pause(testCtx(t), h))
			require.NoError(t, r.Pause(testCtx(t), h), "pausing a paused workload")
			requireAllStopped(t, h)
			frozen := readCounter(counter)
			time.Sleep(300 * time.Millisecond) // safe: a running loop writes six times in this while; a frozen one never does
			assert.Equal(t, frozen, readCounter(counter), "the counter moved while paused")
			assert.True(t, status(t, r, h).Running, "a paused workload still runs")

			require.NoError(t, r.Resume(testCtx(t), h))
			require.NoError(t, r.Resume(testCtx(t), h), "resuming a running workload")
			require.Eventually(t, func() bool { return readCounter(counter) != frozen }, hangGuard, 10*time.Millisecond,
				"the counter never moved after Resume")
			up, err := alive(h)
			require.NoError(t, err)
			assert.True(t, up, "the same process runs on after Resume")
		})
	}
}

func TestStopEndsAPausedWorkload(t *testing.T) {
	for _, mode := range containments {
		t.Run(mode, func(t *testing.T) {
			r := New(WithContainment(mode))
			spec := newSpec(t, "", "sh", "-c", "echo ready; exec sleep 30")
			h := start(t, r, spec)
			waitForLog(t, r, h, spec.Dir, "ready")
			require.NoError(t, r.Pause(testCtx(t), h))
			// The SIGTERM waits for a SIGCONT; the SIGKILL after the grace
			// does not.
			require.NoError(t, r.Stop(testCtx(t), h, 100*time.Millisecond))
			assert.False(t, status(t, r, h).Running)
		})
	}
}

func TestPauseOfAnEndedWorkload(t *testing.T) {
	r := New()
	spec := newSpec(t, "", "true")
	h := start(t, r, spec)
	_, err := r.Wait(testCtx(t), h)
	require.NoError(t, err)
	for name, op := range map[string]func() error{
		"pause":  func() error { return r.Pause(testCtx(t), h) },
		"resume": func() error { return r.Resume(testCtx(t), h) },
	} {
		err := op()
		assert.True(t, provider.Code(err) == provider.FailedPrecondition, "%s: %v", name, err)
	}
}
