package simulator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
)

// running is a Run in progress.
type running struct {
	t    *testing.T
	addr string
	out  *testdaemon.Buffer // the start line
	log  *testdaemon.Buffer // the log
	stop func() error       // ends Run and returns its error
}

// startRun runs cfg on a free loopback port until the test ends or stop is
// called, and returns once it serves.
func startRun(t *testing.T, cfg RunConfig) *running {
	t.Helper()
	r := &running{t: t, out: &testdaemon.Buffer{}, log: &testdaemon.Buffer{}}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	cfg.Out = r.out
	cfg.Logger = slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ready := make(chan net.Addr, 1)
	cfg.Ready = func(a net.Addr) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var result error
	stopped := false
	r.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { assert.NoError(t, r.stop()) })
	select {
	case a := <-ready:
		r.addr = a.String()
	case err := <-done:
		stopped = true
		cancel()
		require.NoError(t, err, "Run ended before it served")
		t.Fatal("Run ended before it served")
	}
	return r
}

// do sends a request to the running simulator with key as the bearer.
func (r *running) do(method, path, key string, body any) (int, []byte) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(r.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+r.addr+path, rd)
	require.NoError(r.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(r.t, err)
	return resp.StatusCode, b
}

// createAndExecute creates a sandbox and runs command in it through the
// toolbox proxy, and returns its id and the command's result.
func (r *running) createAndExecute(command string) (string, string) {
	r.t.Helper()
	code, body := r.do("POST", "/api/sandbox", "run-key", map[string]any{})
	require.Equal(r.t, http.StatusOK, code, string(body))
	var sb struct{ ID, State, ErrorReason string }
	require.NoError(r.t, json.Unmarshal(body, &sb))
	require.Equal(r.t, "started", sb.State, sb.ErrorReason)
	code, body = r.do("POST", "/toolbox/"+sb.ID+"/process/execute", "run-key", map[string]any{"command": command})
	require.Equal(r.t, http.StatusOK, code, string(body))
	var res executeResponse
	require.NoError(r.t, json.Unmarshal(body, &res))
	require.Equal(r.t, 0, res.ExitCode, res.Result)
	return sb.ID, res.Result
}

// bindable reports whether addr can be bound again.
func bindable(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func TestRunRefusesUnsafeSettings(t *testing.T) {
	tests := []struct {
		name string
		cfg  RunConfig
		says []string
	}{
		{"any key on a network address", RunConfig{Listen: "0.0.0.0:0"}, []string{"not a loopback address", "--api-key"}},
		{"an empty API key", RunConfig{Config: Config{APIKeys: []string{"k", ""}}}, []string{"--api-key must not be empty"}},
		{"the admin key is an API key", RunConfig{Config: Config{APIKeys: []string{"k"}, AdminKey: "k"}}, []string{"--admin-key must differ"}},
		{"an address without a port", RunConfig{Listen: "127.0.0.1"}, []string{"--listen"}},
		{"an unknown backend", RunConfig{Workloads: "vm"}, []string{`unknown --backend "vm"`}},
		{"docker without an image", RunConfig{Workloads: WorkloadsDocker}, []string{"--docker-image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), tt.cfg)
			require.Error(t, err)
			assert.Equal(t, provider.InvalidArgument, provider.Code(err), "%v", err)
			for _, s := range tt.says {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	r := startRun(t, RunConfig{Workloads: WorkloadsNone, Config: Config{DisableValidation: true}})
	assert.True(t, Identify(context.Background(), http.DefaultClient, "http://"+r.addr))

	m := regexp.MustCompile(`^export DAYTONA_API_URL=http://` + regexp.QuoteMeta(r.addr) + `/api DAYTONA_API_KEY=sim ` +
		EnvAdminKey + `=([A-Za-z0-9_-]{43,}) ` + EnvWebhookSecret + `=(whsec_[A-Za-z0-9+/=]{32,})\n$`).FindStringSubmatch(r.out.String())
	require.NotNil(t, m, "the start line says what to export, with the generated admin key and webhook secret: %q", r.out.String())
	code, _ := r.do("GET", "/_sim/info", m[1], nil)
	assert.Equal(t, http.StatusOK, code, "the printed key opens the admin API")
	code, _ = r.do("GET", "/_sim/info", "any-key", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = r.do("GET", "/api/sandbox", "any-key", nil)
	assert.Equal(t, http.StatusOK, code, "any API key, on loopback")
	assert.Contains(t, r.log.String(), "Daytona simulator serving")
	assert.NotContains(t, r.log.String(), m[1], "the admin key is never logged")

	require.NoError(t, r.stop())
	assert.True(t, bindable(r.addr), "the address is free once Run returns")
}

func TestRunPrintsNoKeyItWasGiven(t *testing.T) {
	r := startRun(t, RunConfig{Workloads: WorkloadsNone, Config: Config{APIKeys: []string{"only-key"}, AdminKey: "given-admin",
		WebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("a webhook secret of 32 bytes...."))}})
	assert.Equal(t, "export DAYTONA_API_URL=http://"+r.addr+"/api\n", r.out.String(), "the keys are the user's own")
	code, _ := r.do("GET", "/api/sandbox", "only-key", nil)
	assert.Equal(t, http.StatusOK, code)
	code, _ = r.do("GET", "/api/sandbox", "other-key", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = r.do("GET", "/_sim/info", "given-admin", nil)
	assert.Equal(t, http.StatusOK, code)
}

func TestRunExplainsATakenPort(t *testing.T) {
	sim := startRun(t, RunConfig{Workloads: WorkloadsNone})
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	tests := []struct {
		name, addr, says string
	}{
		{"by a simulator", sim.addr, "a sandplane simulator already serves " + sim.addr},
		{"by something else", strings.TrimPrefix(other.URL, "http://"), "is taken by something that is not a sandplane simulator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), RunConfig{Listen: tt.addr, Workloads: WorkloadsNone})
			require.Error(t, err)
			assert.Equal(t, provider.Unavailable, provider.Code(err))
			assert.Contains(t, err.Error(), tt.says)
			assert.Contains(t, err.Error(), "--listen")
		})
	}
}

// Native workloads in a temporary root: the root and every workload are
// gone once Run returns.
func TestRunNativeWorkloads(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := startRun(t, RunConfig{Toolbox: []string{toolboxBinary(t)}})
	roots, err := filepath.Glob(filepath.Join(tmp, "sandplane-sim-*"))
	require.NoError(t, err)
	require.Len(t, roots, 1, "a temporary root")
	t.Cleanup(func() { testdaemon.KillMarked(t, roots[0]) })

	_, port := r.createAndExecute("echo $PORT")
	toolbox := net.JoinHostPort("127.0.0.1", strings.TrimSpace(port))
	require.False(t, bindable(toolbox), "the workload serves its toolbox")

	require.NoError(t, r.stop())
	assert.True(t, bindable(toolbox), "the workload is gone once Run returns")
	_, err = os.Stat(roots[0])
	assert.True(t, os.IsNotExist(err), "the temporary root is removed")
}

// Docker workloads reached at their container's address: the containers
// are gone once Run returns.
func TestRunDockerWorkloads(t *testing.T) {
	cli := dockertest.Engine(t)
	tag := dockerToolboxImage(t, cli)
	root := t.TempDir()
	t.Cleanup(func() {
		for _, c := range containersOf(t, cli, root) {
			_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})
	r := startRun(t, RunConfig{Workloads: WorkloadsDocker, DockerImage: tag, Root: root})

	id, out := r.createAndExecute("echo $DAYTONA_SANDBOX_ID; pwd")
	assert.Equal(t, id+"\n"+dockerHome+"\n", out)
	require.Len(t, containersOf(t, cli, root), 1)

	require.NoError(t, r.stop())
	assert.Empty(t, containersOf(t, cli, root), "no container is left once Run returns")
}
