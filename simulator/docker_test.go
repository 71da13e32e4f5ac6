package simulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/simulator/internal/backend"
)

// dockerHome is the sandbox user's home and working directory in the image,
// as in the image `sandplane sim --backend docker` builds.
const dockerHome = "/home/daytona"

// dockerToolboxImage builds, FROM scratch, an image of the docker test
// toolbox with busybox as /bin/sh, and removes it when t ends.
func dockerToolboxImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	sh, ok := dockertest.StaticBusybox()
	if !ok {
		// process/execute runs every command through /bin/sh.
		t.Skip(dockertest.NoBusyboxMessage)
	}
	ctx := context.Background()
	bin, err := dockertest.BuildStaticGo(ctx, cli, "./testdata/toolbox")
	require.NoError(t, err)
	tag := "sandplane-simtest-toolbox:" + randomHex(t)
	t.Cleanup(func() { assert.NoError(t, dockertest.RemoveImage(context.Background(), cli, tag)) })
	require.NoError(t, docker.BuildScratchImage(ctx, cli, tag, docker.ScratchImage{
		Files:      map[string][]byte{"toolbox": bin, "bin/sh": sh},
		Dirs:       map[string]fs.FileMode{"tmp": fs.ModeSticky | 0o777, dockerHome[1:]: 0o755},
		Entrypoint: []string{"/toolbox"},
		Env:        map[string]string{"HOME": dockerHome, "TOOLBOX_HOST": "0.0.0.0"},
		WorkDir:    dockerHome,
		Labels:     map[string]string{dockertest.Label: "true"},
	}))
	return tag
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// dockerHarness is a harness whose sandboxes run the toolbox in containers
// of the engine DOCKER_HOST names. It returns the state root, whose label
// marks every container the harness makes; they are all removed when t
// ends, whatever the test left behind.
func dockerHarness(t *testing.T) (*harness, *client.Client, string) {
	t.Helper()
	cli := dockertest.Engine(t)
	tag := dockerToolboxImage(t, cli)
	rt, err := docker.New(docker.WithClient(cli))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	root := t.TempDir()
	t.Cleanup(func() {
		for _, c := range containersOf(t, cli, root) {
			assert.NoError(t, cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}))
		}
	})
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime:      rt,
		Root:         root,
		Image:        tag,
		StopGrace:    2 * time.Second,
		WorkloadAddr: backend.ContainerIP(cli),
	})
	require.NoError(t, err)
	h := newHarness(t, func(c *Config) { c.Backend = be })
	h.root = root
	return h, cli, root
}

// containersOf lists every container, running or not, labelled with root.
func containersOf(t *testing.T, cli *client.Client, root string) []container.Summary {
	t.Helper()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root)),
	})
	require.NoError(t, err)
	return cs
}

// containerOf inspects the one container that runs sandbox id in h's
// simulator: labelled with its id and h's state directory, since seeded
// simulators repeat their ids.
func containerOf(t *testing.T, cli *client.Client, h *harness, id string) container.InspectResponse {
	t.Helper()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{
		All: true, Filters: filters.NewArgs(
			filters.Arg("label", docker.LabelPrefix+backend.LabelSimSandbox+"="+id),
			filters.Arg("label", docker.LabelRoot+"="+h.root)),
	})
	require.NoError(t, err)
	require.Len(t, cs, 1, "one container runs sandbox %s", id)
	c, err := cli.ContainerInspect(context.Background(), cs[0].ID)
	require.NoError(t, err)
	return c
}

// proxyExecute runs command through the toolbox proxy URL that the API
// hands out for sandbox id.
func (h *harness) proxyExecute(id, command string) (int, executeResponse, []byte) {
	h.t.Helper()
	proxy, _, err := h.api.SandboxAPI.GetToolboxProxyUrl(h.ctx, id).Execute()
	require.NoError(h.t, err)
	body, err := json.Marshal(map[string]any{"command": command})
	require.NoError(h.t, err)
	req, err := http.NewRequest("POST", strings.TrimSuffix(proxy.Url, "/")+"/"+id+"/process/execute", bytes.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	var out executeResponse
	if resp.StatusCode == http.StatusOK {
		require.NoError(h.t, json.Unmarshal(b, &out), string(b))
	}
	return resp.StatusCode, out, b
}

// Two simulators with one seed hand out the same sandbox ids; a container
// that one of them leaves (a killed run) must not stop the other's sandbox
// from starting.
func TestDockerSeededSimulatorsShareNoContainer(t *testing.T) {
	first, cli, firstRoot := dockerHarness(t)
	second, _, secondRoot := dockerHarness(t)
	a := first.create(apiclient.CreateSandbox{})
	b := second.create(apiclient.CreateSandbox{})
	require.Equal(t, a.Id, b.Id, "the same seed, the same ids")
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, b.GetState(), b.GetErrorReason())
	// Counted within the two simulators' own state directories: an earlier
	// test's simulator, with the same seed, may still be removing a
	// container of this same sandbox id.
	for _, root := range []string{firstRoot, secondRoot} {
		cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", docker.LabelPrefix+backend.LabelSimSandbox+"="+a.Id), filters.Arg("label", docker.LabelRoot+"="+root))})
		require.NoError(t, err)
		assert.Len(t, cs, 1, "a container for each simulator's sandbox")
	}
	code, res, body := second.proxyExecute(b.Id, "echo ok")
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, "ok\n", res.Result)
}

func TestDockerBackendLifecycle(t *testing.T) {
	h, cli, root := dockerHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{Env: &map[string]string{"GREETING": "hello"}})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())

	cs := containersOf(t, cli, root)
	require.Len(t, cs, 1, "one container per sandbox")
	assert.Equal(t, sb.Id, cs[0].Labels[docker.LabelPrefix+backend.LabelSimSandbox])
	assert.NotEqual(t, docker.ContainerName(sb.Id), strings.TrimPrefix(cs[0].Names[0], "/"),
		"named by a workload id of its own, which no earlier run with the same seed used")
	assert.Equal(t, "running", cs[0].State)

	code, res, body := h.proxyExecute(sb.Id, "echo $GREETING $DAYTONA_SANDBOX_ID; echo $HOME; pwd; echo kept across restarts > note.txt")
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, 0, res.ExitCode, res.Result)
	assert.Equal(t, "hello "+sb.Id+"\n"+dockerHome+"\n"+dockerHome+"\n", res.Result)

	_, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_STOPPED)
	cs = containersOf(t, cli, root)
	require.Len(t, cs, 1, "a stopped sandbox keeps its container")
	assert.Equal(t, "exited", cs[0].State)
	code, _, body = h.proxyExecute(sb.Id, "true")
	assert.Equal(t, http.StatusBadRequest, code, string(body))

	started, _, err := api.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState(), started.GetErrorReason())
	code, res, body = h.proxyExecute(sb.Id, "cat note.txt")
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, 0, res.ExitCode, res.Result)
	assert.Equal(t, "kept across restarts\n", res.Result)

	_, _, err = api.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitGone(sb.Id)
	assert.Eventually(t, func() bool { return len(containersOf(t, cli, root)) == 0 },
		20*time.Second, 50*time.Millisecond, "a deleted sandbox leaves no container")
}

func TestDockerPreviewReachesOnlyTheContainersPorts(t *testing.T) {
	h, _, _ := dockerHarness(t)
	daemon := newBystander(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	link, _, err := h.api.SandboxAPI.GetPortPreviewUrl(h.ctx, sb.Id, 8080).Execute()
	require.NoError(t, err)

	// A second server inside the container, on a port nothing publishes.
	code, res, body := h.proxyExecute(sb.Id, "PORT=8080 /toolbox >/dev/null 2>&1 &")
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, 0, res.ExitCode, res.Result)
	require.Eventually(t, func() bool {
		code, _ := h.send(request{path: previewPath(8080, sb.Id, "/version"), token: link.Token})
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "the preview never reached the port opened in the container")
	code, text := h.send(request{path: previewPath(8080, sb.Id, "/version"), token: link.Token})
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, text, "sim-test")

	// Every port is the container's own: the host's loopback listeners are
	// out of reach.
	code, text = h.send(request{path: previewPath(daemon.port, sb.Id, "/v1/sandboxes"), token: link.Token})
	assert.Equal(t, http.StatusBadGateway, code, text)
	assert.Zero(t, daemon.hits.Load(), "a preview request left the container")
}
