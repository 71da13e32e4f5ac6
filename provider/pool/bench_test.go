package pool_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/daytona"
	"github.com/sandplane/sandplane/internal/poolsim"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/pool"
	"github.com/sandplane/sandplane/simulator"
)

// simOn runs the simulator with Daytona's latency profile and no workloads
// on clk, behind a daytona.Provider per key.
func simOn(b *testing.B, clk clock.Clock, keys ...string) (*simulator.Simulator, []*daytona.Provider) {
	b.Helper()
	sim, err := simulator.New(simulator.Config{Clock: clk, APIKeys: keys, Profile: simulator.DaytonaProfile(), Seed: 7})
	require.NoError(b, err)
	srv := httptest.NewServer(sim.Handler())
	b.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	var out []*daytona.Provider
	for _, k := range keys {
		p, err := daytona.New(daytona.WithAPIKey(k), daytona.WithAPIURL(srv.URL+"/api"), daytona.WithClock(clk), daytona.WithHTTPClient(&http.Client{}))
		require.NoError(b, err)
		out = append(out, p)
	}
	return sim, out
}

// BenchmarkPoolAcquireDaytona measures, on the wall clock, what an Acquire
// costs on each path against the simulator with Daytona's measured
// latencies: a cold create, a resume of a stopped sandbox, a warm claim.
// Each sub-benchmark reports its path beside the cold create of the same
// iteration.
func BenchmarkPoolAcquireDaytona(b *testing.B) {
	_, provs := simOn(b, clock.Real(), "bench")
	prov := provs[0]
	measure := func(b *testing.B, keepWarm time.Duration, want pool.Path) (cold, path time.Duration) {
		p, err := pool.New(context.Background(), prov, pool.WithKeepWarm(keepWarm), pool.WithPollInterval(50*time.Millisecond),
			pool.WithName(fmt.Sprintf("bench-%s", want)))
		require.NoError(b, err)
		defer func() { _ = p.Shutdown(context.Background()) }()
		ctx := context.Background()
		n := 0
		for b.Loop() {
			key := fmt.Sprintf("conv-%d", n)
			n++
			t0 := time.Now()
			first, err := p.Acquire(ctx, key, pool.Spec{})
			require.NoError(b, err)
			cold += time.Since(t0)
			require.Equal(b, pool.PathCreated, first.Path)
			require.NoError(b, p.Release(ctx, first, pool.OutcomeOK))
			t1 := time.Now()
			next, err := p.Acquire(ctx, key, pool.Spec{})
			require.NoError(b, err)
			path += time.Since(t1)
			require.Equal(b, want, next.Path)
			require.NoError(b, p.Release(ctx, next, pool.OutcomeDiscard))
		}
		return cold / time.Duration(n), path / time.Duration(n)
	}
	report := func(b *testing.B, cold, path time.Duration, name string) {
		b.ReportMetric(ms(path), "ms/op-subject")
		b.ReportMetric(ms(cold), "ms/op-baseline")
		b.ReportMetric(float64(path)/float64(cold), "x-baseline")
		b.Logf("acquire on the simulator (daytona profile): cold %.0f ms, %s %.1f ms", ms(cold), name, ms(path))
	}
	var coldR, resumed, coldW, warm time.Duration
	b.Run("resumed-vs-cold", func(b *testing.B) {
		coldR, resumed = measure(b, 0, pool.PathResumed)
		report(b, coldR, resumed, "resumed")
	})
	b.Run("warm-vs-cold", func(b *testing.B) {
		coldW, warm = measure(b, time.Hour, pool.PathWarm)
		report(b, coldW, warm, "warm")
	})
	if coldR > 0 && coldW > 0 {
		cold := (coldR + coldW) / 2
		// A parent of sub-benchmarks prints no log of its own.
		fmt.Printf("pool acquire on the simulator, daytona profile: cold %.0f ms | resumed %.0f ms (%.2fx) | warm %.1f ms (%.4fx)\n",
			ms(cold), ms(resumed), float64(resumed)/float64(cold), ms(warm), float64(warm)/float64(cold))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkPoolDayDaytona plays a day of bursty traffic under three
// policies at once (no pool, park-to-stopped, park-to-running) on the
// simulator's Daytona latencies and billing, on a fake clock, each turn
// paying the stages of its path (internal/poolsim), and prints the table
// the README shows, each policy beside no pool as a ratio.
func BenchmarkPoolDayDaytona(b *testing.B) {
	o := poolsim.Options{Conversations: dayConversations()}
	var results []poolsim.Result
	for b.Loop() {
		var err error
		results, err = poolsim.Run(context.Background(), o)
		require.NoError(b, err)
	}
	var table strings.Builder
	require.NoError(b, poolsim.WriteStages(&table, poolsim.DefaultStages()))
	require.NoError(b, poolsim.WriteTable(&table, results))
	b.Logf("a simulated day of %d turns in %d conversations, at $%.2f/h running and $%.4f/h stopped:\n%s",
		results[0].Turns, o.Conversations, poolsim.USDPerRunningHour, poolsim.USDPerStoppedHour, table.String())
	// Each pooled policy beside no pool, the baseline of the same run.
	base := results[0]
	for _, r := range results[1:] {
		b.ReportMetric(r.USD, "usd/day:"+r.Policy+"-subject")
		b.ReportMetric(base.USD, "usd/day:"+r.Policy+"-baseline")
		b.ReportMetric(r.MeanWait.Seconds(), "wait-s/turn:"+r.Policy+"-subject")
		b.ReportMetric(base.MeanWait.Seconds(), "wait-s/turn:"+r.Policy+"-baseline")
	}
}

func dayConversations() int {
	if n, err := strconv.Atoi(os.Getenv("POOL_DAY_CONVERSATIONS")); err == nil && n > 0 {
		return n
	}
	return 40
}
