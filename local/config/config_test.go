package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
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
previewIdleKeepAlive: 90s
snapshots:
  python:
    command: [python3, -m, http.server]
    env: {A: b}
    port: 8000
    ports: [3000, 5173]
    ready: http
  fast:
    image: some-image
    network: host
    ready: port
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
	assert.Equal(t, "host", c.Snapshots["fast"].Network)
	assert.Equal(t, "port", c.Snapshots["fast"].Ready)
	assert.Equal(t, "http", c.Snapshots["python"].Ready)
	assert.Equal(t, 8000, c.Snapshots["python"].Port)
	assert.Equal(t, []int{3000, 5173}, c.Snapshots["python"].Ports)
	assert.Equal(t, 90*time.Second, c.PreviewIdleKeepAlive)
	assert.Equal(t, map[string]string{"MY_KEY": "v"}, c.PassEnvValues(envOf(map[string]string{"MY_KEY": "v", "OTHER": "x"})))
}

func TestFileDeclaresPortsOfTheDefaultSnapshot(t *testing.T) {
	c := Default([]string{"sandplane", "toolbox"})
	file := filepath.Join(t.TempDir(), "sandplane.yaml")
	require.NoError(t, os.WriteFile(file, []byte("snapshots:\n  default:\n    ports: [3000]\n    env: {A: b}\n"), 0o600))
	require.NoError(t, c.LoadFile(file))
	require.NoError(t, c.Validate())
	def := c.Snapshots[DefaultSnapshot]
	assert.Equal(t, []string{"sandplane", "toolbox"}, def.Command, "a default that names no command keeps the built-in one")
	assert.Equal(t, []int{3000}, def.Ports)
	assert.Equal(t, "b", def.Env["A"])

	replaced := Default([]string{"sandplane", "toolbox"})
	require.NoError(t, os.WriteFile(file, []byte("snapshots:\n  default:\n    command: [my-server]\n"), 0o600))
	require.NoError(t, replaced.LoadFile(file))
	assert.Equal(t, []string{"my-server"}, replaced.Snapshots[DefaultSnapshot].Command, "one that names a command replaces it")
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
		{name: "bad isolation", yaml: "isolation: chroot"},
		{name: "bad snapshot isolation", yaml: "snapshots: {x: {command: [a], isolation: jail}}"},
		{name: "bad snapshot network", yaml: "snapshots: {x: {image: a, network: bridge}}"},
		{name: "not yaml", yaml: "{{{"},
		{name: "workload port out of range", yaml: "snapshots: {x: {command: [a], port: 70000}}"},
		{name: "extra port out of range", yaml: "snapshots: {x: {command: [a], ports: [0]}}"},
		{name: "a port twice", yaml: "snapshots: {x: {command: [a], ports: [3000, 3000]}}"},
		{name: "the workload port among the others", yaml: "snapshots: {x: {command: [a], port: 3000, ports: [3000]}}"},
		{name: "the default workload port among the others", yaml: "snapshots: {x: {command: [a], ports: [4000]}}"},
		{name: "negative idle keep-alive", yaml: "previewIdleKeepAlive: -1s"},
		{name: "unknown activity rule", yaml: "activity: previews-only"},
		{name: "unknown activity rule from the environment", env: map[string]string{EnvActivity: "client"}},
		{name: "a misspelt snapshot key", yaml: "snapshots: {x: {command: [a], isolaton: bwrap}}"},
		{name: "a misspelt key", yaml: "autoStopMinute: 5"},
		{name: "a misspelt port range key", yaml: "ports: {minimum: 10}"},
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

// A key the daemon does not know is refused, naming it, where it stands
// and the keys that would do: a typo in isolation must not leave a sandbox
// unisolated without a word.
func TestUnknownKeysAreRefusedByName(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"snapshots:\n  x:\n    command: [a]\n    isolaton: bwrap\n", `line 4: unknown key "isolaton" in a snapshot (a typo? the keys there are command, image, imageCommand, env, workDir, user, ready, isolation, network, port, ports)`},
		{"autoStopMinute: 5\n", `line 1: unknown key "autoStopMinute" at the top level (a typo? the keys there are listen, root, minute`},
		{"ports: {minimum: 10}\n", `line 1: unknown key "minimum"`},
	}
	for _, tt := range tests {
		c := Default([]string{"x"})
		f := filepath.Join(t.TempDir(), "c.yaml")
		require.NoError(t, os.WriteFile(f, []byte(tt.yaml), 0o600))
		err := c.LoadFile(f)
		require.Error(t, err, tt.yaml)
		assert.Contains(t, err.Error(), tt.want)
	}
	c := Default([]string{"x"})
	f := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	assert.NoError(t, c.LoadFile(f), "an empty file is no settings")
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode)) // past the umask
		return p
	}
	tests := []struct {
		name  string
		path  string
		token string
		err   string
	}{
		{"0600 with a newline", write("ok", "s3cret\n", 0o600), "s3cret", ""},
		{"0400", write("ro", "s3cret", 0o400), "s3cret", ""},
		{"readable by others", write("open", "s3cret", 0o644), "", "chmod 600"},
		{"readable by the group", write("group", "s3cret", 0o640), "", "chmod 600"},
		{"empty", write("empty", " \n", 0o600), "", "empty"},
		{"two lines", write("two", "a\nb\n", 0o600), "", "one line"},
		{"a directory", dir, "", "not a regular file"},
		{"missing", filepath.Join(dir, "missing"), "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default([]string{"x"})
			c.Token = "from-env"
			require.NoError(t, c.LoadEnv(envOf(map[string]string{EnvTokenFile: tt.path})))
			err := c.ResolveToken()
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.NotContains(t, err.Error(), "s3cret", "the token never reaches an error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.token, c.Token, "the file wins over SANDPLANE_TOKEN")
		})
	}
}

func TestTokenIsNeverPassedThrough(t *testing.T) {
	c := Default([]string{"x"})
	c.PassEnv = append(c.PassEnv, EnvToken)
	assert.ErrorContains(t, c.Validate(), EnvToken)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sandplane.yaml")
	require.NoError(t, os.WriteFile(file, []byte("minute: 2s\nautoStopMinutes: 5\nlisten: 127.0.0.1:5000\n"), 0o600))
	open := filepath.Join(dir, "open-token")
	require.NoError(t, os.WriteFile(open, []byte("t\n"), 0o644))
	self := []string{"sandplane", "toolbox"}
	tests := []struct {
		name     string
		path     string
		env      map[string]string
		override func(*Config)
		check    func(t *testing.T, c Config)
		code     provider.ErrorCode
	}{
		{name: "the defaults", check: func(t *testing.T, c Config) {
			assert.Equal(t, Default(self), c)
		}},
		{name: "file, then environment, then flags", path: file,
			env:      map[string]string{EnvMinute: "1s", EnvAutoStop: "7"},
			override: func(c *Config) { c.Minute = 3 * time.Second },
			check: func(t *testing.T, c Config) {
				assert.Equal(t, 3*time.Second, c.Minute, "flags beat the environment")
				assert.Equal(t, 7, c.AutoStopMinutes, "the environment beats the file")
				assert.Equal(t, "127.0.0.1:5000", c.Listen, "the file beats the defaults")
			}},
		{name: "the file named by the environment", env: map[string]string{EnvConfig: file}, check: func(t *testing.T, c Config) {
			assert.Equal(t, 2*time.Second, c.Minute)
		}},
		{name: "a token file others can read", override: func(c *Config) { c.TokenFile = open }, code: provider.InvalidArgument},
		{name: "a setting that cannot work", override: func(c *Config) { c.Minute = 0 }, code: provider.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(self, tt.path, envOf(tt.env), tt.override)
			if tt.code != "" {
				assert.Equal(t, tt.code, provider.Code(err), "%v", err)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestDefaultURLIsTheListenAddress(t *testing.T) {
	assert.Equal(t, "http://"+DefaultListen, DefaultURL, "clients must find the daemon where it listens by default")
}
