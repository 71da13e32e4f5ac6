package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/config"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/simulator"
)

// runSim runs `sandplane sim args...` in process until the test ends and
// returns what it printed to stderr once it answers on addr.
func runSim(t *testing.T, addr string, args ...string) *testdaemon.Buffer {
	t.Helper()
	t.Setenv(envSimAdminKey, "")
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &testdaemon.Buffer{}
	root := newRootCmd()
	root.SetArgs(append([]string{"sim", "--backend", "none", "--no-validate"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(stderr)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			require.NoError(t, err, "sim ended early")
		default:
		}
		return strings.Contains(stderr.String(), "export ")
	}, 20*time.Second, 10*time.Millisecond, "sim never started")
	return stderr
}

// simGet sends GET path to the simulator at addr with Host host (addr's
// when empty) and key as the bearer, and returns the status.
func simGet(t *testing.T, addr, host, key, path string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestSimOnANetworkAddressNeedsAPIKeys(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"sim", "--backend", "none", "--listen", "0.0.0.0:0"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.ExecuteContext(context.Background())
	require.Error(t, err)
	assert.Equal(t, 2, exitCode(err), "a usage error")
	assert.Contains(t, err.Error(), "not a loopback address")
	assert.Contains(t, err.Error(), "--api-key")

	_, port, err := net.SplitHostPort(testdaemon.FreeAddr(t))
	require.NoError(t, err)
	runSim(t, "0.0.0.0:"+port, "--listen", "0.0.0.0:"+port, "--api-key", "right-key", "--admin-key", "the-admin-key")
	local := "127.0.0.1:" + port
	assert.Equal(t, http.StatusOK, simGet(t, local, "", "right-key", "/api/sandbox"))
	assert.Equal(t, http.StatusUnauthorized, simGet(t, local, "", "any-other-key", "/api/sandbox"), "only the given keys")
	assert.Equal(t, http.StatusUnauthorized, simGet(t, local, "", "right-key", "/_sim/info"), "an API key is no admin key")
	assert.Equal(t, http.StatusOK, simGet(t, local, "", "the-admin-key", "/_sim/info"))
}

func TestSimOnLoopback(t *testing.T) {
	addr := testdaemon.FreeAddr(t)
	stderr := runSim(t, addr, "--listen", addr)

	assert.Equal(t, http.StatusOK, simGet(t, addr, "", "any-key", "/api/sandbox"), "any key, on loopback")
	assert.Equal(t, http.StatusForbidden, simGet(t, addr, "rebound.example", "any-key", "/api/sandbox"), "a DNS-rebinding Host")

	m := regexp.MustCompile(envSimAdminKey + `=([A-Za-z0-9_-]{43,})`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "the generated admin key is printed with the export line: %s", stderr.String())
	assert.Equal(t, http.StatusOK, simGet(t, addr, "", m[1], "/_sim/info"))
	assert.Equal(t, http.StatusUnauthorized, simGet(t, addr, "", "any-key", "/_sim/info"))

	t.Run("a taken port is explained", func(t *testing.T) {
		root := newRootCmd()
		root.SetArgs([]string{"sim", "--backend", "none", "--listen", addr})
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(context.Background())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "a sandplane simulator already serves "+addr)
	})
}

func TestSimExplainsAPortTakenBySomethingElse(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	root := newRootCmd()
	root.SetArgs([]string{"sim", "--backend", "none", "--listen", strings.TrimPrefix(other.URL, "http://")})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.ExecuteContext(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is taken by something that is not a sandplane simulator")
	assert.Contains(t, err.Error(), "--listen")
}

func TestSimFlagsMapOntoRunConfig(t *testing.T) {
	defaults := simulator.RunConfig{
		Config:      simulator.Config{Profile: simulator.InstantProfile(), Minute: time.Minute},
		Listen:      simulator.DefaultListen,
		Workloads:   simulator.WorkloadsNative,
		DockerImage: config.Default(nil).DockerImage,
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(c *simulator.RunConfig)
		code provider.ErrorCode
	}{
		{name: "defaults", want: func(*simulator.RunConfig) {}},
		{name: "every flag", args: []string{
			"--listen", "0.0.0.0:4100", "--api-key", "a,b", "--api-key", "c", "--admin-key", "adm", "--profile", "daytona",
			"--minute", "2s", "--backend", "docker", "--seed", "7", "--root", "/state", "--base-url", "http://sim.example",
			"--snapshot", "one", "--snapshot", "*", "--warm-pool", "3", "--docker-image", "img:1", "--spec", "/spec.yaml",
			"--no-validate", "--debug", "--proxy-idle-keep-alive", "90s", "--ssh-listen", "127.0.0.1:2200", "--isolation", "none",
			"--webhook", "http://127.0.0.1:9000/a", "--webhook", "http://127.0.0.1:9000/b", "--webhook-secret", "whsec_x",
		}, want: func(c *simulator.RunConfig) {
			c.SSHListen, c.Isolation = "127.0.0.1:2200", "none"
			c.Webhooks, c.WebhookSecret = []string{"http://127.0.0.1:9000/a", "http://127.0.0.1:9000/b"}, "whsec_x"
			c.Listen, c.Workloads, c.Root, c.DockerImage = "0.0.0.0:4100", "docker", "/state", "img:1"
			c.APIKeys, c.AdminKey = []string{"a", "b", "c"}, "adm"
			c.Profile, c.Minute, c.Seed = simulator.DaytonaProfile(), 2*time.Second, 7
			c.BaseURL, c.SpecPath, c.DisableValidation = "http://sim.example", "/spec.yaml", true
			c.Snapshots, c.WarmPool = []simulator.Snapshot{{Name: "one"}, {Name: "*"}}, 3
			c.ProxyIdleKeepAlive = 90 * time.Second
		}},
		{name: "the admin key from the environment", env: map[string]string{envSimAdminKey: "from-env"},
			want: func(c *simulator.RunConfig) { c.AdminKey = "from-env" }},
		{name: "the API keys from the environment", env: map[string]string{envSimAPIKeys: "k1,k2"},
			want: func(c *simulator.RunConfig) { c.APIKeys = []string{"k1", "k2"} }},
		{name: "the webhook secret from the environment", env: map[string]string{simulator.EnvWebhookSecret: "whsec_env"},
			want: func(c *simulator.RunConfig) { c.WebhookSecret = "whsec_env" }},
		{name: "the flag before the environment", args: []string{"--admin-key", "from-flag"}, env: map[string]string{envSimAdminKey: "from-env"},
			want: func(c *simulator.RunConfig) { c.AdminKey = "from-flag" }},
		{name: "an unknown profile", args: []string{"--profile", "slow"}, code: provider.InvalidArgument},
		{name: "a minute that is not positive", args: []string{"--minute", "0s"}, code: provider.InvalidArgument},
		{name: "a negative idle keep-alive", args: []string{"--proxy-idle-keep-alive", "-1s"}, code: provider.InvalidArgument},
		{name: "a negative warm pool", args: []string{"--warm-pool", "-1"}, code: provider.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var flags simFlags
			cmd := &cobra.Command{}
			flags.bind(cmd)
			require.NoError(t, cmd.ParseFlags(tt.args))
			got, err := flags.runConfig(func(k string) string { return tt.env[k] })
			if tt.code != "" {
				require.Error(t, err)
				assert.Equal(t, tt.code, provider.Code(err), "%v", err)
				return
			}
			require.NoError(t, err)
			want := defaults
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

// `sandplane sim --warm-pool N` serves a default pool of N started
// sandboxes of the default snapshot: GET /warm-pools lists it to any key,
// and it refills after a plain create takes one.
func TestSimWarmPoolFlagIsTheDefaultPool(t *testing.T) {
	addr := testdaemon.FreeAddr(t)
	runSim(t, addr, "--listen", addr, "--warm-pool", "2")
	pools := func(key string) []map[string]any {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/warm-pools", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out []map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	for _, key := range []string{"one-key", "another-key"} {
		got := pools(key)
		require.Len(t, got, 1, "%s sees the default pool", key)
		assert.Equal(t, "daytonaio/sandbox:0.6.0-slim", got[0]["snapshot"], "the default snapshot")
		assert.EqualValues(t, 2, got[0]["pool"])
		assert.EqualValues(t, 2, got[0]["currentSize"], "the none backend starts them at once")
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/sandbox", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer one-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 2, pools("one-key")[0]["currentSize"], "the pool refilled after the create took one")
}
