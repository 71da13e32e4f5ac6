package docker_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/runtime/docker"
)

// BenchmarkDockerStart measures Start until the workload answers HTTP on its
// published port. Compare it with BenchmarkBareDockerRun for the runtime's
// overhead.
func BenchmarkDockerStart(b *testing.B) {
	h := newHarness(b)
	ctx := testContext(b)
	for b.Loop() {
		spec := h.spec()
		hd, err := h.rt.Start(ctx, spec)
		require.NoError(b, err)
		benchWaitHTTP(b, baseURL(spec.Port))

		b.StopTimer()
		require.NoError(b, h.rt.Remove(ctx, hd))
		b.StartTimer()
	}
}

// BenchmarkBareDockerRun is the same image, port and readiness check through
// plain ContainerCreate and ContainerStart, with none of the runtime's logic.
func BenchmarkBareDockerRun(b *testing.B) {
	h := newHarness(b)
	ctx := testContext(b)
	for b.Loop() {
		hostPort := freePort(b)
		port := strconv.Itoa(hostPort)
		p := nat.Port(port + "/tcp")
		created, err := h.cli.ContainerCreate(ctx, &container.Config{
			Image:        h.image,
			Env:          []string{"PORT=" + port},
			ExposedPorts: nat.PortSet{p: struct{}{}},
			Labels:       map[string]string{docker.LabelRoot: h.root},
		}, &container.HostConfig{
			PortBindings: nat.PortMap{p: []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: port}}},
		}, nil, nil, "")
		require.NoError(b, err)
		require.NoError(b, h.cli.ContainerStart(ctx, created.ID, container.StartOptions{}))
		benchWaitHTTP(b, baseURL(hostPort))

		b.StopTimer()
		require.NoError(b, h.cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}))
		b.StartTimer()
	}
}

// benchWaitHTTP polls url until it answers; both benchmarks share it so that
// the polling cost cancels out of their ratio.
func benchWaitHTTP(b *testing.B, url string) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := get(url); err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never answered", url)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
