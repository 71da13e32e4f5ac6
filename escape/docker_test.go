package escape_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
)

// dockerWorld is the engine the docker runtime's world runs on, and the
// toolbox image its daemon builds under a tag of the test's own.
type dockerWorld struct {
	cli   *client.Client
	image string
}

// newDockerWorld skips t without an engine; the image and every container
// of the daemon's root are removed when t ends.
func newDockerWorld(t *testing.T) *dockerWorld {
	t.Helper()
	cli := dockertest.Engine(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	dw := &dockerWorld{cli: cli, image: "sandplane-escape-toolbox:" + hex.EncodeToString(b)}
	t.Cleanup(func() {
		if err := dockertest.RemoveImage(context.Background(), cli, dw.image); err != nil {
			t.Error(err)
		}
	})
	return dw
}

// config is the daemon's YAML: the default snapshot on the test's image.
func (dw *dockerWorld) config() string { return fmt.Sprintf("dockerImage: %s\n", dw.image) }

// removeRoot removes the containers and images labelled with root.
func (dw *dockerWorld) removeRoot(t *testing.T, root string) {
	ctx := context.Background()
	args := filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root))
	list, err := dw.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		t.Errorf("list containers to clean up: %v", err)
		return
	}
	for _, c := range list {
		if err := dw.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", c.ID, err)
		}
	}
	images, err := dw.cli.ImageList(ctx, image.ListOptions{All: true, Filters: args})
	if err != nil {
		t.Errorf("list images to clean up: %v", err)
		return
	}
	for _, img := range images {
		if err := dockertest.RemoveImage(ctx, dw.cli, img.ID); err != nil {
			t.Error(err)
		}
	}
}

// inspect is sandbox id's container.
func (dw *dockerWorld) inspect(t *testing.T, id string) container.InspectResponse {
	t.Helper()
	c, err := dw.cli.ContainerInspect(context.Background(), docker.ContainerName(id))
	require.NoError(t, err)
	return c
}

// mergedDir is the host's view of sandbox id's root file system.
func (dw *dockerWorld) mergedDir(t *testing.T, id string) string {
	t.Helper()
	c := dw.inspect(t, id)
	require.NotNil(t, c.GraphDriver.Data, "the engine names no graph driver data")
	return c.GraphDriver.Data["MergedDir"]
}

// containerURLs are the toolbox of sandbox id at its container's own
// addresses, where another container of the bridge would reach it.
func (dw *dockerWorld) containerURLs(t *testing.T, id string) []string {
	t.Helper()
	c := dw.inspect(t, id)
	var out []string
	for port := range c.Config.ExposedPorts {
		for _, n := range c.NetworkSettings.Networks {
			if n.IPAddress != "" {
				out = append(out, fmt.Sprintf("http://%s:%s", n.IPAddress, port.Port()))
			}
		}
	}
	return out
}

// pidsLimit is sandbox id's container's pids limit, 0 for none.
func (dw *dockerWorld) pidsLimit(t *testing.T, id string) int64 {
	t.Helper()
	c := dw.inspect(t, id)
	if c.HostConfig.PidsLimit == nil || *c.HostConfig.PidsLimit < 0 {
		return 0
	}
	return *c.HostConfig.PidsLimit
}

// storageQuota reports whether sandbox id's container has a size limit of
// its own on its writable layer.
func (dw *dockerWorld) storageQuota(t *testing.T, id string) bool {
	t.Helper()
	_, ok := dw.inspect(t, id).HostConfig.StorageOpt["size"]
	return ok
}
