package local_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/baseimage"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
)

// The docker runtime through the real daemon: `sandplane serve` on a real
// engine, with the toolbox image the daemon builds from its own binary.

// dockerEnv is what every docker daemon of TestDocker shares: the engine and
// the tag the daemons build their toolbox image as. A fresh tag proves the
// build on a machine that never had the image; it is removed when the test
// ends.
type dockerEnv struct {
	cli     *client.Client
	image   string
	missing string
}

func newDockerEnv(t testing.TB) *dockerEnv {
	t.Helper()
	cli := dockertest.Engine(t)
	env := &dockerEnv{cli: cli, image: "sandplane-e2e-toolbox:" + randHex(6), missing: "sandplane-e2e-missing:" + randHex(6)}
	t.Cleanup(func() {
		if err := dockertest.RemoveImage(context.Background(), cli, env.image); err != nil {
			t.Error(err)
		}
	})
	return env
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (env *dockerEnv) config() string {
	return fmt.Sprintf(`dockerImage: %[1]s
snapshots:
  never-ready:
    # The toolbox on the container's loopback: the published port never reaches it.
    image: %[1]s
    imageCommand: [%[3]s, toolbox]
  broken:
    image: %[1]s
    imageCommand: [%[3]s, toolbox, --no-such-flag]
  missing:
    image: %[2]s
  host-network:
    image: %[1]s
    network: host
`, env.image, env.missing, baseimage.ToolboxPath)
}

// startDockerDaemon runs `sandplane serve` with the docker snapshots. A new
// root gets a cleanup that removes every container and image labelled with
// it, whatever the test did to the daemon.
func startDockerDaemon(t testing.TB, env *dockerEnv, root string, extraEnv ...string) *testdaemon.Daemon {
	t.Helper()
	if root == "" {
		root = t.TempDir()
		t.Cleanup(func() { env.removeRoot(t, root) })
	}
	return testdaemon.Start(t, testdaemon.Options{Root: root, Config: env.config(), Env: extraEnv})
}

func (env *dockerEnv) containersOf(t testing.TB, root string) []container.Summary {
	t.Helper()
	list, err := env.cli.ContainerList(context.Background(), container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root)),
	})
	require.NoError(t, err)
	return list
}

func (env *dockerEnv) removeRoot(t testing.TB, root string) {
	ctx := context.Background()
	for _, c := range env.containersOf(t, root) {
		if err := env.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", c.ID, err)
		}
	}
	images, err := env.cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root))})
	if err != nil {
		t.Errorf("list images to clean up: %v", err)
		return
	}
	for _, img := range images {
		if err := dockertest.RemoveImage(ctx, env.cli, img.ID); err != nil {
			t.Error(err)
		}
	}
}

// sandboxContainer inspects the container of sandbox id.
func (env *dockerEnv) sandboxContainer(t *testing.T, id string) container.InspectResponse {
	t.Helper()
	c, err := env.cli.ContainerInspect(context.Background(), docker.ContainerName(id))
	require.NoError(t, err)
	return c
}

type execResult struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// execute runs command through the sandbox's toolbox on its preview URL.
func execute(t *testing.T, p *local.Provider, s *provider.Sandbox, command string) execResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"command": command})
	require.NoError(t, err)
	resp := toolboxDo(t, p, s, http.MethodPost, "/process/execute", string(body))
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out execResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func needShell(t *testing.T) {
	t.Helper()
	if _, ok := docker.StaticBusybox(); !ok {
		t.Skip(dockertest.NoBusyboxMessage)
	}
}

func dockerCreate(t *testing.T, d *testdaemon.Daemon, req provider.CreateRequest) *provider.Sandbox {
	t.Helper()
	req.Runtime = provider.RuntimeDocker
	if req.AutoStopInterval == nil {
		req.AutoStopInterval = ptr(0)
	}
	s, err := d.P.Create(context.Background(), req)
	require.NoError(t, err, "daemon stderr:\n%s", d.Stderr)
	require.Equal(t, provider.StateStarted, s.State)
	require.Equal(t, provider.RuntimeDocker, s.Runtime)
	return s
}

// TestDocker runs every scenario on one engine and one toolbox image, which
// the first daemon builds.
func TestDocker(t *testing.T) {
	env := newDockerEnv(t)
	t.Run("lifecycle", func(t *testing.T) { testDockerLifecycle(t, env) })
	t.Run("files survive a new port", func(t *testing.T) { testDockerNewPortKeepsFiles(t, env) })
	t.Run("killed from outside", func(t *testing.T) { testDockerKilledFromOutside(t, env) })
	t.Run("removed from outside", func(t *testing.T) { testDockerRemovedFromOutside(t, env) })
	t.Run("daemon restart keeps live containers", func(t *testing.T) { testDockerDaemonRestart(t, env) })
	t.Run("orphans removed at daemon start", func(t *testing.T) { testDockerOrphans(t, env) })
	t.Run("create failures", func(t *testing.T) { testDockerCreateFailures(t, env) })
	t.Run("resource limits", func(t *testing.T) { testDockerResourceLimits(t, env) })
}

// A create's cpu and memory are the container's limits, as docker --cpus
// and --memory would set them.
func testDockerResourceLimits(t *testing.T, env *dockerEnv) {
	d := startDockerDaemon(t, env, "")
	s := dockerCreate(t, d, provider.CreateRequest{Name: "sized", CPU: 1, Memory: 1})
	c := env.sandboxContainer(t, s.ID)
	assert.Equal(t, int64(1e9), c.HostConfig.NanoCPUs)
	assert.Equal(t, int64(1<<30), c.HostConfig.Memory)

	// The toolbox inside reports the container's figures, not the host's.
	checkToolbox(t, d.P, s)
	resp := toolboxDo(t, d.P, s, http.MethodGet, "/system/metrics", "")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "sandbox", resp.Header.Get("X-Sandplane-Metrics-Scope"))
	var m struct {
		CPUCount int    `json:"cpuCount"`
		MemTotal uint64 `json:"memTotal"`
		MemUsed  uint64 `json:"memUsed"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	assert.Equal(t, 1, m.CPUCount, "its CPU quota")
	assert.Equal(t, uint64(1<<30), m.MemTotal, "its memory limit")
	assert.Less(t, m.MemUsed, uint64(1<<30))
	require.NoError(t, d.P.Delete(context.Background(), s.ID))
}

func testDockerLifecycle(t *testing.T, env *dockerEnv) {
	needShell(t)
	d := startDockerDaemon(t, env, "")
	ctx := context.Background()
	const secret = "hunter2-docker-secret"

	// When this is the first create of TestDocker, right after serve
	// started, the daemon builds the image it needs on the way.
	s := dockerCreate(t, d, provider.CreateRequest{Name: "box", EnvVars: map[string]string{
		"SECRET_TOKEN": secret,
		"CALLBACK_URL": "http://localhost:9/cb",
	}})
	c := env.sandboxContainer(t, s.ID)
	assert.True(t, c.State.Running)
	assert.Equal(t, env.image, c.Config.Image)
	assert.Equal(t, d.Root, c.Config.Labels[docker.LabelRoot])
	_, daemonPort, err := net.SplitHostPort(d.Addr)
	require.NoError(t, err)
	assert.Equal(t, "http://4000-"+s.ID+".localhost:"+daemonPort, s.PreviewURL, "the workload's port inside the sandbox, served by the daemon")
	checkToolbox(t, d.P, s) // the toolbox knows its sandbox
	assert.Equal(t, baseimage.ServerEntrypoint, []string(c.Config.Entrypoint),
		"the image the daemon built runs sandplane-toolbox, installed beside it, not `sandplane toolbox`")

	got := execute(t, d.P, s, "echo kept > state.txt; pwd; echo $CALLBACK_URL; echo token=$SECRET_TOKEN")
	require.Zero(t, got.ExitCode, got.Result)
	assert.Equal(t, "/home/daytona\nhttp://host.docker.internal:9/cb\ntoken="+secret+"\n", got.Result,
		"runs in the home directory, with loopback URLs pointed at the host")

	// What the entrypoint's process writes is the container's output.
	got = execute(t, d.P, s, "echo to-stdout > /proc/1/fd/1; echo to-stderr $SECRET_TOKEN > /proc/1/fd/2")
	require.Zero(t, got.ExitCode, got.Result)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		logs, err := d.P.EntrypointLogs(ctx, s.ID)
		require.NoError(c, err)
		assert.Contains(c, logs.Stdout, "to-stdout\n")
		assert.Contains(c, logs.Stderr, "to-stderr")
		assert.NotContains(c, logs.Output, secret, "env values are redacted")
	}, 10*time.Second, 50*time.Millisecond)

	stopped, err := d.P.Stop(ctx, s.ID)
	require.NoError(t, err)
	assert.Equal(t, provider.StateStopped, stopped.State)
	kept := env.sandboxContainer(t, s.ID)
	assert.False(t, kept.State.Running, "stop keeps the container")
	assert.Equal(t, c.ID, kept.ID)

	started, err := d.P.Start(ctx, s.ID)
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, started.State)
	assert.Equal(t, c.ID, env.sandboxContainer(t, s.ID).ID, "start restarts the same container")
	got = execute(t, d.P, started, "cat state.txt; echo $SECRET_TOKEN")
	assert.Equal(t, "kept\n"+secret+"\n", got.Result, "files and env survive the stop")

	require.NoError(t, d.P.Delete(ctx, s.ID))
	_, err = env.cli.ContainerInspect(ctx, c.ID)
	assert.True(t, cerrdefs.IsNotFound(err), "delete removes the container: %v", err)
	_, err = d.P.Get(ctx, s.ID)
	assert.Equal(t, provider.NotFound, provider.Code(err))
	assert.Empty(t, env.containersOf(t, d.Root))
}

// testDockerNewPortKeepsFiles restarts a stopped sandbox whose port was
// taken meanwhile, as happens after a daemon restart: the container must be
// replaced, and the files must come along.
func testDockerNewPortKeepsFiles(t *testing.T, env *dockerEnv) {
	needShell(t)
	d := startDockerDaemon(t, env, "")
	ctx := context.Background()
	s := dockerCreate(t, d, provider.CreateRequest{Name: "mover"})
	require.Zero(t, execute(t, d.P, s, "echo kept > state.txt").ExitCode)
	before := env.sandboxContainer(t, s.ID)
	_, err := d.P.Stop(ctx, s.ID)
	require.NoError(t, err)

	squatter, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)))
	require.NoError(t, err)
	defer squatter.Close()
	moved, err := d.P.Start(ctx, s.ID)
	require.NoError(t, err, "daemon stderr:\n%s", d.Stderr)
	require.NotEqual(t, s.Port, moved.Port)
	assert.NotEqual(t, before.ID, env.sandboxContainer(t, s.ID).ID, "a new port needs a new container")
	assert.Equal(t, "kept\n", execute(t, d.P, moved, "cat state.txt").Result)

	require.NoError(t, d.P.Delete(ctx, s.ID))
	assert.Empty(t, env.containersOf(t, d.Root))
	images, err := env.cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+d.Root))})
	require.NoError(t, err)
	assert.Empty(t, images, "delete removes the image that carried the files")
}

func testDockerKilledFromOutside(t *testing.T, env *dockerEnv) {
	d := startDockerDaemon(t, env, "")
	s := dockerCreate(t, d, provider.CreateRequest{Name: "victim"})
	require.NoError(t, env.cli.ContainerKill(context.Background(), docker.ContainerName(s.ID), "KILL"))

	got := eventuallyState(t, d.P, s.ID, provider.StateStopped)
	assert.Equal(t, "killed: signal SIGKILL", got.ErrorReason)
	assert.Zero(t, got.Port)
	assert.Empty(t, got.PreviewURL)

	restarted, err := d.P.Start(context.Background(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, restarted.State)
	checkToolbox(t, d.P, restarted)
}

// A container removed behind the daemon's back (docker rm -f, docker system
// prune) took the sandbox's files with it: the sandbox shows stopped with
// reason container_removed, and start refuses, saying so, rather than start
// a fresh container without them. Removed while running or while stopped.
func testDockerRemovedFromOutside(t *testing.T, env *dockerEnv) {
	needShell(t)
	d := startDockerDaemon(t, env, "")
	ctx := context.Background()
	remove := func(id string) {
		require.NoError(t, env.cli.ContainerRemove(ctx, docker.ContainerName(id), container.RemoveOptions{Force: true}))
	}
	running := dockerCreate(t, d, provider.CreateRequest{Name: "removed-running"})
	require.Zero(t, execute(t, d.P, running, "echo mine > work.txt").ExitCode)
	remove(running.ID)
	got := eventuallyState(t, d.P, running.ID, provider.StateStopped)
	assert.Equal(t, "container_removed", got.ErrorReason)

	parked := dockerCreate(t, d, provider.CreateRequest{Name: "removed-stopped"})
	_, err := d.P.Stop(ctx, parked.ID)
	require.NoError(t, err)
	remove(parked.ID)

	for _, id := range []string{running.ID, parked.ID} {
		_, err := d.P.Start(ctx, id)
		assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
		assert.Contains(t, provider.Message(err), "was removed outside sandplane")
		assert.Contains(t, provider.Message(err), "delete the sandbox and create a new one")
		got, err := d.P.Get(ctx, id)
		require.NoError(t, err, "the record is kept")
		assert.Equal(t, provider.StateStopped, got.State)
		assert.Equal(t, "container_removed", got.ErrorReason)
		assert.Empty(t, env.containersOf(t, d.Root), "no fresh container was made")
		require.NoError(t, d.P.Delete(ctx, id), "and it can be deleted")
	}
}

func testDockerDaemonRestart(t *testing.T, env *dockerEnv) {
	d := startDockerDaemon(t, env, "")
	ctx := context.Background()
	keep := dockerCreate(t, d, provider.CreateRequest{Name: "keep"})
	lost := dockerCreate(t, d, provider.CreateRequest{Name: "lost"})
	before := env.sandboxContainer(t, keep.ID)

	d.Stop() // SIGTERM: containers keep running
	assert.True(t, env.sandboxContainer(t, keep.ID).State.Running, "a container outlives its daemon")
	require.NoError(t, env.cli.ContainerKill(ctx, docker.ContainerName(lost.ID), "KILL"))

	d2 := startDockerDaemon(t, env, d.Root)
	got, err := d2.P.Get(ctx, "keep")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStarted, got.State)
	assert.Equal(t, keep.Port, got.Port)
	after := env.sandboxContainer(t, keep.ID)
	assert.Equal(t, before.ID, after.ID)
	assert.Equal(t, before.State.StartedAt, after.State.StartedAt, "adopted, not restarted")
	checkToolbox(t, d2.P, got)
	gone := eventuallyState(t, d2.P, "lost", provider.StateStopped)
	assert.Equal(t, "daemon restart: process gone", gone.ErrorReason)

	// The adopted container is watched like any other, once the restart's
	// check of it is done (until then operations on it are refused). Its
	// auto-stop is turned off, so that only the kill can stop it, however
	// slow the machine.
	require.Eventually(t, func() bool { _, err := d2.P.SetAutoStopInterval(ctx, "keep", 0); return err == nil },
		10*time.Second, 10*time.Millisecond, "the restart's check of keep never finished")
	require.NoError(t, env.cli.ContainerKill(ctx, docker.ContainerName(keep.ID), "KILL"))
	stopped := eventuallyState(t, d2.P, "keep", provider.StateStopped)
	assert.Equal(t, "killed: signal SIGKILL", stopped.ErrorReason)
}

func testDockerOrphans(t *testing.T, env *dockerEnv) {
	d := startDockerDaemon(t, env, "")
	ctx := context.Background()

	created := make(chan error, 1)
	go func() {
		_, err := d.P.Create(ctx, provider.CreateRequest{ID: "half", Runtime: provider.RuntimeDocker, Snapshot: "never-ready"})
		created <- err
	}()
	// Wait until the container runs, then kill the daemon under the create.
	require.Eventually(t, func() bool {
		for _, c := range env.containersOf(t, d.Root) {
			if c.State == container.StateRunning {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the half-created container never ran: %s", d.Stderr)
	d.Kill9()
	assert.Equal(t, provider.Unavailable, provider.Code(<-created))

	// And a container of this root that no registry entry names at all.
	rt, err := docker.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	port := freePort(t)
	stray, err := rt.Start(ctx, driver.Spec{
		SandboxID: "stray", Root: d.Root, Image: env.image, Port: port,
		Env: map[string]string{"PORT": strconv.Itoa(port)},
	})
	require.NoError(t, err)
	require.Len(t, env.containersOf(t, d.Root), 2)

	d2 := startDockerDaemon(t, env, d.Root)
	// The restarted daemon answers at once and cleans up in the background.
	require.Eventually(t, func() bool { return len(env.containersOf(t, d.Root)) == 0 }, 30*time.Second, 20*time.Millisecond,
		"the restarted daemon removed both")
	st, err := rt.Status(ctx, stray)
	require.NoError(t, err)
	assert.Equal(t, docker.ReasonGone, st.Exit.Reason)
	_, err = d2.P.Get(ctx, "half")
	assert.Equal(t, provider.NotFound, provider.Code(err))
	assert.NoDirExists(t, filepath.Join(d.Root, "half"))

	s := dockerCreate(t, d2, provider.CreateRequest{ID: "half"})
	assert.Equal(t, "half", s.ID, "the id is free again")
}

func testDockerCreateFailures(t *testing.T, env *dockerEnv) {
	d := startDockerDaemon(t, env, "")
	ctx := context.Background()

	t.Run("a missing image fails preflight, naming it", func(t *testing.T) {
		_, err := d.P.Create(ctx, provider.CreateRequest{Name: "nope", Runtime: provider.RuntimeDocker, Snapshot: "missing"})
		require.Error(t, err)
		assert.Equal(t, provider.PreflightFailed, provider.Code(err))
		assert.Contains(t, err.Error(), env.missing)
		assert.Contains(t, err.Error(), "never pulls")
		_, err = d.P.Get(ctx, "nope")
		assert.Equal(t, provider.NotFound, provider.Code(err))
	})
	t.Run("a workload that exits fails the create with its output", func(t *testing.T) {
		_, err := d.P.Create(ctx, provider.CreateRequest{Name: "broken", Runtime: provider.RuntimeDocker, Snapshot: "broken"})
		require.Error(t, err)
		assert.Equal(t, provider.CreateFailed, provider.Code(err))
		assert.Contains(t, err.Error(), "exited: code 2", "the workload's own exit code: 2 for a usage error")
		assert.Contains(t, err.Error(), "unknown flag: --no-such-flag")
	})
	assert.Empty(t, env.containersOf(t, d.Root), "failed creates leave no container")
}

func TestDockerCreateWithoutAnEngine(t *testing.T) {
	// No engine at all: serve still starts, native sandboxes work, docker
	// creates say what to do.
	env := &dockerEnv{image: "sandplane-e2e-toolbox:" + randHex(6), missing: "sandplane-e2e-missing:" + randHex(6)}
	d := startDockerDaemon(t, env, t.TempDir(), "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	t.Cleanup(func() { testdaemon.KillMarked(t, d.Root) })
	_, err := d.P.Create(context.Background(), provider.CreateRequest{Runtime: provider.RuntimeDocker})
	require.Error(t, err)
	assert.Equal(t, provider.Unavailable, provider.Code(err))
	assert.Contains(t, err.Error(), "start dockerd or set DOCKER_HOST")

	s, err := d.P.Create(context.Background(), provider.CreateRequest{AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	assert.Equal(t, provider.RuntimeNative, s.Runtime)
}

func freePort(t testing.TB) int {
	t.Helper()
	_, port, err := net.SplitHostPort(testdaemon.FreeAddr(t))
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}

// BenchmarkDockerCreateToStarted measures a docker create through the
// daemon's HTTP API until the sandbox is started (its toolbox answers),
// beside a bare `docker run` of the same image in the same network mode
// until the toolbox answers HTTP, measured alternately in the same run: on
// the isolated bridge with the port published on loopback, against `docker
// run -p` on the engine's default bridge (network=bridge) and against the
// same `docker run -p` on the sandboxes' own isolated bridge with an init,
// as a sandbox runs (network=isolated-bridge: what the daemon adds, without
// what isolation costs the engine); and on the host's network
// (network=host, a snapshot's opt-in, against `docker run --network host`).
func BenchmarkDockerCreateToStarted(b *testing.B) {
	env := newDockerEnv(b)
	d := startDockerDaemon(b, env, "")
	ctx := context.Background()
	create := func(snapshot string) *provider.Sandbox {
		s, err := d.P.Create(ctx, provider.CreateRequest{Runtime: provider.RuntimeDocker, Snapshot: snapshot, AutoStopInterval: ptr(0)})
		require.NoError(b, err, "daemon stderr:\n%s", d.Stderr)
		return s
	}
	// Untimed: the daemon builds the image on the first create.
	require.NoError(b, d.P.Delete(ctx, create("").ID))

	modes := []struct {
		name, snapshot string
		bare           bareRun
	}{
		{"bridge", "", bareRun{}},
		{"isolated-bridge", "", bareRun{network: docker.NetworkName, init: true}},
		{"host", "host-network", bareRun{network: docker.NetworkHost}},
	}
	for _, mode := range modes {
		b.Run("network="+mode.name, func(b *testing.B) {
			var subject, baseline []time.Duration
			for b.Loop() {
				start := time.Now()
				s := create(mode.snapshot)
				subject = append(subject, time.Since(start))
				b.StopTimer()
				require.NoError(b, d.P.Delete(ctx, s.ID))
				baseline = append(baseline, env.bareDockerRun(b, d.Root, mode.bare))
				b.StartTimer()
			}
			reportVersus(b, subject, baseline)
		})
	}
}

// bareRun is how bareDockerRun runs its container.
type bareRun struct {
	// network is the container's network: the engine's default bridge
	// when empty, docker.NetworkHost for the host's.
	network string
	// init runs the engine's init as PID 1, as sandboxes do.
	init bool
}

// bareDockerRun is `docker run -p 127.0.0.1:P:P -e PORT=P image` (with
// --network and --init as run says; on the host's network nothing is
// published) through the Engine API, timed until the toolbox answers HTTP
// on the port: the floor any control plane on this engine pays.
func (env *dockerEnv) bareDockerRun(b *testing.B, root string, run bareRun) time.Duration {
	ctx := context.Background()
	port := strconv.Itoa(freePort(b))
	p := nat.Port(port + "/tcp")
	cfg := &container.Config{
		Image:        env.image,
		Env:          []string{"PORT=" + port, "SANDPLANE_SANDBOX_TOKEN=bench-token-0123456789abcdef"},
		ExposedPorts: nat.PortSet{p: struct{}{}},
		// Labelled, so the root's cleanup removes it whatever happens.
		Labels: map[string]string{docker.LabelRoot: root},
	}
	host := &container.HostConfig{
		PortBindings: nat.PortMap{p: []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: port}}},
		NetworkMode:  container.NetworkMode(run.network),
		Init:         &run.init,
	}
	if run.network == docker.NetworkHost {
		cfg.ExposedPorts, host.PortBindings = nil, nil
	}
	start := time.Now()
	created, err := env.cli.ContainerCreate(ctx, cfg, host, nil, nil, "")
	require.NoError(b, err)
	defer func() {
		require.NoError(b, env.cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}))
	}()
	require.NoError(b, env.cli.ContainerStart(ctx, created.ID, container.StartOptions{}))
	url := "http://127.0.0.1:" + port + "/api/info"
	hc := http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		require.True(b, time.Now().Before(deadline), "the bare container never answered: %v", err)
		time.Sleep(2 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
	}
}
