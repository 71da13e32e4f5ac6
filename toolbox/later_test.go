package toolbox

import (
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// POST /env changes what every process started afterwards inherits.
func TestUpdateEnv(t *testing.T) {
	t.Setenv("SANDPLANE_TEST_GONE", "x")
	t.Setenv("SANDPLANE_TEST_PLACEHOLDER", "ph:1")
	ts := newTestServer(t, Options{})
	run := func(t *testing.T, command string) string {
		t.Helper()
		resp := ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: command})
		require.Equal(t, http.StatusOK, resp.status, string(resp.body))
		var out wire.ExecuteResponse
		resp.json(t, &out)
		return out.Result
	}
	tests := []struct {
		name   string
		req    wire.UpdateEnvRequest
		status int
		after  string
	}{
		{"set", wire.UpdateEnvRequest{Set: map[string]string{"SANDPLANE_TEST_A": "one"}}, 200, "one|x|ph:1"},
		{"unset", wire.UpdateEnvRequest{Unset: []string{"SANDPLANE_TEST_GONE"}}, 200, "one||ph:1"},
		{"unset by value prefix", wire.UpdateEnvRequest{UnsetValuePrefix: "ph:"}, 200, "one||"},
		{"set again", wire.UpdateEnvRequest{Set: map[string]string{"SANDPLANE_TEST_GONE": "back"}}, 200, "one|back|"},
		{"nothing to change", wire.UpdateEnvRequest{}, 400, "one|back|"},
		{"bad name", wire.UpdateEnvRequest{Set: map[string]string{"A=B": "x"}}, 400, "one|back|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/env", tt.req)
			require.Equal(t, tt.status, resp.status, string(resp.body))
			assert.NotContains(t, string(resp.body), "one", "values are never echoed")
			assert.Equal(t, tt.after+"\n", run(t, `echo "$SANDPLANE_TEST_A|$SANDPLANE_TEST_GONE|$SANDPLANE_TEST_PLACEHOLDER"`))
		})
	}
	_, inProcess := os.LookupEnv("SANDPLANE_TEST_A")
	assert.False(t, inProcess, "the toolbox's own environment is unchanged")

	t.Run("sessions started afterwards inherit it", func(t *testing.T) {
		require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "env"}).status)
		resp := ts.postJSON(t, "/process/session/env/exec", wire.SessionExecuteRequest{Command: `echo "$SANDPLANE_TEST_A"`})
		require.Equal(t, http.StatusOK, resp.status, string(resp.body))
		var out wire.SessionExecuteResponse
		resp.json(t, &out)
		require.NotNil(t, out.Output)
		assert.Equal(t, "one\n", *out.Output)
	})
}

func TestSystemMetrics(t *testing.T) {
	ts := newTestServer(t, Options{})
	resp := ts.get(t, "/system/metrics")
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	var m wire.SystemMetrics
	resp.json(t, &m)
	assert.Contains(t, []string{scopeSandbox, scopeMachine}, resp.header.Get(scopeHeader), "the figures say whose they are")
	assert.GreaterOrEqual(t, m.CPUCount, 1)
	assert.LessOrEqual(t, m.CPUCount, runtime.NumCPU())
	assert.GreaterOrEqual(t, m.CPUUsedPct, 0.0)
	assert.LessOrEqual(t, m.CPUUsedPct, 100.0)
	assert.NotEmpty(t, m.Timestamp)
	assert.NotZero(t, m.TimestampUnix)
	if runtime.GOOS == "linux" {
		assert.NotZero(t, m.MemTotal)
		assert.LessOrEqual(t, m.MemUsed, m.MemTotal)
		assert.NotZero(t, m.DiskTotal)
		assert.LessOrEqual(t, m.DiskUsed, m.DiskTotal)
		assert.LessOrEqual(t, m.DiskFree, m.DiskTotal)
	}
}

// POST /git/credentials stores credentials that later git commands use, in
// the sandbox's own file: the global git configuration and the home's
// ~/.git-credentials (the user's, for a native sandbox) stay as they were.
func TestGitStoredCredentials(t *testing.T) {
	globalConfig := isolateGit(t)
	before, err := os.ReadFile(globalConfig)
	require.NoError(t, err)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ts := newTestServer(t, Options{HomeDir: home})

	resp := ts.postJSON(t, "/git/credentials", wire.GitAuthenticateRequest{Username: "ada", Password: "s3cret-token", Host: "git.example.com"})
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	resp = ts.postJSON(t, "/git/credentials", wire.GitAuthenticateRequest{Username: "ada", Password: "s3cret-token", Host: "git.example.com"})
	require.Equal(t, http.StatusOK, resp.status, "twice is fine: %s", resp.body)
	assert.NoFileExists(t, filepath.Join(home, ".git-credentials"))
	p := filepath.Join(ts.workDir, ".git-credentials")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the store holds a secret")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "https://ada:s3cret-token@git.example.com\n", string(b))
	after, err := os.ReadFile(globalConfig)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the global git configuration is untouched")

	resp = ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: `printf 'protocol=https\nhost=git.example.com\n\n' | git credential fill`})
	require.Equal(t, http.StatusOK, resp.status)
	var out wire.ExecuteResponse
	resp.json(t, &out)
	assert.Contains(t, out.Result, "password=s3cret-token", "git finds them")

	for name, req := range map[string]wire.GitAuthenticateRequest{
		"no password":  {Username: "ada"},
		"line break":   {Username: "ada", Password: "x\nhost=evil"},
		"no user name": {Password: "x"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := ts.postJSON(t, "/git/credentials", req)
			assert.Equal(t, http.StatusBadRequest, resp.status, string(resp.body))
			assert.NotContains(t, string(resp.body), "x\nhost")
		})
	}
}
