package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
)

// A simulator keeps its sandboxes in memory only, so none may outlive it:
// killed with SIGKILL, with no chance to clean up, it still leaves no
// workload behind.
func TestSimKilledLeavesNoSandbox(t *testing.T) {
	sim, do := startBareSim(t)
	code, body := do("POST", "/api/sandbox", `{"name":"orphan-to-be"}`)
	require.Equal(t, http.StatusOK, code, body)
	id := idOf(t, body)
	// The simulator runs with no PATH: the job names its own. It prints
	// the mark that its sandbox's processes, init and toolbox included,
	// carry in their environment, started cold or parked alike.
	code, body = do("POST", "/toolbox/"+id+"/process/execute",
		`{"command":"/bin/sh -c 'PATH=/usr/bin:/bin; sleep 300 & echo $SANDPLANE_SANDBOX_ID'"}`)
	require.Equal(t, http.StatusOK, code, body)
	var out struct{ Result string }
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	mark := "SANDPLANE_SANDBOX_ID=" + strings.TrimSpace(out.Result)
	require.Greater(t, len(processesMarked(t, mark)), 2, "the sandbox's init, toolbox and job, by their mark %q", mark)

	require.NoError(t, sim.Process.Kill())
	require.Eventually(t, func() bool { return len(processesMarked(t, mark)) == 0 }, 30*time.Second, 20*time.Millisecond,
		"the sandbox outlived its simulator: %v", processesMarked(t, mark))
}

// processesMarked lists the live processes whose environment holds mark.
func processesMarked(t *testing.T, mark string) []int {
	return testdaemon.ProcessesWhere(t, "environ", func(env []byte) bool {
		return slices.Contains(strings.Split(string(env), "\x00"), mark)
	})
}
