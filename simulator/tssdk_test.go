package simulator

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/runtime/native"
	"github.com/sandplane/sandplane/provider/clock"
)

// TestOfficialTypeScriptSDK runs testdata/ts-sdk/sdk-test.js, which drives a
// whole lifecycle with @daytonaio/sdk, against a simulator whose sandboxes
// run the real toolbox. `make test` installs the SDK (npm ci) first.
func TestOfficialTypeScriptSDK(t *testing.T) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the TypeScript SDK test needs Node 20+")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "ts-sdk"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@daytonaio", "sdk", "package.json")); err != nil {
		t.Skip("the TypeScript SDK is not installed: run `npm ci` in simulator/testdata/ts-sdk (make test does)")
	}

	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime: native.New(clock.Real()),
		Root:    t.TempDir(),
		Command: []string{toolboxBinary(t)},
	})
	require.NoError(t, err)
	sim, err := New(Config{Backend: be, ValidateResponses: true, APIKeys: []string{"ts-sdk-key"}, AdminKey: "ts-sdk-admin-key"})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, sim.Close())
	})

	// Generous, only so that a wedged run cannot hang the suite.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "sdk-test.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"DAYTONA_API_URL="+srv.URL+"/api",
		"DAYTONA_API_KEY=ts-sdk-key",
		"SANDPLANE_SIM_ADMIN_KEY=ts-sdk-admin-key",
		"DAYTONA_TARGET=",
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node sdk-test.js failed:\n%s\n%s", out, stderr.String())

	var res struct {
		OK   bool   `json:"ok"`
		ID   string `json:"id"`
		Seen struct {
			Created string `json:"created"`
			Stopped string `json:"stopped"`
			Listed  int    `json:"listed"`
		} `json:"seen"`
	}
	t.Logf("node: %s", out)
	require.NoError(t, json.Unmarshal(lastLine(out), &res), string(out))
	assert.True(t, res.OK)
	assert.Equal(t, "started", res.Seen.Created)
	assert.Equal(t, "stopped", res.Seen.Stopped)
	assert.Equal(t, 1, res.Seen.Listed)

	counts := sim.calls.counts(everyOrg)
	for _, op := range []string{"createSandbox", "toolbox", "stopSandbox", "startSandbox", "updateLastActivity",
		"setAutostopInterval", "getPortPreviewUrl", "listSandboxes", "deleteSandbox", "getSandbox"} {
		assert.NotZero(t, counts[op], "the SDK run made no %s call", op)
	}
	for _, c := range sim.Calls() {
		switch {
		case c.Operation == "getSandbox" && c.Status == 404:
			// the reads after delete, until the sandbox is gone
		default:
			assert.Less(t, c.Status, 300, "%s %s (%s) answered %d", c.Method, c.Path, c.Operation, c.Status)
		}
	}
	assert.Empty(t, sim.SpecViolations())
}

func lastLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return []byte(lines[len(lines)-1])
}
