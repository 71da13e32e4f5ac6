package main

import (
	"net/http"
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
	code, body = do("POST", "/toolbox/"+id+"/process/execute", `{"command":"sleep 300 & echo started"}`)
	require.Equal(t, http.StatusOK, code, body)
	require.NotEmpty(t, processesNaming(t, id), "the sandbox's init names its directory, and so its id")

	require.NoError(t, sim.Process.Kill())
	require.Eventually(t, func() bool { return len(processesNaming(t, id)) == 0 }, 30*time.Second, 20*time.Millisecond,
		"the sandbox outlived its simulator: %v", processesNaming(t, id))
}

// processesNaming lists the live processes whose command line contains s.
func processesNaming(t *testing.T, s string) []int {
	return testdaemon.ProcessesWhere(t, "cmdline", func(cmdline []byte) bool { return strings.Contains(string(cmdline), s) })
}
