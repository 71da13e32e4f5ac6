package docker_test

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
)

// callLog records the engine calls a runtime makes, as "METHOD /path"
// without the API version.
type callLog struct {
	base http.RoundTripper
	mu   sync.Mutex
	all  []string
}

var apiVersion = regexp.MustCompile(`^/v[0-9.]+`)

func (c *callLog) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.all = append(c.all, r.Method+" "+apiVersion.ReplaceAllString(r.URL.Path, ""))
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

// take returns the calls since the last take.
func (c *callLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.all
	c.all = nil
	return out
}

// snapshot returns the calls since the last take, keeping them.
func (c *callLog) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.all...)
}

// count is how many of calls start with prefix.
func count(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// loggedRuntime is a runtime on the harness's engine and network whose
// engine calls are recorded.
func (h *harness) loggedRuntime(t *testing.T) (*docker.Driver, *callLog) {
	log := &callLog{base: h.cli.HTTPClient().Transport}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithHTTPClient(&http.Client{Transport: log}), client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	rt, err := docker.New(docker.WithClient(cli), docker.WithNetwork(h.network))
	require.NoError(t, err)
	return rt, log
}

// A create looks the container name up once (Preflight), and the sandbox
// network only on the runtime's first create; a readiness probe asks the
// engine nothing.
func TestCreateAsksTheEngineLittle(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	rt, log := h.loggedRuntime(t)
	for i := range 2 {
		spec := h.spec()
		log.take()
		require.NoError(t, rt.Preflight(ctx, spec))
		hd, err := rt.Start(ctx, spec)
		require.NoError(t, err)
		calls := log.take()
		assert.Equal(t, 1, count(calls, "GET /containers/"+docker.ContainerName(spec.SandboxID)+"/json"), "one inspect of the name: %v", calls)
		assert.Equal(t, 1, count(calls, "POST /containers/create"), "%v", calls)
		networkCalls := count(calls, "GET /networks/")
		if i == 0 {
			assert.Positive(t, networkCalls, "the first create checks the network: %v", calls)
		} else {
			assert.Zero(t, networkCalls, "later creates trust it: %v", calls)
		}

		getWhenUp(t, baseURL(spec.Port)+"/")
		ok, err := rt.Probe(ctx, hd, spec.HostAddrPort())
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Empty(t, log.take(), "a probe asks the engine nothing")
	}
}

// A container that took the name between Preflight and Start is looked
// at, as without Preflight: a foreign one is left alone.
func TestANameTakenAfterPreflightIsLookedAt(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	require.NoError(t, h.rt.Preflight(ctx, spec))
	other := h.newRuntime()
	foreign := spec
	foreign.Root = h.root + "-other"
	h.cleanupRoot(foreign.Root)
	_, err := other.Start(ctx, foreign)
	require.NoError(t, err)

	_, err = h.rt.Start(ctx, spec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "docker rm -f "+docker.ContainerName(spec.SandboxID))
}

// On the host's network the workload binds the host's port itself: no
// bridge, no published port, and localhost in its environment is the
// host's, left as it is.
func TestHostNetwork(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	spec.Network = docker.NetworkHost
	spec.Env["CALLBACK_URL"] = "http://localhost:4025/v1/hook"
	require.NoError(t, h.rt.Preflight(ctx, spec))
	hd := h.start(ctx, spec)

	assert.Equal(t, "hello from the test server\n", getWhenUp(t, baseURL(spec.Port)+"/"))
	assert.Equal(t, "http://localhost:4025/v1/hook", info(t, spec.Port).Env["CALLBACK_URL"])
	c, err := h.cli.ContainerInspect(ctx, hd.ContainerID)
	require.NoError(t, err)
	assert.True(t, c.HostConfig.NetworkMode.IsHost(), "%s", c.HostConfig.NetworkMode)
	assert.Empty(t, c.HostConfig.PortBindings)
	ok, err := h.rt.Probe(ctx, hd, spec.HostAddrPort())
	require.NoError(t, err)
	assert.True(t, ok)

	require.NoError(t, h.rt.Stop(ctx, hd, 0))
	ok, err = h.rt.Probe(ctx, hd, spec.HostAddrPort())
	require.NoError(t, err)
	assert.False(t, ok, "a stopped container does not serve")
	hd2, err := h.rt.Start(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, hd, hd2, "the stopped container is started again")
	getWhenUp(t, baseURL(spec.Port)+"/")

	bad := h.spec()
	bad.Network = "bridge"
	assert.ErrorContains(t, h.rt.Preflight(ctx, bad), `say "host"`)
}

// Waiters share one subscription to the engine's events: a running
// container costs no request of its own, and an end reaches only the
// waiter of that container, with how it ended.
func TestWaitersShareTheEventStream(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	rt, log := h.loggedRuntime(t)
	t.Cleanup(func() { _ = rt.Close() })
	const n = 3
	var handles []driver.Handle
	for range n {
		spec := h.spec()
		hd, err := rt.Start(ctx, spec)
		require.NoError(t, err)
		getWhenUp(t, baseURL(spec.Port)+"/")
		handles = append(handles, hd)
	}
	log.take()
	exits := make([]chan driver.Exit, n)
	for i, hd := range handles {
		exits[i] = make(chan driver.Exit, 1)
		go func() {
			exit, err := rt.Wait(ctx, hd)
			assert.NoError(t, err)
			exits[i] <- exit
		}()
	}
	require.Eventually(t, func() bool {
		return count(log.snapshot(), "GET /containers/") >= n
	}, 10*time.Second, 10*time.Millisecond, "each waiter looks once")

	require.NoError(t, h.cli.ContainerKill(ctx, handles[1].ContainerID, "KILL"))
	select {
	case exit := <-exits[1]:
		assert.Equal(t, "killed: signal SIGKILL", exit.Reason)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter of the killed container was not told")
	}
	calls := log.take()
	assert.Equal(t, 1, count(calls, "GET /events"), "one stream for every waiter: %v", calls)
	assert.Zero(t, count(calls, "POST /containers/"), "no wait request per container: %v", calls)
	for _, i := range []int{0, 2} {
		select {
		case exit := <-exits[i]:
			t.Fatalf("waiter %d returned %v for a running container", i, exit)
		default:
		}
	}
	require.NoError(t, rt.Stop(ctx, handles[0], 10*time.Second))
	assert.Equal(t, "exited: code 0", (<-exits[0]).Reason, "the server ends on SIGTERM")
	require.NoError(t, rt.Remove(ctx, handles[2]))
	assert.Contains(t, []string{"killed: signal SIGKILL", docker.ReasonGone}, (<-exits[2]).Reason,
		"as the engine tells it: killed, or gone when the removal came first")
}
