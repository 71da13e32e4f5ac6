package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	c := Default([]string{"sandplane", "toolbox"})
	file := filepath.Join(t.TempDir(), "sandplane.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
minute: 2s
autoStopMinutes: 5
ports: {min: 5000, max: 5010}
passEnv: [MY_KEY]
snapshots:
  python:
    command: [python3, -m, http.server]
    env: {A: b}
`), 0o600))
	require.NoError(t, c.LoadFile(file))
	require.NoError(t, c.LoadEnv(envOf(map[string]string{EnvMinute: "1s", EnvReapInterval: "250", EnvReapOnExit: "1"})))
	require.NoError(t, c.Validate())

	assert.Equal(t, time.Second, c.Minute, "env beats file")
	assert.Equal(t, 5, c.AutoStopMinutes)
	assert.Equal(t, 250*time.Millisecond, c.ReapInterval)
	assert.True(t, c.ReapOnExit)
	assert.Equal(t, 5000, c.Ports.Min)
	assert.Equal(t, []string{"sandplane", "toolbox"}, c.Snapshots["default"].Command, "built-in default survives the file")
	assert.Equal(t, "b", c.Snapshots["python"].Env["A"])
	assert.Equal(t, map[string]string{"MY_KEY": "v"}, c.PassEnvValues(envOf(map[string]string{"MY_KEY": "v", "OTHER": "x"})))
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		yaml string
	}{
		{name: "bad minute", env: map[string]string{EnvMinute: "soon"}},
		{name: "bad reap", env: map[string]string{EnvReapInterval: "1m"}},
		{name: "bad bool", env: map[string]string{EnvReapOnExit: "maybe"}},
		{name: "negative autostop", yaml: "autoStopMinutes: -1"},
		{name: "port range", yaml: "ports: {min: 10, max: 5}"},
		{name: "empty snapshot", yaml: "snapshots: {x: {env: {A: b}}}"},
		{name: "bad ready", yaml: "snapshots: {x: {command: [a], ready: maybe}}"},
		{name: "not yaml", yaml: "{{{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default([]string{"x"})
			var err error
			if tt.yaml != "" {
				f := filepath.Join(t.TempDir(), "c.yaml")
				require.NoError(t, os.WriteFile(f, []byte(tt.yaml), 0o600))
				err = c.LoadFile(f)
			}
			if err == nil {
				err = c.LoadEnv(envOf(tt.env))
			}
			if err == nil {
				err = c.Validate()
			}
			assert.Error(t, err)
		})
	}
}
