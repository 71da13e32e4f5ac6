package simulator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
)

// deadOwner is the owner label of a process of this boot that has ended.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	label := ownerOf(bootID(), cmd.Process.Pid)
	require.NotEmpty(t, label)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	return label
}

func TestOwnerGone(t *testing.T) {
	self := ownerLabel()
	require.NotEmpty(t, self)
	boot := bootID()
	for _, tc := range []struct {
		name  string
		label string
		gone  bool
	}{
		{"this process", self, false},
		{"a process that ended", deadOwner(t), true},
		{"its pid, another start", fmt.Sprintf("%s/%d/1", boot, os.Getpid()), true},
		{"another boot", "another-boot/1/1", false},
		{"not a label", "x", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.gone, ownerGone(tc.label, boot)) })
	}
	assert.False(t, ownerGone(deadOwner(t), ""), "without this boot's id, nothing is known gone")
}

// A simulator killed with SIGKILL leaves its containers running: the
// next docker backend on the machine removes them, and only them.
func TestDockerBackendSweepsWhatADeadSimulatorLeft(t *testing.T) {
	cli := dockertest.Engine(t)
	tag := dockerExtImage(t, cli)
	ctx := context.Background()
	leftBy := func(owner string) string {
		c, err := cli.ContainerCreate(ctx, &container.Config{Image: tag, Labels: map[string]string{
			docker.LabelPrefix + labelSimOwner: owner, labelSim: "true", dockertest.Label: "true",
		}}, nil, nil, nil, "")
		require.NoError(t, err)
		t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
		return c.ID
	}
	orphan := leftBy(deadOwner(t))
	live := leftBy(ownerLabel())

	h, _, _ := dockerExtHarness(t)

	_, err := cli.ContainerInspect(ctx, orphan)
	assert.True(t, cerrdefs.IsNotFound(err), "the dead simulator's container is still there: %v", err)
	_, err = cli.ContainerInspect(ctx, live)
	assert.NoError(t, err, "a live simulator's container was removed")

	sb := h.create(apiclient.CreateSandbox{})
	assert.Equal(t, ownerLabel(), containerOf(t, cli, h, sb.Id).Config.Labels[docker.LabelPrefix+labelSimOwner],
		"a sandbox's container names the simulator that made it")
}
