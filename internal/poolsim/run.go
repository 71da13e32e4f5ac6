package poolsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"time"

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
	USDPerRunningHour = 0.17
	USDPerStoppedHour = 0.0009
)

// Options is one run of the model. The zero value of a field takes its
// default.
type Options struct {
	Stages Stages // DefaultStages() when zero
	// Traffic is the day; DayOfTraffic(Seed, Conversations) when nil.
	Traffic       []Conversation
	Conversations int    // 40
	Seed          uint64 // 42
	// KeepWarm is the park-to-running policy's window (pool.DefaultKeepWarm).
	KeepWarm time.Duration
	// Prices per sandbox-hour; Daytona's when zero.
	RunningUSDPerHour, StoppedUSDPerHour float64
}

// WithDefaults is o with every zero field at its default: the options Run
// uses.
func (o Options) WithDefaults() Options {
	if o.Stages == (Stages{}) {
		o.Stages = DefaultStages()
	}
	if o.Conversations <= 0 {
		o.Conversations = 40
	}
	if o.Seed == 0 {
		o.Seed = 42
	}
	if o.Traffic == nil {
		o.Traffic = DayOfTraffic(o.Seed, o.Conversations)
	}
	if o.KeepWarm <= 0 {
		o.KeepWarm = pool.DefaultKeepWarm
	}
	if o.RunningUSDPerHour == 0 && o.StoppedUSDPerHour == 0 {
		o.RunningUSDPerHour, o.StoppedUSDPerHour = USDPerRunningHour, USDPerStoppedHour
	}
	return o
}

// Result is one policy's day.
type Result struct {
	Policy             string
	RunningH, StoppedH float64
	USD                float64
	Turns              int
	Paths              map[pool.Path]int
	MeanWait, P95Wait  time.Duration
}

// policy runs one turn and says how long it waited for a ready sandbox,
// by which path, and which sandboxes it used.
type policy struct {
	name string
	turn func(ctx context.Context, key string, rng *rand.Rand, work func()) (time.Duration, pool.Path, []string, error)
}

type sample struct {
	wait time.Duration
	path pool.Path
}

// Run plays o's day under no pool, park-to-stopped and park-to-running, at
// once on one simulator and one fake clock, and returns a Result per
// policy in that order.
func Run(ctx context.Context, o Options) ([]Result, error) {
	o = o.WithDefaults()
	midnight := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	clk := clocktest.NewFake(midnight)
	drv := newDriver(clk, &http.Transport{MaxIdleConnsPerHost: 256})
	sim, provs, closeSim, err := simOn(clk, drv, o, "no-pool", "park-to-stopped", "park-to-running")
	if err != nil {
		return nil, err
	}
	defer closeSim()
	stopped, err := newPool(ctx, clk, provs[1], "park-to-stopped", 0, len(o.Traffic))
	if err != nil {
		return nil, err
	}
	running, err := newPool(ctx, clk, provs[2], "park-to-running", o.KeepWarm, len(o.Traffic))
	if err != nil {
		return nil, err
	}
	policies := []policy{
		{"no pool", noPool(clk, provs[0], o.Stages)},
		{"park-to-stopped", pooled(clk, stopped, o.Stages)},
		{"park-to-running", pooled(clk, running, o.Stages)},
	}
	samples, owner, err := play(ctx, clk, drv, midnight, o, policies)
	cost := sim.Cost(simulator.Prices{})
	drv.during(func() {
		// Even an interrupted run shuts its pools down.
		shut := context.WithoutCancel(ctx)
		err = errors.Join(err, stopped.Shutdown(shut), running.Shutdown(shut))
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	return tally(policies, samples, owner, cost, o)
}

// simOn runs the simulator with Daytona's latency profile (create and
// start as o's stages say) and no workloads on clk, behind a
// daytona.Provider per key.
func simOn(clk clock.Clock, drv *driver, o Options, keys ...string) (*simulator.Simulator, []*daytona.Provider, func(), error) {
	profile := simulator.DaytonaProfile()
	profile.Create = simulator.Range{Min: o.Stages.Create.Min, Max: o.Stages.Create.Max}
	profile.Start = simulator.Range{Min: o.Stages.Start.Min, Max: o.Stages.Start.Max}
	sim, err := simulator.New(simulator.Config{Clock: clk, APIKeys: keys, Profile: profile, Seed: o.Seed,
		CostHistory: len(keys)*turns(o.Traffic) + 100})
	if err != nil {
		return nil, nil, nil, err
	}
	srv := httptest.NewServer(drv.server(sim.Handler()))
	closeSim := func() {
		srv.Close()
		_ = sim.Close()
	}
	var out []*daytona.Provider
	for _, k := range keys {
		p, err := daytona.New(daytona.WithAPIKey(k), daytona.WithAPIURL(srv.URL+"/api"), daytona.WithClock(clk), daytona.WithHTTPClient(&http.Client{Transport: drv}))
		if err != nil {
			closeSim()
			return nil, nil, nil, err
		}
		out = append(out, p)
	}
	return sim, out, closeSim, nil
}

// newPool is a pool whose warm cap never binds: the policies, not the
// cap, are compared.
func newPool(ctx context.Context, clk clock.Clock, p provider.Provider, name string, keepWarm time.Duration, conversations int) (*pool.Pool, error) {
	return pool.New(ctx, p, pool.WithClock(clk), pool.WithName(name), pool.WithEnv(nil),
		pool.WithKeepWarm(keepWarm), pool.WithWarmCap(10*conversations+1))
}

// play runs every conversation under every policy, each in a goroutine
// that sleeps on clk, while the driver moves clk to the day's end.
func play(ctx context.Context, clk clock.Clock, drv *driver, midnight time.Time, o Options, policies []policy) (map[string][]sample, map[string]string, error) {
	var mu sync.Mutex
	samples := map[string][]sample{}
	owner := map[string]string{} // sandbox id: policy
	var errs []error
	var wg sync.WaitGroup
	for _, pol := range policies {
		for i, conv := range o.Traffic {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("conv-%d", i)
				// The same draws for each policy: only the paths differ.
				rng := rand.New(rand.NewPCG(o.Seed, uint64(i)))
				for _, sess := range conv.Sessions {
					if err := clock.Sleep(ctx, clk, midnight.Add(time.Duration(sess.Start)).Sub(clk.Now())); err != nil {
						return
					}
					for t, tn := range sess.Turns {
						if t > 0 {
							_ = clock.Sleep(ctx, clk, time.Duration(tn.Gap))
						}
						wait, path, ids, err := pol.turn(ctx, key, rng, func() { _ = clock.Sleep(ctx, clk, time.Duration(tn.Work)) })
						mu.Lock()
						if err != nil {
							errs = append(errs, fmt.Errorf("%s %s: %w", pol.name, key, err))
							mu.Unlock()
							return
						}
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
	drv.runUntil(ctx, midnight.Add(24*time.Hour))
	wg.Wait()
	return samples, owner, errors.Join(errs...)
}

// payHostSide sleeps through the host-side stages of path.
func payHostSide(ctx context.Context, clk clock.Clock, st Stages, path pool.Path, rng *rand.Rand) {
	var d time.Duration
	for _, r := range st.hostSide(path) {
		d += r.draw(rng)
	}
	_ = clock.Sleep(ctx, clk, d)
}

// noPool makes a sandbox per turn and deletes it afterwards.
func noPool(clk clock.Clock, p provider.Provider, st Stages) func(context.Context, string, *rand.Rand, func()) (time.Duration, pool.Path, []string, error) {
	return func(ctx context.Context, _ string, rng *rand.Rand, work func()) (time.Duration, pool.Path, []string, error) {
		t0 := clk.Now()
		sb, err := p.Create(ctx, provider.CreateRequest{})
		if err != nil {
			return 0, "", nil, err
		}
		payHostSide(ctx, clk, st, pool.PathCreated, rng)
		wait := clk.Since(t0)
		work()
		return wait, pool.PathCreated, []string{sb.ID}, p.Delete(ctx, sb.ID)
	}
}

// pooled takes the key's sandbox from the pool.
func pooled(clk clock.Clock, pl *pool.Pool, st Stages) func(context.Context, string, *rand.Rand, func()) (time.Duration, pool.Path, []string, error) {
	return func(ctx context.Context, key string, rng *rand.Rand, work func()) (time.Duration, pool.Path, []string, error) {
		t0 := clk.Now()
		l, err := pl.Acquire(ctx, key, pool.Spec{})
		if err != nil {
			return 0, "", nil, err
		}
		payHostSide(ctx, clk, st, l.Path, rng)
		wait := clk.Since(t0)
		work()
		return wait, l.Path, []string{l.Sandbox.ID}, pl.Release(ctx, l, pool.OutcomeOK)
	}
}

// tally sums each policy's waits and its sandboxes' hours.
func tally(policies []policy, samples map[string][]sample, owner map[string]string, cost simulator.CostReport, o Options) ([]Result, error) {
	var out []Result
	for _, pol := range policies {
		r := Result{Policy: pol.name, Paths: map[pool.Path]int{}}
		var waits []time.Duration
		var total time.Duration
		for _, s := range samples[pol.name] {
			r.Turns++
			r.Paths[s.path]++
			waits = append(waits, s.wait)
			total += s.wait
		}
		sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
		if len(waits) > 0 {
			r.MeanWait = total / time.Duration(len(waits))
			r.P95Wait = waits[len(waits)*95/100]
		}
		for _, sc := range cost.Sandboxes {
			if owner[sc.ID] == pol.name {
				r.RunningH += sc.RunningSeconds / 3600
				r.StoppedH += sc.StoppedSeconds / 3600
			}
		}
		r.USD = r.RunningH*o.RunningUSDPerHour + r.StoppedH*o.StoppedUSDPerHour
		out = append(out, r)
	}
	for _, sc := range cost.Sandboxes {
		if owner[sc.ID] == "" {
			return out, fmt.Errorf("sandbox %s belongs to no policy", sc.ID)
		}
	}
	return out, nil
}
