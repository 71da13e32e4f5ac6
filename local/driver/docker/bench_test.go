package docker_test

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/docker"
)

// BenchmarkDockerStart measures Start until the workload answers HTTP on its
// published port, beside plain ContainerCreate and ContainerStart of the same
// image and port with none of the runtime's logic, until the same answer,
// measured alternately in the same run.
func BenchmarkDockerStart(b *testing.B) {
	h := newHarness(b)
	ctx := testContext(b)
	var subject, baseline []time.Duration
	for b.Loop() {
		spec := h.spec()
		start := time.Now()
		hd, err := h.rt.Start(ctx, spec)
		require.NoError(b, err)
		benchWaitHTTP(b, baseURL(spec.Port))
		subject = append(subject, time.Since(start))

		b.StopTimer()
		require.NoError(b, h.rt.Remove(ctx, hd))
		baseline = append(baseline, h.bareRun(ctx, b))
		b.StartTimer()
	}
	reportVersus(b, subject, baseline)
}

// bareRun creates and starts the test image by hand, timed until it answers.
func (h *harness) bareRun(ctx context.Context, b *testing.B) time.Duration {
	hostPort := freePort(b)
	port := strconv.Itoa(hostPort)
	p := nat.Port(port + "/tcp")
	start := time.Now()
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
	took := time.Since(start)
	require.NoError(b, h.cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}))
	return took
}

// benchWaitHTTP polls url until it answers; subject and baseline share it so
// that the polling cost cancels out of their ratio.
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
		time.Sleep(2 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
	}
}

// reportVersus reports the medians of a figure and its baseline, and their
// ratio.
func reportVersus(b *testing.B, subject, baseline []time.Duration) {
	s, base := median(subject), median(baseline)
	b.ReportMetric(float64(s)/1e6, "ms/op-subject")
	b.ReportMetric(float64(base)/1e6, "ms/op-baseline")
	b.ReportMetric(float64(s)/float64(base), "x-baseline")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
