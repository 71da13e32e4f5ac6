package conformance_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/conformance"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// localExpect is what the local control plane promises, on either runtime.
var localExpect = conformance.Expectations{
	Traits:         provider.Traits{Name: "local", StopStoppedIsNoop: true, ResizeIsNoop: true, SyncStop: true, ReapIntervalMinutes: 1},
	WorkloadPort:   4000,
	DeclaredPorts:  true,
	Watch:          true,
	StopWithReason: true,
	// The workload is the toolbox, whose shells are its children.
	ShellInWorkload: true,
}

// dockerEnv is what the docker harnesses of one run share: the engine and
// the toolbox image their daemons build from the test binary of sandplane.
type dockerEnv struct {
	cli   *client.Client
	image string
}

// newDockerEnv skips t when no engine answers, and builds the toolbox image
// once, through a throwaway daemon, so that the scenarios' daemons do not
// all build it at once. The image is removed when t ends.
func newDockerEnv(t *testing.T) *dockerEnv {
	t.Helper()
	env := &dockerEnv{cli: dockertest.Engine(t), image: "sandplane-conformance:" + randHex(6)}
	t.Cleanup(func() {
		if err := dockertest.RemoveImage(context.Background(), env.cli, env.image); err != nil {
			t.Errorf("remove the toolbox image: %v", err)
		}
	})
	d := startDaemon(t, env)
	ctx := context.Background()
	sb, err := d.P.Create(ctx, provider.CreateRequest{Runtime: provider.RuntimeDocker, AutoStopInterval: ptr(0)})
	if err != nil {
		t.Skipf("the docker runtime cannot run the default snapshot here (%v); daemon log:\n%s", err, d.Stderr)
	}
	require.NoError(t, d.P.Delete(ctx, sb.ID))
	d.Stop()
	return env
}

// removeRoot removes every container of the daemon that used root.
func (env *dockerEnv) removeRoot(t *testing.T, root string) {
	ctx := context.Background()
	list, err := env.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root)),
	})
	if err != nil {
		t.Logf("list the containers of %s: %v", root, err)
		return
	}
	for _, c := range list {
		if err := env.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Logf("remove container %s: %v", c.ID, err)
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startDaemon runs `sandplane serve` with the harness minute and its own
// root; docker daemons get the run's image. Cleanup stops it and removes
// whatever it left behind.
func startDaemon(t *testing.T, env *dockerEnv) *testdaemon.Daemon {
	t.Helper()
	return startDaemonWith(t, env, "", *minuteFlag)
}

// startDaemonWith is startDaemon with more config and its own minute.
func startDaemonWith(t *testing.T, env *dockerEnv, extra string, minute time.Duration) *testdaemon.Daemon {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	config := ""
	if env != nil {
		t.Cleanup(func() { env.removeRoot(t, root) })
		config = "dockerImage: " + env.image + "\n"
	}
	config += extra
	return testdaemon.Start(t, testdaemon.Options{
		Root:   root,
		Minute: minute,
		Config: config,
		Env:    []string{"AGENT_CONTROL_PLANE_URL=", "SANDPLANE_TOKEN="},
		Ports:  20,
		// The suite runs as a user should: with a daemon token, so that
		// every call and every toolbox token travels the authenticated way.
		Token: randHex(16),
	})
}

// dockerProvider creates every sandbox on the docker runtime.
type dockerProvider struct{ *local.Provider }

func (d dockerProvider) Create(ctx context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	req.Runtime = provider.RuntimeDocker
	return d.Provider.Create(ctx, req)
}

// localMaker makes a harness of a fresh daemon per scenario: native, or
// docker when env is set.
func localMaker(env *dockerEnv) conformance.HarnessMaker {
	return func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		d := startDaemon(t, env)
		down, err := local.New("http://" + testdaemon.FreeAddr(t))
		if err != nil {
			return nil, err
		}
		var p provider.Provider = d.P
		if env != nil {
			p = dockerProvider{d.P}
		}
		return &conformance.Static{
			P:         p,
			Down:      down,
			MinuteLen: *minuteFlag,
			Clk:       clock.Real(),
			Client:    &http.Client{Transport: &http.Transport{Proxy: nil}},
			Run:       runID(),
			Want:      localExpect,
		}, nil
	}
}

func ptr[T any](v T) *T { return &v }
