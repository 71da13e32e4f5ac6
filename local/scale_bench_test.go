package local_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
)

// tinyConfig is a workload that costs next to nothing, counted as started
// once spawned: what a scale figure needs many of.
const tinyConfig = `
snapshots:
  tiny:
    command: [sleep, "100000"]
    ready: none
`

// BenchmarkListSandboxes measures GET /v1/sandboxes against a daemon holding
// 10, 100 and 1,000 running native sandboxes, beside a bare net/http handler
// serving the very same body over the same loopback from a process of its
// own, as the daemon serves from its own, request by request alternately.
// The same handler in the benchmark's own process is reported too
// (x-in-process): it pays no switch between two processes, which no server
// of other processes' requests escapes, so it is not the floor. At 1,000 it
// also reports the daemon's OS threads beside those it had with no sandbox.
func BenchmarkListSandboxes(b *testing.B) {
	d := testdaemon.Start(b, testdaemon.Options{Config: tinyConfig, Ports: 1100})
	idle := daemonThreads(b, d)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	have := 0
	for _, n := range []int{10, 100, 1000} {
		createTiny(b, d, n-have)
		have = n
		b.Run("sandboxes="+strconv.Itoa(n), func(b *testing.B) {
			url := d.URL + "/v1/sandboxes"
			body := get(b, client, url)
			require.Equal(b, n, strings.Count(string(body), `"snapshot":"tiny"`), "the list holds every sandbox")
			bare := testdaemon.ServeBare(b, body) + "/v1/sandboxes"
			inProcess := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
			}))
			defer inProcess.Close()
			const perIter = 20
			var subject, baseline, local []time.Duration
			for b.Loop() {
				for range perIter {
					subject = append(subject, timeGet(b, client, url))
					baseline = append(baseline, timeGet(b, client, bare))
					local = append(local, timeGet(b, client, inProcess.URL+"/v1/sandboxes"))
				}
			}
			reportVersus(b, subject, baseline)
			b.ReportMetric(float64(median(subject))/float64(median(local)), "x-in-process")
			if n == 1000 {
				b.ReportMetric(float64(daemonThreads(b, d)), "threads")
				b.ReportMetric(float64(idle), "threads-idle")
			}
		})
	}
}

// createTiny creates n tiny sandboxes, a few at a time.
func createTiny(b *testing.B, d *testdaemon.Daemon, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	limit := make(chan struct{}, 8)
	for range n {
		wg.Add(1)
		limit <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-limit }()
			_, err := d.P.Create(context.Background(), provider.CreateRequest{Snapshot: "tiny", AutoStopInterval: ptr(0)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}

func timeGet(b *testing.B, c *http.Client, url string) time.Duration {
	start := time.Now()
	get(b, c, url)
	return time.Since(start)
}

func get(b *testing.B, c *http.Client, url string) []byte {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return body
}

// daemonThreads is how many OS threads the daemon process runs.
func daemonThreads(b *testing.B, d *testdaemon.Daemon) int {
	b.Helper()
	info, err := d.P.Info(context.Background())
	require.NoError(b, err)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", info.PID))
	require.NoError(b, err)
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(b, err)
			return n
		}
	}
	b.Fatal("no Threads line in the daemon's status")
	return 0
}
