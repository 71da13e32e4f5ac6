package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/pool"
	"github.com/sandplane/sandplane/provider/pool/poolmetrics"
)

// These tests run the pool on real providers: the local daemon (a real
// `sandplane serve` with native workloads) and the Daytona simulator behind
// daytona.Provider (with real toolbox processes). Every sandbox is a real
// process whose files the turns read and write.

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// world is a provider under test and what the scenarios need to know of it.
type world struct {
	prov   provider.Provider
	minute time.Duration
	// events records the stopped events of a pool's sandboxes, on providers
	// that stream them; nil otherwise.
	events func(t *testing.T, poolName string) *eventLog
}

// rig is one pool on a world, with its metrics and log.
type rig struct {
	t    *testing.T
	w    world
	name string
	p    *pool.Pool
	reg  *prometheus.Registry
	ev   *eventLog
	ctx  context.Context
}

var rigSeq atomic.Int64

func newRig(t *testing.T, w world, opts ...pool.Option) *rig {
	t.Helper()
	name := fmt.Sprintf("it-%d-%d", os.Getpid(), rigSeq.Add(1))
	reg := prometheus.NewRegistry()
	base := []pool.Option{
		pool.WithName(name), poolmetrics.WithRegisterer(reg), pool.WithMinute(w.minute),
		pool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		pool.WithKeepWarm(time.Second), pool.WithStopTimeout(20 * time.Second),
		pool.WithPollInterval(50 * time.Millisecond), pool.WithBusyWait(30 * time.Second),
	}
	p, err := pool.New(context.Background(), w.prov, append(base, opts...)...)
	require.NoError(t, err)
	r := &rig{t: t, w: w, name: name, p: p, reg: reg, ctx: context.Background()}
	if w.events != nil {
		r.ev = w.events(t, name)
	}
	t.Cleanup(func() { r.cleanup() })
	return r
}

var spec = pool.Spec{Env: map[string]string{"TURN_TOKEN": "it-secret-1"}, Labels: map[string]string{"suite": "pool"}}

func (r *rig) acquire(key string, s pool.Spec) *pool.Lease {
	r.t.Helper()
	l, err := r.p.Acquire(r.ctx, key, s)
	require.NoError(r.t, err)
	require.Equal(r.t, provider.StateStarted, l.Sandbox.State)
	return l
}

func (r *rig) release(l *pool.Lease, o pool.Outcome) {
	r.t.Helper()
	require.NoError(r.t, r.p.Release(r.ctx, l, o))
}

// mine lists the pool's sandboxes as the provider sees them.
func (r *rig) mine() []provider.Sandbox {
	r.t.Helper()
	list, err := r.w.prov.List(r.ctx, provider.ListOptions{Labels: map[string]string{pool.LabelPool: r.name}})
	require.NoError(r.t, err)
	var out []provider.Sandbox
	for _, sb := range list {
		if sb.State != provider.StateDestroyed {
			out = append(out, sb)
		}
	}
	return out
}

func (r *rig) state(id string) provider.State {
	sb, err := r.w.prov.Get(r.ctx, id)
	if provider.IsNotFound(err) {
		return ""
	}
	require.NoError(r.t, err)
	return sb.State
}

func (r *rig) eventuallyState(id string, want provider.State, msg string) {
	r.t.Helper()
	require.Eventually(r.t, func() bool { return r.state(id) == want }, 30*time.Second, 20*time.Millisecond, "%s: %s never became %q", msg, id, want)
}

// teardowns reads the pool's counter for reason from its registry.
func (r *rig) teardowns(reason pool.Reason) float64 {
	return r.metric("sandplane_pool_teardowns_total", "reason", string(reason))
}

func (r *rig) metric(name, label, value string) float64 {
	mfs, err := r.reg.Gather()
	require.NoError(r.t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabel(m, label, value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// cleanup shuts the pool down and checks that nothing of it runs and that
// every sandbox left is one the pool parked and would find again (on a
// provider that deletes on its own); then it deletes those.
func (r *rig) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	assert.NoError(r.t, r.p.Shutdown(ctx))
	left := r.mine()
	_, autoDeletes := r.w.prov.(provider.AutoDeleter)
	for _, sb := range left {
		assert.NotEqual(r.t, provider.StateStarted, sb.State, "sandbox %s still runs after shutdown", sb.ID)
		assert.True(r.t, autoDeletes, "sandbox %s (%s) outlived the pool on a provider that would never delete it: leaked", sb.ID, sb.State)
		_ = r.w.prov.Delete(ctx, sb.ID)
	}
}

// exec runs a shell command in the sandbox through its toolbox, the way an
// agent's turn would.
func (r *rig) exec(id, command string) string {
	r.t.Helper()
	tb, ok := r.w.prov.(provider.Toolboxer)
	require.True(r.t, ok, "the provider runs no toolbox")
	base, header, err := tb.Toolbox(r.ctx, id)
	require.NoError(r.t, err)
	body, _ := json.Marshal(map[string]string{"command": command})
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, base+"/process/execute", bytes.NewReader(body))
	require.NoError(r.t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(r.t, http.StatusOK, resp.StatusCode, string(b))
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	require.NoError(r.t, json.Unmarshal(b, &out))
	require.Zero(r.t, out.ExitCode, out.Result)
	return strings.TrimSpace(out.Result)
}

// maxRunning samples the pool's running sandboxes until stop is closed and
// reports the most it saw at once.
func (r *rig) maxRunning(stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		most := 0
		for {
			list, err := r.w.prov.List(context.Background(), provider.ListOptions{Labels: map[string]string{pool.LabelPool: r.name}})
			if err == nil {
				n := 0
				for _, sb := range list {
					if sb.State == provider.StateStarted || sb.State == provider.StateStarting {
						n++
					}
				}
				most = max(most, n)
			}
			select {
			case <-stop:
				out <- most
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return out
}

// eventLog collects the stopped events of one pool's sandboxes.
type eventLog struct {
	mu      sync.Mutex
	stopped map[string][]string // sandbox id: errorReasons, in order
}

func watchEvents(t *testing.T, w provider.Watcher, poolName string) *eventLog {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := w.Watch(ctx, provider.WatchOptions{Labels: map[string]string{pool.LabelPool: poolName}})
	require.NoError(t, err)
	l := &eventLog{stopped: map[string][]string{}}
	go func() {
		for ev := range ch {
			if ev.Type == provider.EventStopped && ev.Sandbox != nil {
				l.mu.Lock()
				l.stopped[ev.Sandbox.ID] = append(l.stopped[ev.Sandbox.ID], ev.Sandbox.ErrorReason)
				l.mu.Unlock()
			}
		}
	}()
	return l
}

func (l *eventLog) reasons(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.stopped[id]...)
}

// expectStopEvent checks, on providers with events, that the sandbox's
// stopped event says why.
func (r *rig) expectStopEvent(id, reason string) {
	r.t.Helper()
	if r.ev == nil {
		return
	}
	require.Eventually(r.t, func() bool {
		for _, got := range r.ev.reasons(id) {
			if got == reason {
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "no stopped event of %s with reason %q (got %v)", id, reason, r.ev.reasons(id))
}

// scenarios run on every world.
func scenarios(t *testing.T, w world) {
	t.Run("a conversation warm, stopped, resumed, its files kept", func(t *testing.T) {
		r := newRig(t, w)
		first := r.acquire("conv", spec)
		assert.Equal(t, pool.PathCreated, first.Path)
		id := first.Sandbox.ID
		r.exec(id, "echo turn-one > pool-marker")
		r.release(first, pool.OutcomeOK)

		warm := r.acquire("conv", spec)
		assert.Equal(t, pool.PathWarm, warm.Path)
		assert.Equal(t, id, warm.Sandbox.ID)
		assert.Equal(t, "turn-one", r.exec(id, "cat pool-marker"))
		r.release(warm, pool.OutcomeOK)

		r.eventuallyState(id, provider.StateStopped, "the keep-warm TTL")
		r.expectStopEvent(id, "pool: ttl_expired")
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonTTLExpired))

		resumed := r.acquire("conv", spec)
		assert.Equal(t, pool.PathResumed, resumed.Path)
		assert.Equal(t, id, resumed.Sandbox.ID)
		assert.Equal(t, "turn-one", r.exec(id, "cat pool-marker"), "a stop keeps the sandbox's files")
		r.release(resumed, pool.OutcomeOK)
	})

	t.Run("an incompatible spec is torn down", func(t *testing.T) {
		r := newRig(t, w)
		l := r.acquire("conv", spec)
		r.release(l, pool.OutcomeOK)
		rotated := spec
		rotated.Env = map[string]string{"TURN_TOKEN": "it-secret-2"}
		next := r.acquire("conv", rotated)
		assert.Equal(t, pool.PathCreated, next.Path)
		r.eventuallyState(l.Sandbox.ID, "", "the incompatible sandbox is deleted")
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonIncompatible))
		r.release(next, pool.OutcomeOK)
	})

	t.Run("a failed turn's sandbox is deleted", func(t *testing.T) {
		r := newRig(t, w)
		l := r.acquire("conv", spec)
		r.release(l, pool.OutcomeFailed)
		r.expectStopEvent(l.Sandbox.ID, "pool: turn_failed")
		r.eventuallyState(l.Sandbox.ID, "", "deleted")
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonTurnFailed))
	})

	t.Run("eviction keeps the warm cap", func(t *testing.T) {
		r := newRig(t, w, pool.WithWarmCap(1), pool.WithKeepWarm(time.Minute))
		stop := make(chan struct{})
		most := r.maxRunning(stop)
		a, b := r.acquire("a", spec), r.acquire("b", spec) // never capped: both run
		r.release(a, pool.OutcomeOK)
		r.release(b, pool.OutcomeOK) // the warm cap is full: a, the least recently parked, is evicted
		assert.Equal(t, provider.StateStopped, r.state(a.Sandbox.ID), "evicted: stopped, not deleted")
		assert.Equal(t, provider.StateStarted, r.state(b.Sandbox.ID), "the finishing turn parks running")
		r.expectStopEvent(a.Sandbox.ID, "pool: evicted")
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonEvicted))
		again := r.acquire("a", spec)
		assert.Equal(t, pool.PathResumed, again.Path)
		r.release(again, pool.OutcomeOK)
		close(stop)
		assert.Equal(t, 2, <-most, "two turns in flight at once, never more warm than the cap after")
	})

	t.Run("two turns on one key share its sandbox", func(t *testing.T) {
		r := newRig(t, w)
		var wg sync.WaitGroup
		ids := make(chan string, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := r.p.Acquire(r.ctx, "conv", spec)
				if !assert.NoError(t, err) {
					return
				}
				ids <- l.Sandbox.ID
				assert.NoError(t, r.p.Release(r.ctx, l, pool.OutcomeOK))
			}()
		}
		wg.Wait()
		close(ids)
		seen := map[string]bool{}
		for id := range ids {
			seen[id] = true
		}
		assert.Len(t, seen, 1)
		assert.Len(t, r.mine(), 1, "one sandbox was made")
	})

	t.Run("a cancelled turn sent again finds its sandbox", func(t *testing.T) {
		r := newRig(t, w, pool.WithKeepWarm(time.Minute))
		ctx, cancel := context.WithCancel(r.ctx)
		cancel() // cancelled before the create could answer
		_, err := r.p.Acquire(ctx, "conv", spec)
		require.Error(t, err)
		l := r.acquire("conv", spec)
		assert.Len(t, r.mine(), 1, "nothing was made twice")
		r.release(l, pool.OutcomeOK)

		ctx, cancel = context.WithCancel(r.ctx)
		// The cancel lands wherever the acquire is by then: each outcome
		// is accepted below, the assertion is what it leaves.
		go func() { time.Sleep(5 * time.Millisecond); cancel() }() // any landing point is accepted
		if l2, err := r.p.Acquire(ctx, "other", spec); err == nil {
			r.release(l2, pool.OutcomeOK)
		}
		l3 := r.acquire("other", spec)
		assert.Contains(t, []pool.Path{pool.PathWarm, pool.PathCreated}, l3.Path)
		r.release(l3, pool.OutcomeOK)
		assert.Len(t, r.mine(), 2, "one sandbox per key, whatever the cancel hit")
	})

	t.Run("a sandbox lost behind the pool's back is replaced", func(t *testing.T) {
		r := newRig(t, w)
		l := r.acquire("conv", spec)
		r.release(l, pool.OutcomeOK)
		require.NoError(t, w.prov.Delete(r.ctx, l.Sandbox.ID))
		next := r.acquire("conv", spec)
		assert.Equal(t, pool.PathCreated, next.Path)
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonProviderLost))
		r.release(next, pool.OutcomeOK)
	})

	t.Run("shutdown deletes what is in flight and stops what idles", func(t *testing.T) {
		r := newRig(t, w, pool.WithKeepWarm(time.Minute))
		busy := r.acquire("busy", spec)
		idle := r.acquire("idle", spec)
		r.release(idle, pool.OutcomeOK)
		ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
		defer cancel()
		require.NoError(t, r.p.Shutdown(ctx))
		assert.Empty(t, r.state(busy.Sandbox.ID), "in flight: deleted")
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonShutdownInFlight))
		assert.NotEqual(t, provider.StateStarted, r.state(idle.Sandbox.ID), "idle: stopped")
		assert.Equal(t, 1.0, r.teardowns(pool.ReasonShutdownIdle))
		r.expectStopEvent(idle.Sandbox.ID, "pool: shutdown_idle")
	})
}
