package simulator

import (
	"context"
	"os/exec"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/simulator/internal/backend"
)

// endedOwner is the owner label of a process of this boot that has ended,
// as a simulator killed with SIGKILL leaves on its containers.
func endedOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	label := backend.OwnerOf(cmd.Process.Pid)
	require.NotEmpty(t, label)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	return label
}

// A simulator killed with SIGKILL leaves its containers running: the
// next docker backend on the machine removes them, and only them.
func TestDockerBackendSweepsWhatADeadSimulatorLeft(t *testing.T) {
	cli := dockertest.Engine(t)
	tag := dockerExtImage(t, cli)
	ctx := context.Background()
	leftBy := func(owner string) string {
		c, err := cli.ContainerCreate(ctx, &container.Config{Image: tag, Labels: map[string]string{
			docker.LabelPrefix + backend.LabelSimOwner: owner, backend.LabelSim: "true", dockertest.Label: "true",
		}}, nil, nil, nil, "")
		require.NoError(t, err)
		t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
		return c.ID
	}
	orphan := leftBy(endedOwner(t))
	live := leftBy(backend.OwnerLabel())

	h, _, _ := dockerExtHarness(t)

	_, err := cli.ContainerInspect(ctx, orphan)
	assert.True(t, cerrdefs.IsNotFound(err), "the dead simulator's container is still there: %v", err)
	_, err = cli.ContainerInspect(ctx, live)
	assert.NoError(t, err, "a live simulator's container was removed")

	sb := h.create(apiclient.CreateSandbox{})
	assert.Equal(t, backend.OwnerLabel(), containerOf(t, cli, h, sb.Id).Config.Labels[docker.LabelPrefix+backend.LabelSimOwner],
		"a sandbox's container names the simulator that made it")
}
