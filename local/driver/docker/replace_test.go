package docker_test

import (
	"context"
	"net"
	"net/http"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/provider"
)

func putFile(t *testing.T, port int, name, body string) {
	t.Helper()
	getWhenUp(t, baseURL(port))
	req, err := http.NewRequest(http.MethodPut, baseURL(port)+"/files/"+name, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// onPort is spec moved to another port, as a restarted daemon may hand out.
func onPort(spec driver.Spec, port int) driver.Spec {
	spec.Port = port
	spec.Env = map[string]string{"PORT": strconv.Itoa(port)}
	return spec
}

// carriedImages lists the images Start committed for sandbox id.
func (h *harness) carriedImages(ctx context.Context, id string) []image.Summary {
	h.t.Helper()
	list, err := h.cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "io.sandplane.carried="+id))})
	require.NoError(h.t, err)
	return list
}

func (h *harness) containersOfRoot(ctx context.Context) []container.Summary {
	h.t.Helper()
	list, err := h.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+h.root))})
	require.NoError(h.t, err)
	return list
}

func TestReplacedContainerKeepsItsFiles(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	first := h.start(ctx, spec)
	putFile(t, spec.Port, "kept.txt", "written before the stop")
	require.NoError(t, h.rt.Stop(ctx, first, 10*time.Second))

	moved := onPort(spec, freePort(t))
	second, err := h.rt.Start(ctx, moved)
	require.NoError(t, err)
	assert.NotEqual(t, first.ContainerID, second.ContainerID, "a new port needs a new container")
	assert.Equal(t, "written before the stop", getWhenUp(t, baseURL(moved.Port)+"/files/kept.txt"))
	assert.Equal(t, strconv.Itoa(moved.Port), info(t, moved.Port).Env["PORT"])
	require.Len(t, h.containersOfRoot(ctx), 1, "the replaced container is gone")
	putFile(t, moved.Port, "later.txt", "written in the replacement")

	require.NoError(t, h.rt.Stop(ctx, second, 10*time.Second))
	again, err := h.rt.Start(ctx, moved)
	require.NoError(t, err)
	assert.Equal(t, second.ContainerID, again.ContainerID, "the replacement restarts as any container does")
	require.NoError(t, h.rt.Stop(ctx, again, 10*time.Second))

	port := freePort(t)
	third, err := h.rt.Start(ctx, onPort(spec, port))
	require.NoError(t, err)
	assert.Equal(t, "written before the stop", getWhenUp(t, baseURL(port)+"/files/kept.txt"), "a replacement of a replacement")
	assert.Equal(t, "written in the replacement", getWhenUp(t, baseURL(port)+"/files/later.txt"))
	assert.NotEmpty(t, h.carriedImages(ctx, spec.SandboxID))

	require.NoError(t, h.rt.Remove(ctx, third))
	assert.Empty(t, h.containersOfRoot(ctx))
	assert.Empty(t, h.carriedImages(ctx, spec.SandboxID), "remove deletes the committed images")
}

func TestFailedReplacementKeepsTheOldContainer(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	old := h.start(ctx, spec)
	putFile(t, spec.Port, "kept.txt", "still here")
	require.NoError(t, h.rt.Stop(ctx, old, 10*time.Second))

	// Something else holds the new port, so the replacement cannot start.
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer squatter.Close()
	_, err = h.rt.Start(ctx, onPort(spec, squatter.Addr().(*net.TCPAddr).Port))
	require.Error(t, err)
	assert.Equal(t, provider.CreateFailed, provider.Code(err))

	list := h.containersOfRoot(ctx)
	require.Len(t, list, 1, "the half-made replacement is gone")
	assert.Equal(t, old.ContainerID, list[0].ID)
	assert.Equal(t, []string{"/" + docker.ContainerName(spec.SandboxID)}, list[0].Names, "the old container has its name back")
	assert.Empty(t, h.carriedImages(ctx, spec.SandboxID))

	again, err := h.rt.Start(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, old.ContainerID, again.ContainerID)
	assert.Equal(t, "still here", getWhenUp(t, baseURL(spec.Port)+"/files/kept.txt"))
}

// A daemon that dies between a replace's commit and the new container
// leaves a committed image no container uses. The next daemon's sweep finds
// it by its labels and removes it, and keeps the images containers use.
func TestSweepRemovesTheImageOfAnInterruptedReplace(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	first := h.start(ctx, spec)
	require.NoError(t, h.rt.Stop(ctx, first, 10*time.Second))

	crashed := make(chan struct{})
	restore := docker.SetAfterCommit(func() { close(crashed); goruntime.Goexit() })
	moved := onPort(spec, freePort(t))
	go func() { _, _ = h.rt.Start(ctx, moved) }()
	<-crashed
	restore()
	require.Len(t, h.carriedImages(ctx, spec.SandboxID), 1, "the crash left the committed image")

	// A sandbox whose replacement went through keeps its image.
	kept := h.spec()
	second := h.start(ctx, kept)
	require.NoError(t, h.rt.Stop(ctx, second, 10*time.Second))
	_, err := h.rt.Start(ctx, onPort(kept, freePort(t)))
	require.NoError(t, err)
	require.Len(t, h.carriedImages(ctx, kept.SandboxID), 1)

	require.NoError(t, h.newRuntime().Sweep(ctx, h.root))
	assert.Empty(t, h.carriedImages(ctx, spec.SandboxID), "the sweep removed the leaked image")
	assert.Len(t, h.carriedImages(ctx, kept.SandboxID), 1, "an image a container uses is kept")
	again, err := h.rt.Start(ctx, spec)
	require.NoError(t, err, "the sandbox whose replace crashed starts again in its old container")
	assert.Equal(t, first.ContainerID, again.ContainerID)

	other := newHarness(t)
	require.NoError(t, other.rt.Sweep(ctx, other.root), "another root's sweep")
	assert.Len(t, h.carriedImages(ctx, kept.SandboxID), 1, "never touches this root's images")
}

func TestSandboxOf(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	hd := h.start(ctx, spec)
	id, err := h.rt.SandboxOf(ctx, hd)
	require.NoError(t, err)
	assert.Equal(t, spec.SandboxID, id)
	require.NoError(t, h.rt.Stop(ctx, hd, 0))
	require.NoError(t, h.rt.Remove(ctx, hd))
	id, err = h.rt.SandboxOf(ctx, hd)
	require.NoError(t, err)
	assert.Empty(t, id, "a container that is gone has no mark")
}
