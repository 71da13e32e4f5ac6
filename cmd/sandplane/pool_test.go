package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
)

// The model runs in a process of its own: its driver reads the whole
// process's scheduler, which the other tests' goroutines would disturb.
func TestPoolSimulateTakesAHostsStagesAndTraffic(t *testing.T) {
	dir := t.TempDir()
	stages := filepath.Join(dir, "stages.json")
	traffic := filepath.Join(dir, "traffic.json")
	require.NoError(t, os.WriteFile(stages, []byte(`{"harnessRespawn": "3s", "checkout": "1s"}`), 0o600))
	require.NoError(t, os.WriteFile(traffic, []byte(`[{"sessions": [{"start": "9h", "turns": [
		{"gap": "0s", "work": "60s"}, {"gap": "10s", "work": "60s"}]}]}]`), 0o600))
	cmd := exec.Command(testdaemon.Binary(t), "pool", "simulate", "--stages", stages, "--traffic", traffic)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), out.String())
	assert.Contains(t, out.String(), "a simulated day of 2 turns in 1 conversations")
	assert.Contains(t, out.String(), "harness respawn 3s")
	assert.Contains(t, out.String(), "| no pool |")
	assert.Contains(t, out.String(), "| 2/0/0 |", "no pool creates every turn's sandbox")
	assert.Contains(t, out.String(), "| 1/0/1 |", "parked running, the second turn is warm")
	assert.Contains(t, out.String(), "| 1/1/0 |", "parked stopped, the second turn resumes")
}

func TestPoolSimulateRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown stage", []string{"--stages", write("a.json", `{"boot": "1s"}`)}, `unknown field "boot"`},
		{"bad duration", []string{"--stages", write("b.json", `{"mounts": "soon"}`)}, `"soon"`},
		{"no stages file", []string{"--stages", filepath.Join(dir, "none.json")}, "no such file"},
		{"empty day", []string{"--traffic", write("c.json", `[]`)}, "holds no conversation"},
		{"day too long", []string{"--traffic", write("d.json", `[{"sessions": [{"start": "25h", "turns": []}]}]`)}, "a day has 24h"},
		{"no conversations", []string{"--conversations", "0"}, "must be above 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := newRootCmd()
			var out bytes.Buffer
			root.SetArgs(append([]string{"pool", "simulate"}, tt.args...))
			root.SetOut(&out)
			root.SetErr(&out)
			err := root.ExecuteContext(context.Background())
			require.Error(t, err)
			assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// pool verify is the zero-leak check a host runs after its pool shut down:
// a live sandbox with the pool's label fails it, naming the sandbox; a
// stopped one, another pool's, or none at all passes.
func TestPoolVerifyNamesWhatALivePoolLeft(t *testing.T) {
	d := startCLIDaemon(t)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "leak", "--label", "sandplane.pool=agents").code)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "parked", "--label", "sandplane.pool=agents").code)
	require.Equal(t, 0, d.cli(t, "stop", "parked").code)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "theirs", "--label", "sandplane.pool=other").code)

	r := d.cli(t, "pool", "verify", "--name", "agents")
	assert.Equal(t, 2, r.code, "a live sandbox is a leak: %s", r.stderr)
	assert.Contains(t, r.stderr, `pool "agents": 1 live sandboxes remain: leak (started)`)
	assert.NotContains(t, r.stderr, "parked", "a stopped sandbox reaps itself")
	assert.NotContains(t, r.stderr, "theirs", "another pool's sandbox is not this pool's leak")

	require.Equal(t, 0, d.cli(t, "rm", "leak").code)
	r = d.cli(t, "pool", "verify", "--name", "agents")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "pool agents: no live sandbox\n", r.stdout)

	r = d.cli(t, "pool", "verify", "--name", "nobody")
	assert.Equal(t, 0, r.code, r.stderr)
}
