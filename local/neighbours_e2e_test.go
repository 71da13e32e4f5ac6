package local_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
)

// neighbourSecret is an env value of sandbox B that A must never read.
const neighbourSecret = "b-secret-value-3f9a"

// twoSandboxes starts A and B on d; B's env holds neighbourSecret.
func twoSandboxes(t *testing.T, d *testdaemon.Daemon) (a, b *provider.Sandbox) {
	t.Helper()
	ctx := context.Background()
	a, err := d.P.Create(ctx, provider.CreateRequest{Name: "a", AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	b, err = d.P.Create(ctx, provider.CreateRequest{Name: "b", AutoStopInterval: ptr(0), EnvVars: map[string]string{"KEY": neighbourSecret}})
	require.NoError(t, err)
	return a, b
}

// execIn runs command through s's toolbox and returns its exit code and
// output.
func execIn(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox, command string) (int, string) {
	t.Helper()
	resp := postJSON(t, d.P, s, "/process/execute", map[string]any{"command": command})
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.ExitCode, out.Result
}

// TestSandboxesCannotReadEachOther is the regression test for sandbox A's
// toolbox downloading sandbox B's runtime-env.json (B's secrets) from the
// daemon's root. By default the file API refuses the daemon's state
// directory; with isolation on, not even a shell in A sees it.
func TestSandboxesCannotReadEachOther(t *testing.T) {
	t.Run("default: the file API", func(t *testing.T) {
		d := testdaemon.Start(t, testdaemon.Options{})
		a, b := twoSandboxes(t, d)
		for _, name := range []string{"runtime-env.json", "sandbox-token", "sandbox.json"} {
			path := filepath.Join(d.Root, b.ID, name)
			resp := toolboxDo(t, d.P, a, http.MethodGet, "/files/download?path="+url.QueryEscape(path), "")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", name, body)
			assert.NotContains(t, string(body), neighbourSecret)
		}
		resp := toolboxDo(t, d.P, a, http.MethodGet, "/files?path="+url.QueryEscape(d.Root), "")
		resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "the daemon's root cannot be listed")
	})
	t.Run("isolation bwrap: a shell too", func(t *testing.T) {
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Skip("bubblewrap is not installed: apt-get install bubblewrap")
		}
		d := testdaemon.Start(t, testdaemon.Options{Config: "isolation: bwrap\n"})
		a, b := twoSandboxes(t, d)
		code, out := execIn(t, d, a, "cat "+filepath.Join(d.Root, b.ID, "runtime-env.json"))
		assert.NotZero(t, code, out)
		assert.NotContains(t, out, neighbourSecret)
		// Where B's files live, and every place a sandbox can write.
		code, out = execIn(t, d, a, "grep -rl "+neighbourSecret+" "+d.Root+" /tmp /home \"$HOME\" 2>/dev/null; echo done")
		assert.Zero(t, code, out)
		assert.Equal(t, "done\n", out, "no file A can read holds B's secret")
	})
}
