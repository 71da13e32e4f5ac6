package docker_test

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
)

type serverInfo struct {
	UID  int               `json:"uid"`
	CWD  string            `json:"cwd"`
	Args []string          `json:"args"`
	Env  map[string]string `json:"env"`
}

func info(t *testing.T, port int) serverInfo {
	t.Helper()
	var si serverInfo
	require.NoError(t, json.Unmarshal([]byte(getWhenUp(t, baseURL(port)+"/info")), &si))
	return si
}

func TestStartServesOnLoopback(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	spec.Env["CALLBACK_URL"] = "http://localhost:4025/v1/hook"
	spec.Env["NO_PROXY"] = "localhost"
	spec.Labels = map[string]string{"owner": "test"}

	require.NoError(t, h.rt.Preflight(ctx, spec))
	hd := h.start(ctx, spec)
	assert.Equal(t, provider.RuntimeDocker, hd.Runtime)

	st, err := h.rt.Status(ctx, hd)
	require.NoError(t, err)
	assert.True(t, st.Running)

	assert.Equal(t, "hello from the test server\n", getWhenUp(t, baseURL(spec.Port)+"/"))
	si := info(t, spec.Port)
	assert.Equal(t, spec.SandboxID, si.Env[docker.EnvSandboxID])
	assert.Equal(t, "http://host.docker.internal:4025/v1/hook", si.Env["CALLBACK_URL"])
	assert.Equal(t, "localhost", si.Env["NO_PROXY"])
	assert.Equal(t, strconv.Itoa(spec.Port), si.Env["PORT"])

	c, err := h.cli.ContainerInspect(ctx, hd.ContainerID)
	require.NoError(t, err)
	assert.Equal(t, "/"+docker.ContainerName(spec.SandboxID), c.Name)
	assert.Equal(t, h.root, c.Config.Labels[docker.LabelRoot])
	assert.Equal(t, spec.SandboxID, c.Config.Labels[docker.LabelSandbox])
	assert.Equal(t, "test", c.Config.Labels[docker.LabelPrefix+"owner"])
	assert.Equal(t, []string{"host.docker.internal:host-gateway"}, c.HostConfig.ExtraHosts)
	for _, b := range c.HostConfig.PortBindings {
		for _, pb := range b {
			assert.Equal(t, "127.0.0.1", pb.HostIP, "published on loopback only")
		}
	}
}

// TestPortsLeadToTheirContainerPorts: the workload serves on the port it
// declares inside its container, reached at the host port it was given.
func TestPortsLeadToTheirContainerPorts(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	spec.SandboxPort = 4000
	spec.Env["PORT"] = "4000"
	spec.ExtraPorts = []driver.PortMapping{{Sandbox: 3000, Host: freePort(t)}}
	hd := h.start(ctx, spec)

	assert.Equal(t, "hello from the test server\n", getWhenUp(t, baseURL(spec.Port)+"/"), "the host port leads to 4000 inside")
	assert.Equal(t, "4000", info(t, spec.Port).Env["PORT"])
	ok, err := h.rt.Probe(ctx, hd, spec.HostAddrPort())
	require.NoError(t, err)
	assert.True(t, ok)
	c, err := h.cli.ContainerInspect(ctx, hd.ContainerID)
	require.NoError(t, err)
	want := map[string]string{"4000/tcp": strconv.Itoa(spec.Port), "3000/tcp": strconv.Itoa(spec.ExtraPorts[0].Host)}
	got := map[string]string{}
	for port, bs := range c.HostConfig.PortBindings {
		require.Len(t, bs, 1)
		assert.Equal(t, "127.0.0.1", bs[0].HostIP)
		got[string(port)] = bs[0].HostPort
	}
	assert.Equal(t, want, got)
}

func TestCommandUserAndWorkDir(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	spec.Command = []string{"/server", "-body", "overridden\n"}
	spec.User = "1234:1234"
	spec.WorkDir = "/srv/app"

	h.start(ctx, spec)
	assert.Equal(t, "overridden\n", getWhenUp(t, baseURL(spec.Port)+"/"))
	si := info(t, spec.Port)
	assert.Equal(t, 1234, si.UID)
	assert.Equal(t, "/srv/app", si.CWD)
	assert.Equal(t, spec.Command, si.Args)
}

func TestLogsSeparateStreams(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	hd := h.start(ctx, spec)
	getWhenUp(t, baseURL(spec.Port))
	require.NoError(t, h.rt.Stop(ctx, hd, 10*time.Second))

	stdout, stderr, err := h.rt.Logs(ctx, hd, t.TempDir())
	require.NoError(t, err)
	assert.Contains(t, string(stdout), "server: listening on :"+strconv.Itoa(spec.Port))
	assert.Contains(t, string(stdout), "server: got terminated, exiting")
	assert.NotContains(t, string(stdout), "stderr")
	assert.Equal(t, "server: this line goes to stderr\n", string(stderr))
}

func TestStopThenStartRestartsTheSameContainer(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	hd := h.start(ctx, spec)
	getWhenUp(t, baseURL(spec.Port))

	require.NoError(t, h.rt.Stop(ctx, hd, 10*time.Second))
	st, err := h.rt.Status(ctx, hd)
	require.NoError(t, err)
	assert.False(t, st.Running)
	assert.Equal(t, "exited: code 0", st.Exit.Reason, "the server exits 0 on SIGTERM")
	require.NoError(t, h.rt.Stop(ctx, hd, 10*time.Second), "stopping a stopped container")

	again, err := h.rt.Start(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, hd.ContainerID, again.ContainerID, "start restarts the stopped container")
	assert.Equal(t, "hello from the test server\n", getWhenUp(t, baseURL(spec.Port)))

	running, err := h.rt.Start(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, hd.ContainerID, running.ContainerID, "start of a running container returns it")

	t.Run("a changed spec replaces the container", func(t *testing.T) {
		require.NoError(t, h.rt.Stop(ctx, hd, 10*time.Second))
		changed := spec
		changed.Env = map[string]string{"PORT": spec.Env["PORT"], "EXTRA": "1"}
		replaced, err := h.rt.Start(ctx, changed)
		require.NoError(t, err)
		assert.NotEqual(t, hd.ContainerID, replaced.ContainerID)
		assert.Equal(t, "1", info(t, spec.Port).Env["EXTRA"])
		st, err := h.rt.Status(ctx, hd)
		require.NoError(t, err)
		assert.Equal(t, driver.Status{Exit: driver.Exit{Reason: docker.ReasonGone}}, st)
	})
}

func TestStopKillsAfterGrace(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	spec.Command = []string{"/server", "-ignore-term"}
	hd := h.start(ctx, spec)
	getWhenUp(t, baseURL(spec.Port))

	require.NoError(t, h.rt.Stop(ctx, hd, 500*time.Millisecond))
	st, err := h.rt.Status(ctx, hd)
	require.NoError(t, err)
	assert.False(t, st.Running)
	assert.Equal(t, "killed: signal SIGKILL", st.Exit.Reason)
	assert.Nil(t, st.Exit.Code)
}

func TestKilledFromOutside(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	hd := h.start(ctx, spec)
	getWhenUp(t, baseURL(spec.Port))

	waited := make(chan driver.Exit, 1)
	go func() {
		exit, err := h.rt.Wait(ctx, hd)
		assert.NoError(t, err)
		waited <- exit
	}()
	require.NoError(t, h.cli.ContainerKill(ctx, hd.ContainerID, "KILL"))

	exit := <-waited
	assert.Equal(t, "killed: signal SIGKILL", exit.Reason)
	st, err := h.rt.Status(ctx, hd)
	require.NoError(t, err)
	assert.False(t, st.Running)
	assert.Equal(t, exit, st.Exit)
}

func TestWaitReportsExitCode(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	hd := h.start(ctx, spec)
	assert.Equal(t, "exiting with 3\n", getWhenUp(t, baseURL(spec.Port)+"/exit?code=3"))

	exit, err := h.rt.Wait(ctx, hd)
	require.NoError(t, err)
	require.NotNil(t, exit.Code)
	assert.Equal(t, 3, *exit.Code)
	assert.Equal(t, "exited: code 3", exit.Reason)
}

func TestRemove(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	hd := h.start(ctx, h.spec())

	require.NoError(t, h.rt.Remove(ctx, hd), "force-removes a running container")
	require.NoError(t, h.rt.Remove(ctx, hd), "removing twice")
	_, err := h.cli.ContainerInspect(ctx, hd.ContainerID)
	require.Error(t, err)

	gone := driver.Exit{Reason: docker.ReasonGone}
	st, err := h.rt.Status(ctx, hd)
	require.NoError(t, err)
	assert.Equal(t, driver.Status{Exit: gone}, st)
	exit, err := h.rt.Wait(ctx, hd)
	require.NoError(t, err)
	assert.Equal(t, gone, exit)
	assert.NoError(t, h.rt.Stop(ctx, hd, time.Second), "stopping a gone container")
	stdout, stderr, err := h.rt.Logs(ctx, hd, "")
	require.NoError(t, err)
	assert.Empty(t, stdout)
	assert.Empty(t, stderr)
}

func TestRestartedDaemonAdoptsLiveContainer(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	hd := h.start(ctx, spec)
	getWhenUp(t, baseURL(spec.Port))

	// Round-trip the handle as the manager persists it.
	b, err := json.Marshal(hd)
	require.NoError(t, err)
	var adopted driver.Handle
	require.NoError(t, json.Unmarshal(b, &adopted))

	second := h.newRuntime()
	st, err := second.Status(ctx, adopted)
	require.NoError(t, err)
	assert.True(t, st.Running)

	waited := make(chan driver.Exit, 1)
	go func() {
		exit, err := second.Wait(ctx, adopted)
		assert.NoError(t, err)
		waited <- exit
	}()
	require.NoError(t, second.Stop(ctx, adopted, 10*time.Second))
	assert.Equal(t, "exited: code 0", (<-waited).Reason)
}

func TestOrphans(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	known := h.start(ctx, h.spec())
	orphan := h.start(ctx, h.spec())
	stoppedOrphan := h.start(ctx, h.spec())
	require.NoError(t, h.rt.Stop(ctx, stoppedOrphan, 0))

	other := newHarness(t) // another daemon: another root
	h.start(ctx, other.spec())

	got, err := h.rt.Orphans(ctx, h.root, []driver.Handle{known, {Runtime: provider.RuntimeNative, PID: 1}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []driver.Handle{orphan, stoppedOrphan}, got)

	none, err := h.rt.Orphans(ctx, "/no/such/root", nil)
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestMissingImageFailsPreflight(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	spec.Image = "sandplane-no-such-image:" + randomHex(4)

	err := h.rt.Preflight(ctx, spec)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), spec.Image)
	assert.Contains(t, provider.Message(err), "build it")

	_, err = h.rt.Start(ctx, spec)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), spec.Image)

	left, err := h.rt.Orphans(ctx, h.root, nil)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing left behind")
}

func TestStartFailureLeavesNothing(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(spec.Port)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })

	_, err = h.rt.Start(ctx, spec)
	assert.Equal(t, provider.CreateFailed, provider.Code(err), "%v", err)

	left, err := h.rt.Orphans(ctx, h.root, nil)
	require.NoError(t, err)
	assert.Empty(t, left, "the container that could not start was removed")
}

func TestForeignContainerWithTheNameIsLeftAlone(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	foreignRoot := "/another-daemon/" + randomHex(4)
	h.cleanupRoot(foreignRoot)
	foreign, err := h.cli.ContainerCreate(ctx, &container.Config{
		Image:  h.image,
		Labels: map[string]string{docker.LabelRoot: foreignRoot},
	}, nil, nil, nil, docker.ContainerName(spec.SandboxID))
	require.NoError(t, err)

	err = h.rt.Preflight(ctx, spec)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "%v", err)
	_, err = h.rt.Start(ctx, spec)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), "docker rm -f "+docker.ContainerName(spec.SandboxID))

	_, err = h.cli.ContainerInspect(ctx, foreign.ID)
	assert.NoError(t, err, "the foreign container is still there")
}

func TestProbe(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)

	t.Run("serving", func(t *testing.T) {
		spec := h.spec()
		hd := h.start(ctx, spec)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, err := h.rt.Probe(ctx, hd, spec.HostAddrPort())
			require.NoError(t, err)
			if ok {
				break
			}
			require.True(t, time.Now().Before(deadline), "probe never succeeded")
			time.Sleep(10 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
		}
		_, err := get(baseURL(spec.Port))
		assert.NoError(t, err, "once the probe succeeds the workload answers")

		require.NoError(t, h.rt.Stop(ctx, hd, 10*time.Second))
		ok, err := h.rt.Probe(ctx, hd, spec.HostAddrPort())
		require.NoError(t, err)
		assert.False(t, ok, "a stopped container does not serve")
	})

	t.Run("published port with nothing behind it", func(t *testing.T) {
		spec := h.spec()
		spec.Env["PORT"] = strconv.Itoa(freePort(t)) // the server listens elsewhere
		hd := h.start(ctx, spec)
		deadline := time.Now().Add(30 * time.Second)
		for {
			stdout, _, err := h.rt.Logs(ctx, hd, "")
			require.NoError(t, err)
			if strings.Contains(string(stdout), "listening") {
				break
			}
			require.True(t, time.Now().Before(deadline), "the server never started")
			time.Sleep(10 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
		}
		ok, err := h.rt.Probe(ctx, hd, spec.HostAddrPort())
		require.NoError(t, err)
		assert.False(t, ok, "the engine's proxy accepts, but nothing inside does")
	})
}

func TestShellWorkload(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	if !hasShell {
		t.Skip(dockertest.NoBusyboxMessage)
	}
	spec := h.spec()
	spec.Command = []string{"/bin/sh", "-c", `echo "from shell $SANDPLANE_SANDBOX_ID"; echo oops >&2; exit 7`}
	hd := h.start(ctx, spec)

	exit, err := h.rt.Wait(ctx, hd)
	require.NoError(t, err)
	assert.Equal(t, "exited: code 7", exit.Reason)
	stdout, stderr, err := h.rt.Logs(ctx, hd, "")
	require.NoError(t, err)
	assert.Equal(t, "from shell "+spec.SandboxID+"\n", string(stdout))
	assert.Equal(t, "oops\n", string(stderr))
}

func TestDeadEngineIsUnavailable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	rt, err := docker.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	ctx := testContext(t)

	checks := map[string]error{
		"ping":      rt.Ping(ctx),
		"preflight": rt.Preflight(ctx, driver.Spec{SandboxID: "x", Image: "img", Port: 4000}),
		"stop":      rt.Stop(ctx, driver.Handle{ContainerID: "abc"}, time.Second),
		"remove":    rt.Remove(ctx, driver.Handle{ContainerID: "abc"}),
	}
	_, checks["start"] = rt.Start(ctx, driver.Spec{SandboxID: "x", Image: "img", Port: 4000})
	_, checks["status"] = rt.Status(ctx, driver.Handle{ContainerID: "abc"})
	_, checks["wait"] = rt.Wait(ctx, driver.Handle{ContainerID: "abc"})
	_, _, checks["logs"] = rt.Logs(ctx, driver.Handle{ContainerID: "abc"}, "")
	_, checks["orphans"] = rt.Orphans(ctx, "/root", nil)
	for name, err := range checks {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
			msg := provider.Message(err)
			assert.Contains(t, msg, "start dockerd or set DOCKER_HOST")
			assert.True(t, strings.Contains(msg, sock), "names the host: %s", msg)
		})
	}
}

func TestMalformedDockerHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "not a host")
	_, err := docker.New()
	assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), "DOCKER_HOST")
}

// TestConcurrentFirstUse: the engine client negotiates its API version on
// its first request, and two first requests at once race inside it; the
// runtime negotiates once, under a lock, first. Run with -race.
func TestConcurrentFirstUse(t *testing.T) {
	dockertest.Engine(t) // skips without an engine
	r, err := docker.New()
	require.NoError(t, err)
	defer r.Close()
	ctx := testContext(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Orphans(ctx, t.TempDir(), nil)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
}
