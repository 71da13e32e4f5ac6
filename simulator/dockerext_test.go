package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/simulator/internal/backend"
)

// dockerExtImage is the test toolbox image (whose `/toolbox fetch URL`
// is the sandboxes' HTTP client) with busybox as /bin/sh and /bin/busybox.
func dockerExtImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	sh, ok := dockertest.StaticBusybox()
	if !ok {
		t.Skip(dockertest.NoBusyboxMessage)
	}
	ctx := context.Background()
	bin, err := dockertest.BuildStaticGo(ctx, cli, "./testdata/toolbox")
	require.NoError(t, err)
	tag := "sandplane-simtest-ext:" + randomHex(t)
	t.Cleanup(func() { assert.NoError(t, dockertest.RemoveImage(context.Background(), cli, tag)) })
	require.NoError(t, docker.BuildScratchImage(ctx, cli, tag, docker.ScratchImage{
		Files:      map[string][]byte{"toolbox": bin, "bin/sh": sh, "bin/busybox": sh},
		Dirs:       map[string]fs.FileMode{"tmp": fs.ModeSticky | 0o777, dockerHome[1:]: 0o755},
		Entrypoint: []string{"/toolbox"},
		Env:        map[string]string{"HOME": dockerHome, "TOOLBOX_HOST": "0.0.0.0"},
		WorkDir:    dockerHome,
		Labels:     map[string]string{dockertest.Label: "true"},
	}))
	return tag
}

// dockerExtHarness is a harness on the docker backend with every
// capability (snapshot images, volumes, networks, links, resize). It
// returns the engine client and the toolbox image. configure adjusts the
// simulator's config further.
func dockerExtHarness(t *testing.T, configure ...func(*Config)) (*harness, *client.Client, string) {
	t.Helper()
	cli := dockertest.Engine(t)
	tag := dockerExtImage(t, cli)
	rt, err := docker.New(docker.WithClient(cli))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	root := t.TempDir()
	t.Cleanup(func() {
		for _, c := range containersOf(t, cli, root) {
			_ = cli.ContainerRemove(context.Background(), c.ID, containerRemoveForce)
		}
	})
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime:      rt,
		Root:         root,
		Image:        tag,
		StopGrace:    2 * time.Second,
		WorkloadAddr: backend.ContainerIP(cli),
		Docker:       cli,
	})
	require.NoError(t, err)
	h := newHarness(t, append([]func(*Config){func(c *Config) { c.Backend = be }}, configure...)...)
	h.root = root
	return h, cli, tag
}

var (
	containerRemoveForce  = container.RemoveOptions{Force: true}
	networkInspectOptions = network.InspectOptions{}
)

// waitJSON polls GET path until cond holds for its JSON body.
func (h *harness) waitJSON(path string, cond func(m map[string]any) bool) map[string]any {
	h.t.Helper()
	var last map[string]any
	require.Eventually(h.t, func() bool {
		code, body, _ := h.raw("GET", path, nil)
		last = nil
		if code != http.StatusOK || json.Unmarshal(body, &last) != nil {
			return false
		}
		return cond(last)
	}, 60*time.Second, 50*time.Millisecond, "GET %s never matched; last %v", path, last)
	return last
}

func stateIs(want string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["state"] == want }
}

// run executes command in sandbox id and returns exit code and output.
func (h *harness) run(id, command string) (int, string) {
	h.t.Helper()
	code, res, body := h.proxyExecute(id, command)
	require.Equal(h.t, http.StatusOK, code, string(body))
	return res.ExitCode, res.Result
}

func TestDockerSnapshotsRunTheirImage(t *testing.T) {
	h, cli, tag := dockerExtHarness(t)

	t.Run("from an image on the engine", func(t *testing.T) {
		code, body, _ := h.raw("POST", "/api/snapshots", map[string]any{"name": "from-image", "imageName": tag})
		require.Equal(t, http.StatusOK, code, string(body))
		sn := h.waitJSON("/api/snapshots/from-image", func(m map[string]any) bool { return m["state"] != snapPending && m["state"] != snapPulling })
		require.Equal(t, snapActive, sn["state"], "%v", sn)
		ref, _ := sn["ref"].(string)
		_, err := cli.ImageInspect(context.Background(), ref)
		require.NoError(t, err, "the snapshot is an image on the engine")
		sb := h.create(apiclient.CreateSandbox{Snapshot: apiclient.PtrString("from-image")})
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
		c := containerOf(t, cli, h, sb.Id)
		assert.Equal(t, ref, c.Config.Image, "the sandbox runs the snapshot's image")
		exit, out := h.run(sb.Id, "echo $HOME; ls /.sandplane")
		assert.Equal(t, 0, exit, out)
		assert.Contains(t, out, dockerHome)
	})

	t.Run("built from a Dockerfile", func(t *testing.T) {
		dockerfile := "FROM " + tag + "\nRUN echo built-by-sim > /marker\n"
		code, body, _ := h.raw("POST", "/api/snapshots", map[string]any{"name": "built", "buildInfo": map[string]any{"dockerfileContent": dockerfile}})
		require.Equal(t, http.StatusOK, code, string(body))
		sn := h.waitJSON("/api/snapshots/built", func(m map[string]any) bool { return m["state"] != snapPending && m["state"] != snapBuilding })
		require.Equal(t, snapActive, sn["state"], "%v", sn)
		sb := h.create(apiclient.CreateSandbox{Snapshot: apiclient.PtrString("built")})
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
		_, out := h.run(sb.Id, "cat /marker")
		assert.Equal(t, "built-by-sim\n", out)
	})

	t.Run("a failing build", func(t *testing.T) {
		dockerfile := "FROM " + tag + "\nRUN exit 3\n"
		code, body, _ := h.raw("POST", "/api/snapshots", map[string]any{"name": "broken", "buildInfo": map[string]any{"dockerfileContent": dockerfile}})
		require.Equal(t, http.StatusOK, code, string(body))
		sn := h.waitJSON("/api/snapshots/broken", func(m map[string]any) bool { return m["state"] == snapBuildFailed })
		assert.Contains(t, sn["errorReason"], "build the image")
		code, body, _ = h.raw("POST", "/api/sandbox", map[string]any{"snapshot": "broken"})
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Equal(t, "Snapshot broken is build_failed", h.nestError(body).Message)
	})

	t.Run("an image that is nowhere", func(t *testing.T) {
		// A registry on a loopback port nothing serves: the pull fails at once.
		missing := "127.0.0.1:1/sandplane-nope:1"
		code, body, _ := h.raw("POST", "/api/snapshots", map[string]any{"name": "missing", "imageName": missing})
		require.Equal(t, http.StatusOK, code, string(body))
		sn := h.waitJSON("/api/snapshots/missing", stateIs(snapError))
		assert.Contains(t, sn["errorReason"], "could not be pulled")
	})

	t.Run("createSnapshot commits the sandbox", func(t *testing.T) {
		sb := h.create(apiclient.CreateSandbox{})
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
		_, _ = h.run(sb.Id, "echo saved > /home/daytona/kept.txt")
		code, body, _ := h.raw("POST", "/api/sandbox/"+sb.Id+"/snapshot", map[string]any{"name": "committed"})
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Contains(t, string(body), `"state":"snapshotting"`)
		h.waitJSON("/api/snapshots/committed", stateIs(snapActive))
		h.waitState(sb.Id, apiclient.SANDBOXSTATE_STARTED)
		from := h.create(apiclient.CreateSandbox{Snapshot: apiclient.PtrString("committed")})
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, from.GetState(), from.GetErrorReason())
		_, out := h.run(from.Id, "cat /home/daytona/kept.txt")
		assert.Equal(t, "saved\n", out)
	})
}

func TestDockerVolumesAreSharedAndOutliveSandboxes(t *testing.T) {
	h, cli, _ := dockerExtHarness(t)
	code, body, _ := h.raw("POST", "/api/volumes", map[string]any{"name": "shared"})
	require.Equal(t, http.StatusOK, code, string(body))
	vol := h.waitJSON("/api/volumes/by-name/shared", stateIs(volReady))
	id := vol["id"].(string)
	_, err := cli.VolumeInspect(context.Background(), backend.VolumeName(id))
	require.NoError(t, err, "a docker volume backs it")

	mount := []apiclient.SandboxVolume{{VolumeId: id, MountPath: "/data"}}
	a := h.create(apiclient.CreateSandbox{Volumes: mount})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, a.GetState(), a.GetErrorReason())
	b := h.create(apiclient.CreateSandbox{Volumes: mount})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, b.GetState(), b.GetErrorReason())
	_, _ = h.run(a.Id, "echo from-a > /data/note")
	_, out := h.run(b.Id, "cat /data/note")
	assert.Equal(t, "from-a\n", out, "the second sandbox sees the first one's file")

	code, body, _ = h.raw("DELETE", "/api/volumes/"+id, nil)
	assert.Equal(t, http.StatusConflict, code, "a mounted volume cannot go: %s", string(body))

	for _, sb := range []string{a.Id, b.Id} {
		_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, sb).Execute()
		require.NoError(t, err)
		h.waitGone(sb)
	}
	c := h.create(apiclient.CreateSandbox{Volumes: mount})
	_, out = h.run(c.Id, "cat /data/note")
	assert.Equal(t, "from-a\n", out, "the files outlive the sandboxes")
	_, _, err = h.api.SandboxAPI.DeleteSandbox(h.ctx, c.Id).Execute()
	require.NoError(t, err)
	h.waitGone(c.Id)

	code, body, _ = h.raw("DELETE", "/api/volumes/"+id, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	require.Eventually(t, func() bool {
		_, err := cli.VolumeInspect(context.Background(), backend.VolumeName(id))
		return err != nil
	}, 20*time.Second, 50*time.Millisecond, "deleting the volume removes the docker volume")
}

// outsideHost serves HTTP in a network namespace of its own, joined to
// this machine by a veth pair: an address beyond the containers' networks
// that only forwarded traffic reaches, as the world outside would be. It
// needs root (a network namespace) and iproute2.
func outsideHost(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace for the outside host needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("making a network namespace for the outside host needs iproute2 (ip)")
	}
	sfx := randomHex(t)[:6]
	ns, hostIf, nsIf := "sbsim-"+sfx, "sbh"+sfx, "sbo"+sfx
	n, err := strconv.ParseUint(sfx[:2], 16, 8)
	require.NoError(t, err)
	hostIP, nsIP := fmt.Sprintf("10.253.%d.1", n), fmt.Sprintf("10.253.%d.2", n)
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	ip("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	ip("link", "set", nsIf, "netns", ns)
	ip("addr", "add", hostIP+"/30", "dev", hostIf)
	ip("link", "set", hostIf, "up")
	ip("-n", ns, "addr", "add", nsIP+"/30", "dev", nsIf)
	ip("-n", ns, "link", "set", nsIf, "up")
	ip("-n", ns, "route", "add", "default", "via", hostIP)

	l := listenIn(t, "/var/run/netns/"+ns, net.JoinHostPort(nsIP, "8080"))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("reached")) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// listenIn opens a TCP listener inside the network namespace at nsPath:
// the socket is made on a thread that has joined it, and stays there.
func listenIn(t *testing.T, nsPath, addr string) net.Listener {
	t.Helper()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		// The thread joins another namespace: it must not go back to the
		// pool, so it stays locked and ends with this goroutine.
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	require.NoError(t, r.err)
	t.Cleanup(func() { _ = r.l.Close() })
	return r.l
}

func TestDockerNetworkBlockIsEnforced(t *testing.T) {
	h, cli, _ := dockerExtHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	addr := outsideHost(t)
	fetch := "/toolbox fetch http://" + addr + "/"
	// A service of the host's own, on every address of it.
	hostService, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	hostServer := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("host")) })}
	go func() { _ = hostServer.Serve(hostService) }()
	t.Cleanup(func() { _ = hostServer.Close() })
	_, hostPort, _ := net.SplitHostPort(hostService.Addr().String())

	exit, out := h.run(sb.Id, fetch)
	require.Equal(t, 0, exit, "an open sandbox reaches the host: %s", out)
	assert.Equal(t, "200 reached", out)

	code, body, hdr := h.raw("POST", "/api/sandbox/"+sb.Id+"/network-settings", map[string]any{"networkBlockAll": true})
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Contains(t, string(body), `"networkBlockAll":true`)
	assert.Empty(t, hdr.Get(warningHeader), "enforced: no warning")
	exit, out = h.run(sb.Id, fetch)
	assert.NotEqual(t, 0, exit, "a blocked sandbox reached the host: %s", out)

	t.Run("the block cuts the host's own addresses", func(t *testing.T) {
		n, err := cli.NetworkInspect(context.Background(), backend.BlockedNetwork, networkInspectOptions)
		require.NoError(t, err)
		require.NotEmpty(t, n.IPAM.Config)
		gateway := n.IPAM.Config[0].Gateway
		require.NotEmpty(t, gateway, "the blocked network has an address on the host")
		exit, out := h.run(sb.Id, "/toolbox fetch http://"+net.JoinHostPort(gateway, hostPort)+"/")
		assert.NotEqual(t, 0, exit, "a blocked sandbox reached a service of the host: %s", out)
	})

	t.Run("the block survives a restart", func(t *testing.T) {
		_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
		require.NoError(t, err)
		h.waitState(sb.Id, apiclient.SANDBOXSTATE_STOPPED)
		started, _, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
		require.NoError(t, err)
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState(), started.GetErrorReason())
		exit, out := h.run(sb.Id, fetch)
		assert.NotEqual(t, 0, exit, "blocked after a restart: %s", out)
	})

	t.Run("lifting it opens the network again", func(t *testing.T) {
		code, body, _ := h.raw("POST", "/api/sandbox/"+sb.Id+"/network-settings", map[string]any{"networkBlockAll": false})
		require.Equal(t, http.StatusOK, code, string(body))
		exit, out := h.run(sb.Id, fetch)
		assert.Equal(t, 0, exit, out)
	})

	t.Run("blocked from the start", func(t *testing.T) {
		blocked := h.create(apiclient.CreateSandbox{NetworkBlockAll: apiclient.PtrBool(true)})
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, blocked.GetState(), blocked.GetErrorReason())
		exit, out := h.run(blocked.Id, fetch)
		assert.NotEqual(t, 0, exit, "created blocked, it reached the host: %s", out)
	})

	t.Run("an allow list limits what it reaches", func(t *testing.T) {
		outside, _, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		allow := func(list string) {
			t.Helper()
			code, body, hdr := h.raw("POST", "/api/sandbox/"+sb.Id+"/network-settings", map[string]any{"networkBlockAll": false, "networkAllowList": list})
			require.Equal(t, http.StatusOK, code, string(body))
			assert.Empty(t, hdr.Get(warningHeader), "enforced: no warning")
		}
		allow("192.0.2.0/24")
		exit, out := h.run(sb.Id, fetch)
		assert.NotEqual(t, 0, exit, "reached a host outside its allow list: %s", out)

		allow("192.0.2.0/24, " + outside + "/32")
		exit, out = h.run(sb.Id, fetch)
		assert.Equal(t, 0, exit, "a host in its allow list: %s", out)

		allow("192.0.2.0/24")
		_, _, err = h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
		require.NoError(t, err)
		h.waitState(sb.Id, apiclient.SANDBOXSTATE_STOPPED)
		started, _, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
		require.NoError(t, err)
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState(), started.GetErrorReason())
		exit, out = h.run(sb.Id, fetch)
		assert.NotEqual(t, 0, exit, "the allow list was lost in a restart: %s", out)

		allow("")
		exit, out = h.run(sb.Id, fetch)
		assert.Equal(t, 0, exit, "an empty allow list lets everything through: %s", out)
	})

	t.Run("an allow list from the start", func(t *testing.T) {
		outside, _, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		limited := h.create(apiclient.CreateSandbox{NetworkAllowList: apiclient.PtrString("192.0.2.0/24")})
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, limited.GetState(), limited.GetErrorReason())
		exit, out := h.run(limited.Id, fetch)
		assert.NotEqual(t, 0, exit, "created with an allow list, it reached a host outside it: %s", out)
		allowed := h.create(apiclient.CreateSandbox{NetworkAllowList: apiclient.PtrString(outside + "/32")})
		require.Equal(t, apiclient.SANDBOXSTATE_STARTED, allowed.GetState(), allowed.GetErrorReason())
		exit, out = h.run(allowed.Id, fetch)
		assert.Equal(t, 0, exit, "created with a host in its allow list, it did not reach it: %s", out)
	})

	t.Run("no packet gets past the rules", func(t *testing.T) {
		// A packet socket writes frames below the IP stack, where the
		// allow list's rules never see them: the container may not have
		// one, even as root.
		exit, out := h.run(sb.Id, "/toolbox rawsocket")
		assert.NotEqual(t, 0, exit, "a packet socket opened in the sandbox: %s", out)
		assert.Contains(t, out, "operation not permitted")
	})
}

func TestDockerLinkedSandboxes(t *testing.T) {
	h, cli, _ := dockerExtHarness(t)
	owner := h.create(apiclient.CreateSandbox{Name: apiclient.PtrString("owner-box")})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, owner.GetState(), owner.GetErrorReason())
	port := h.toolboxPortOf(owner.Id)
	follower := h.create(apiclient.CreateSandbox{LinkedSandbox: apiclient.PtrString("owner-box")})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, follower.GetState(), follower.GetErrorReason())
	assert.Equal(t, owner.Id, follower.GetLinkedSandboxId())
	assert.Equal(t, owner.Id, h.get(follower.Id).GetLinkedSandboxId(), "stored")

	// The owner's toolbox answers (and refuses a Host that is not its own
	// loopback): the follower reached it by name.
	exit, out := h.run(follower.Id, "/toolbox fetch http://owner-box:"+strconv.Itoa(port)+"/version")
	assert.Equal(t, 0, exit, "the follower reaches its owner by name: %s", out)
	assert.Contains(t, out, "owner-box:"+strconv.Itoa(port))
	other := h.create(apiclient.CreateSandbox{})
	exit, out = h.run(other.Id, "/toolbox fetch http://owner-box:"+strconv.Itoa(port)+"/version")
	assert.NotEqual(t, 0, exit, "a sandbox that is not linked does not: %s", out)

	code, body, _ := h.raw("POST", "/api/sandbox/"+follower.Id+"/network-settings", map[string]any{"networkBlockAll": true})
	require.Equal(t, http.StatusOK, code, string(body))
	exit, out = h.run(follower.Id, "/toolbox fetch http://owner-box:"+strconv.Itoa(port)+"/version")
	assert.Equal(t, 0, exit, "a blocked follower still reaches its owner: %s", out)

	_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, owner.Id).Execute()
	require.NoError(t, err)
	h.waitGone(owner.Id)
	h.waitGone(follower.Id)
	require.Eventually(t, func() bool {
		_, err := cli.NetworkInspect(context.Background(), backend.LinkNetworkPrefix+owner.Id, networkInspectOptions)
		return err != nil
	}, 20*time.Second, 50*time.Millisecond, "the link network goes with the owner")
}

// toolboxPortOf is the port the sandbox's toolbox listens on inside its
// container.
func (h *harness) toolboxPortOf(id string) int {
	h.t.Helper()
	_, out := h.run(id, "echo $PORT")
	port, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(h.t, err, out)
	return port
}

func TestDockerResizeAppliesLimits(t *testing.T) {
	h, cli, _ := dockerExtHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	c := containerOf(t, cli, h, sb.Id)
	assert.Equal(t, int64(1e9), c.HostConfig.NanoCPUs, "1 CPU, as the snapshot says")
	assert.Equal(t, int64(1<<30), c.HostConfig.Memory)

	code, body, _ := h.raw("POST", "/api/sandbox/"+sb.Id+"/resize", map[string]any{"cpu": 2, "memory": 2})
	require.Equal(t, http.StatusOK, code, string(body))
	c = containerOf(t, cli, h, sb.Id)
	assert.Equal(t, int64(2e9), c.HostConfig.NanoCPUs)
	assert.Equal(t, int64(2<<30), c.HostConfig.Memory)
	assert.Equal(t, float32(2), h.get(sb.Id).Cpu)
}
