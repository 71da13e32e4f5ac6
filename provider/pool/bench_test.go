package pool_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/daytona"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/pool"
	"github.com/sandplane/sandplane/simulator"
)

// Daytona's prices as measured: a running sandbox costs about $0.17 an
// hour, a stopped one $0.0009.
const (
	usdPerRunningHour = 0.17
	usdPerStoppedHour = 0.0009
	// agentSetup is what a cold agent turn pays on a fresh sandbox before it
	// does anything (clone, install, warm caches); a stopped sandbox keeps
	// it on disk.
	agentSetup = 12 * time.Second
)

// simOn runs the simulator with Daytona's latency profile and no workloads
// on clk, behind a daytona.Provider per key.
func simOn(b *testing.B, clk clock.Clock, drv *driver, keys ...string) (*simulator.Simulator, []*daytona.Provider) {
	b.Helper()
	sim, err := simulator.New(simulator.Config{Clock: clk, APIKeys: keys, Profile: simulator.DaytonaProfile(), Seed: 7})
	require.NoError(b, err)
	var h http.Handler = sim.Handler()
	var rt http.RoundTripper = http.DefaultTransport
	if drv != nil {
		h, rt = drv.server(h), drv
	}
	srv := httptest.NewServer(h)
	b.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	var out []*daytona.Provider
	for _, k := range keys {
		p, err := daytona.New(daytona.WithAPIKey(k), daytona.WithAPIURL(srv.URL+"/api"), daytona.WithClock(clk), daytona.WithHTTPClient(&http.Client{Transport: rt}))
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
	_, provs := simOn(b, clock.Real(), nil, "bench")
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

// traffic is a day of bursty conversations: a few sessions each, mostly in
// working hours, of several turns whose gaps are mostly short (the user
// answers at once) and sometimes long (the user went away).
type conversation struct {
	sessions [][]turn
	starts   []time.Duration // from midnight
}

type turn struct {
	gap  time.Duration // after the previous turn of the session ended
	work time.Duration
}

func dayOfTraffic(seed uint64, n int) []conversation {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	convs := make([]conversation, n)
	for i := range convs {
		sessions := 1 + rng.IntN(4)
		var starts []time.Duration
		for s := 0; s < sessions; s++ {
			if rng.Float64() < 0.85 {
				starts = append(starts, between(8*time.Hour, 19*time.Hour))
			} else {
				starts = append(starts, between(0, 22*time.Hour))
			}
		}
		sort.Slice(starts, func(a, b int) bool { return starts[a] < starts[b] })
		for range starts {
			turns := make([]turn, 2+rng.IntN(9))
			for t := range turns {
				turns[t].work = between(20*time.Second, 120*time.Second)
				switch r := rng.Float64(); {
				case r < 0.6:
					turns[t].gap = between(5*time.Second, 50*time.Second)
				case r < 0.9:
					turns[t].gap = between(50*time.Second, 5*time.Minute)
				default:
					turns[t].gap = between(5*time.Minute, 40*time.Minute)
				}
			}
			convs[i].sessions = append(convs[i].sessions, turns)
		}
		convs[i].starts = starts
	}
	return convs
}

// policy runs one turn on a sandbox and says how long the turn waited for
// it and whether it paid the agent's setup.
type policy struct {
	name string
	turn func(ctx context.Context, key string, work func()) (wait time.Duration, path pool.Path, ids []string, err error)
}

type dayResult struct {
	name                    string
	runningH, stoppedH, usd float64
	turns                   int
	paths                   map[pool.Path]int
	meanWait, p95Wait       time.Duration
}

// BenchmarkPoolDayDaytona plays the same day of bursty traffic under three
// policies at once, on one simulator (Daytona's latencies and billing) and
// one fake clock that jumps from event to event: no pool (create and delete
// per turn), park-to-stopped, and park-to-running for 60 s. It reports the
// sandbox-hours running and stopped, the cost at Daytona's prices, and how
// long turns waited for their sandbox (a fresh one's 12 s of agent setup
// included).
func BenchmarkPoolDayDaytona(b *testing.B) {
	var results []dayResult
	for b.Loop() {
		results = simulateDay(b, dayConversations())
	}
	b.Logf("a simulated day of %d turns in %d conversations, at $%.2f/h running and $%.4f/h stopped:", results[0].turns, dayConversations(), usdPerRunningHour, usdPerStoppedHour)
	b.Logf("  %-16s %10s %10s %8s %23s %10s %9s", "policy", "running h", "stopped h", "cost $", "turns cold/resumed/warm", "mean wait", "p95 wait")
	for _, r := range results {
		b.Logf("  %-16s %10.2f %10.2f %8.3f %23s %9.1fs %8.1fs", r.name, r.runningH, r.stoppedH, r.usd,
			fmt.Sprintf("%d/%d/%d", r.paths[pool.PathCreated], r.paths[pool.PathResumed], r.paths[pool.PathWarm]),
			r.meanWait.Seconds(), r.p95Wait.Seconds())
	}
	for _, r := range results {
		b.ReportMetric(r.usd, "usd/day-"+r.name)
		b.ReportMetric(r.meanWait.Seconds(), "wait-s/turn-"+r.name)
	}
}

func dayConversations() int {
	if n, err := strconv.Atoi(os.Getenv("POOL_DAY_CONVERSATIONS")); err == nil && n > 0 {
		return n
	}
	return 40
}

func simulateDay(b *testing.B, conversations int) []dayResult {
	midnight := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	end := midnight.Add(24 * time.Hour)
	clk := clocktest.NewFake(midnight)
	drv := newDriver(clk, &http.Transport{MaxIdleConnsPerHost: 256})
	sim, provs := simOn(b, clk, drv, "no-pool", "park-to-stopped", "park-to-running")
	ctx := context.Background()
	mkPool := func(p provider.Provider, name string, keepWarm time.Duration) *pool.Pool {
		// A warm cap that never binds: the policies, not the cap, are compared.
		pl, err := pool.New(ctx, p, pool.WithClock(clk), pool.WithName(name), pool.WithKeepWarm(keepWarm),
			pool.WithWarmCap(10*conversations))
		require.NoError(b, err)
		return pl
	}
	stopped := mkPool(provs[1], "park-to-stopped", 0)
	running := mkPool(provs[2], "park-to-running", pool.DefaultKeepWarm)
	policies := []policy{
		{"no-pool", noPool(clk, provs[0])},
		{"park-to-stopped", pooled(clk, stopped)},
		{"park-to-running", pooled(clk, running)},
	}
	traffic := dayOfTraffic(42, conversations)

	type sample struct {
		wait time.Duration
		path pool.Path
	}
	var mu sync.Mutex
	samples := map[string][]sample{}
	owner := map[string]string{} // sandbox id: policy
	var wg sync.WaitGroup
	for _, pol := range policies {
		for i, conv := range traffic {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("conv-%d", i)
				for s, turns := range conv.sessions {
					if err := clock.Sleep(ctx, clk, midnight.Add(conv.starts[s]).Sub(clk.Now())); err != nil {
						return
					}
					for t, tn := range turns {
						if t > 0 {
							_ = clock.Sleep(ctx, clk, tn.gap)
						}
						wait, path, ids, err := pol.turn(ctx, key, func() { _ = clock.Sleep(ctx, clk, tn.work) })
						if err != nil {
							b.Errorf("%s %s: %v", pol.name, key, err)
							return
						}
						mu.Lock()
						samples[pol.name] = append(samples[pol.name], sample{wait, path})
						for _, id := range ids {
							owner[id] = pol.name
						}
						mu.Unlock()
					}
				}
			}()
		}
	}
	drv.runUntil(end)
	wg.Wait()
	cost := sim.Cost(simulator.Prices{})
	drv.during(func() {
		_ = stopped.Shutdown(ctx)
		_ = running.Shutdown(ctx)
	})

	var out []dayResult
	for _, pol := range policies {
		r := dayResult{name: pol.name, paths: map[pool.Path]int{}}
		var waits []time.Duration
		var total time.Duration
		for _, s := range samples[pol.name] {
			r.turns++
			r.paths[s.path]++
			waits = append(waits, s.wait)
			total += s.wait
		}
		sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
		if len(waits) > 0 {
			r.meanWait = total / time.Duration(len(waits))
			r.p95Wait = waits[len(waits)*95/100]
		}
		for _, sc := range cost.Sandboxes {
			if owner[sc.ID] == pol.name {
				r.runningH += sc.RunningSeconds / 3600
				r.stoppedH += sc.StoppedSeconds / 3600
			}
		}
		r.usd = r.runningH*usdPerRunningHour + r.stoppedH*usdPerStoppedHour
		out = append(out, r)
	}
	for _, sc := range cost.Sandboxes {
		require.NotEmpty(b, owner[sc.ID], "sandbox %s belongs to no policy", sc.ID)
	}
	return out
}

// noPool makes a sandbox per turn and deletes it afterwards.
func noPool(clk clock.Clock, p provider.Provider) func(context.Context, string, func()) (time.Duration, pool.Path, []string, error) {
	return func(ctx context.Context, _ string, work func()) (time.Duration, pool.Path, []string, error) {
		t0 := clk.Now()
		sb, err := p.Create(ctx, provider.CreateRequest{})
		if err != nil {
			return 0, "", nil, err
		}
		_ = clock.Sleep(ctx, clk, agentSetup)
		wait := clk.Since(t0)
		work()
		return wait, pool.PathCreated, []string{sb.ID}, p.Delete(ctx, sb.ID)
	}
}

// pooled takes the key's sandbox from the pool; a fresh one pays the
// agent's setup.
func pooled(clk clock.Clock, pl *pool.Pool) func(context.Context, string, func()) (time.Duration, pool.Path, []string, error) {
	return func(ctx context.Context, key string, work func()) (time.Duration, pool.Path, []string, error) {
		t0 := clk.Now()
		l, err := pl.Acquire(ctx, key, pool.Spec{})
		if err != nil {
			return 0, "", nil, err
		}
		if l.Path == pool.PathCreated {
			_ = clock.Sleep(ctx, clk, agentSetup)
		}
		wait := clk.Since(t0)
		work()
		return wait, l.Path, []string{l.Sandbox.ID}, pl.Release(ctx, l, pool.OutcomeOK)
	}
}
