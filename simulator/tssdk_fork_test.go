package simulator

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The newest SDK reads the entrypoint session of a default sandbox and of
// one whose snapshot names its entrypoint, at once and followed over the
// WebSocket, through the simulator's toolbox proxy.
func TestOfficialTypeScriptSDKEntrypoint(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t)
	out := runSDK(t, sdk.pkg, "entrypoint", url)
	type logs struct{ Stdout, Stderr string }
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			DefaultCommand, EntryCommand string
			Followed, Logs               logs
			ExitCode                     *int
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	assert.Equal(t, "'sleep' 'infinity'", res.Seen.DefaultCommand, "Daytona's default image sleeps")
	assert.Equal(t, `'sh' '-c' 'echo entry-up; sleep 0.3; echo entry-warn >&2'`, res.Seen.EntryCommand)
	want := logs{Stdout: "entry-up\n", Stderr: "entry-warn\n"}
	assert.Equal(t, want, res.Seen.Followed, "followed until the entrypoint ended")
	assert.Equal(t, want, res.Seen.Logs)
	if assert.NotNil(t, res.Seen.ExitCode) {
		assert.Equal(t, 0, *res.Seen.ExitCode)
	}
	assertCallsSucceeded(t, sim)
	assert.Empty(t, sim.SpecViolations())
}

// The newest SDK forks a sandbox: the fork has the source's files and its
// own id, the source keeps running, later writes stay on their side, and
// forks, parent and ancestors answer the lineage.
func TestOfficialTypeScriptSDKFork(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t)
	out := runSDK(t, sdk.pkg, "fork", url)
	var res struct {
		OK   bool   `json:"ok"`
		ID   string `json:"id"`
		Seen struct {
			Fork             struct{ ID, Name, State, SourceState string }
			Copied           string
			InSource, InFork []string
			Forks, Ancestors []string
			Parent           string
			Lineage          struct{ Fork, Grand string }
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	s := res.Seen
	assert.Equal(t, "ts-forked", s.Fork.Name)
	assert.Equal(t, "started", s.Fork.State)
	assert.Equal(t, "started", s.Fork.SourceState, "a started source keeps running")
	assert.Equal(t, "from the source\n", s.Copied)
	assert.Equal(t, []string{"kept.txt", "source.txt"}, s.InSource)
	assert.Equal(t, []string{"fork.txt", "kept.txt"}, s.InFork)
	assert.Equal(t, []string{s.Lineage.Fork}, s.Forks)
	assert.Equal(t, s.Lineage.Fork, s.Parent)
	assert.Equal(t, []string{s.Lineage.Fork, res.ID}, s.Ancestors)
	assertCallsSucceeded(t, sim)
	assert.Empty(t, sim.SpecViolations())
}

// The newest SDK pauses a sandbox (its processes freeze) and starts it
// again (the same processes run on).
func TestOfficialTypeScriptSDKPause(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t)
	out := runSDK(t, sdk.pkg, "pause", url)
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			Paused, PausedOnGet, Started string
			RanOn                        bool
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	assert.Equal(t, "paused", res.Seen.Paused)
	assert.Equal(t, "paused", res.Seen.PausedOnGet)
	assert.Equal(t, "started", res.Seen.Started)
	assert.True(t, res.Seen.RanOn, "the resumed processes run on")
	assertCallsSucceeded(t, sim)
	assert.Empty(t, sim.SpecViolations())
}
