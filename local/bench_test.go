package local_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
)

// BenchmarkCreateToStarted measures what a host server waits for: a create
// through the daemon's HTTP API until the sandbox is started (its workload
// listens), beside the bare fork/exec of the same workload until it listens,
// measured alternately in the same run. It reports too the ratio to the same
// bare spawn in a new PID and mount namespace (x-contained), where the
// daemon runs each workload: what the containment's clone costs the kernel,
// before any init or /proc of the daemon's. The daemon is a default one,
// isolated where bubblewrap works, as a user's is; BenchmarkIsolatedCreate
// sets isolation's own cost beside none.
func BenchmarkCreateToStarted(b *testing.B) {
	d := startDaemon(b, "")
	ctx := context.Background()
	var subject, baseline, contained []time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		s, err := d.P.Create(ctx, provider.CreateRequest{AutoStopInterval: ptr(0)})
		require.NoError(b, err)
		subject = append(subject, time.Since(start))
		b.StopTimer()
		require.NoError(b, d.P.Delete(ctx, s.ID))
		baseline = append(baseline, bareSpawn(b, 0))
		contained = append(contained, bareSpawn(b, syscall.CLONE_NEWPID|syscall.CLONE_NEWNS))
		b.StartTimer()
	}
	reportVersus(b, subject, baseline)
	b.ReportMetric(float64(median(subject))/float64(median(contained)), "x-contained")
}

// bareSpawn starts the default snapshot's workload, sandplane-toolbox,
// directly (in the new namespaces cloneflags asks for) and waits until it
// accepts connections: the floor any control plane pays.
func bareSpawn(b *testing.B, cloneflags uintptr) time.Duration {
	addr := testdaemon.FreeAddr(b)
	_, port, _ := net.SplitHostPort(addr)
	start := time.Now()
	cmd := exec.Command(testdaemon.Toolbox(b))
	cmd.Env = append(os.Environ(), "PORT="+port, "SANDPLANE_SANDBOX_TOKEN=bench-token-0123456789abcdef")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: cloneflags}
	require.NoError(b, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return time.Since(start)
		}
		select {
		case err := <-exited:
			exited <- err
			b.Fatalf("the bare toolbox ended before it listened: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
}

// reportVersus reports medians of a figure and its baseline, and their ratio.
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

// BenchmarkIsolatedCreate measures what isolation costs a create: a create
// until started on a daemon with isolation: bwrap (the default where
// bubblewrap works) beside the same create on one with isolation: none,
// alternately in the same run. The difference is bubblewrap's namespaces and
// mounts, the forwarder in front of the workload's port, and the parked
// init that only unisolated creates find.
func BenchmarkIsolatedCreate(b *testing.B) {
	if err := native.New().ProbeIsolation(context.Background()); err != nil {
		b.Skipf("bubblewrap does not isolate here: %v", err)
	}
	isolated := testdaemon.Start(b, testdaemon.Options{Config: "isolation: bwrap\n"})
	open := testdaemon.Start(b, testdaemon.Options{Config: "isolation: none\n"})
	ctx := context.Background()
	create := func(d *testdaemon.Daemon) time.Duration {
		start := time.Now()
		s, err := d.P.Create(ctx, provider.CreateRequest{AutoStopInterval: ptr(0)})
		require.NoError(b, err)
		took := time.Since(start)
		require.NoError(b, d.P.Delete(ctx, s.ID))
		return took
	}
	// The figures are the medians; ns/op counts both creates and deletes.
	var subject, baseline []time.Duration
	for i := 0; i < b.N; i++ {
		subject = append(subject, create(isolated))
		baseline = append(baseline, create(open))
	}
	reportVersus(b, subject, baseline)
}
