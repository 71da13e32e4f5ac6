package pool

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/provider/pool/pooltest"
)

// secretValue is an env value no log, record or error may show.
const secretValue = "s3cr3t-env-value-42"

var testSpec = Spec{
	Snapshot: "default",
	Env:      map[string]string{"API_TOKEN": secretValue},
	Labels:   map[string]string{"app": "agent"},
}

// harness is a pool on a fake clock and a fake provider, logging into a
// buffer that the cleanup checks for secrets.
type harness struct {
	t    *testing.T
	ctx  context.Context
	clk  *clocktest.Fake
	f    *pooltest.Fake
	p    *Pool
	obs  *counter
	logs *syncBuffer
}

// counter is an Observer that counts the pool's events.
type counter struct {
	mu        sync.Mutex
	acquires  map[Path]int
	teardowns map[Reason]int
	evicted   int
	hungStops int
}

func newCounter() *counter {
	return &counter{acquires: map[Path]int{}, teardowns: map[Reason]int{}}
}

func (c *counter) count(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

func (c *counter) Attach(*Pool) error               { return nil }
func (c *counter) Acquired(p Path, _ time.Duration) { c.count(func() { c.acquires[p]++ }) }
func (c *counter) AcquireFailed(provider.ErrorCode) {}
func (c *counter) TornDown(r Reason)                { c.count(func() { c.teardowns[r]++ }) }
func (c *counter) Evicted()                         { c.count(func() { c.evicted++ }) }
func (c *counter) StopUnconfirmed()                 { c.count(func() { c.hungStops++ }) }

// get reads one count under the lock.
func (c *counter) get(f func() int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Short TTLs keep the fake clock's jumps readable; the heartbeat is off
// unless a test turns it on, so that background work settles.
func baseOptions(clk *clocktest.Fake, logs *syncBuffer) []Option {
	return []Option{
		WithClock(clk),
		WithEnv(nil), // hermetic: the env tests pass their own
		WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		WithHeartbeat(0),
		WithKeepWarm(time.Minute),
		WithStopTimeout(10 * time.Second),
		WithPollInterval(time.Second),
	}
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	clk := clocktest.NewFake(time.Time{})
	return newHarnessOn(t, clk, pooltest.New(pooltest.WithClock(clk)), nil, opts...)
}

// newHarnessOn builds the pool on prov (the fake itself when nil).
func newHarnessOn(t *testing.T, clk *clocktest.Fake, f *pooltest.Fake, prov provider.Provider, opts ...Option) *harness {
	t.Helper()
	logs := &syncBuffer{}
	if prov == nil {
		prov = f
	}
	obs := newCounter()
	p, err := New(context.Background(), prov, append(append(baseOptions(clk, logs), WithObserver(obs)), opts...)...)
	require.NoError(t, err)
	h := &harness{t: t, ctx: context.Background(), clk: clk, f: f, p: p, obs: obs, logs: logs}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		// Leak safety: nothing of the pool is live after Shutdown.
		assert.NoError(t, VerifyEmpty(ctx, f, p.Name()))
		require.NotContains(t, logs.String(), secretValue, "an env value reached the log")
	})
	return h
}

func (h *harness) acquire(key string) *Lease {
	h.t.Helper()
	l, err := h.p.Acquire(h.ctx, key, testSpec)
	require.NoError(h.t, err)
	require.NotNil(h.t, l.Sandbox)
	return l
}

// supersede acquires key, then sends a second acquire of it that waits out
// busy, the harness's BusyWait, and so supersedes the first turn: the
// first lease, and the second acquire's result to come.
func (h *harness) supersede(key string, busy time.Duration) (*Lease, <-chan acquired) {
	h.t.Helper()
	old := h.acquire(key)
	base := h.clk.Waiters()
	newer := h.acquireAsync(h.ctx, key)
	require.NoError(h.t, h.clk.BlockUntilWaiters(waitCtx(h.t), base+1))
	h.clk.Advance(busy)
	return old, newer
}

func (h *harness) release(l *Lease, o Outcome) {
	h.t.Helper()
	require.NoError(h.t, h.p.Release(h.ctx, l, o))
	h.settle()
}

// settle waits until the pool's background work is done.
func (h *harness) settle() {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return h.p.bg == 0
	}, 10*time.Second, time.Millisecond, "the pool's background work never settled")
}

// advance moves the fake clock and lets what fell due finish.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.clk.Advance(d)
	h.settle()
}

func (h *harness) eventually(cond func() bool, msg string) {
	h.t.Helper()
	require.Eventually(h.t, cond, 10*time.Second, time.Millisecond, msg)
}

// state is the fake's view of a sandbox; "" once it is gone.
func (h *harness) state(id string) provider.State {
	for _, sb := range h.f.Sandboxes() {
		if sb.ID == id {
			return sb.State
		}
	}
	return ""
}

func (h *harness) sandbox(id string) provider.Sandbox {
	h.t.Helper()
	for _, sb := range h.f.Sandboxes() {
		if sb.ID == id {
			return sb
		}
	}
	h.t.Fatalf("sandbox %s is gone", id)
	return provider.Sandbox{}
}

func (h *harness) record(key string) (Record, bool) {
	h.t.Helper()
	rec, ok, err := h.p.store.Load(h.ctx, key)
	require.NoError(h.t, err)
	return rec, ok
}

func (h *harness) teardowns(r Reason) int {
	return h.obs.get(func() int { return h.obs.teardowns[r] })
}

// stopReasons are the reasons the provider was given for stops, in order.
func (h *harness) stopReasons(id string) []string {
	var out []string
	for _, c := range h.f.Calls(pooltest.OpStop) {
		if c.ID == id {
			out = append(out, c.Reason)
		}
	}
	return out
}

// parkedWarm counts the sandboxes parked running: recorded so and holding
// a running slot. A finishing turn on its way to parked stopped, or one
// being made room for, is not counted.
func (h *harness) parkedWarm() int {
	h.p.mu.Lock()
	var keys []string
	for _, ks := range h.p.keys {
		if ks.lease == nil && ks.hold != nil && !ks.parking {
			keys = append(keys, ks.key)
		}
	}
	h.p.mu.Unlock()
	n := 0
	for _, k := range keys {
		if rec, ok, _ := h.p.store.Load(context.Background(), k); ok && rec.State == StateParkedRunning {
			n++
		}
	}
	return n
}

func stageNames(l *Lease) []string {
	var out []string
	for _, s := range l.Stages {
		out = append(out, s.Name)
	}
	return out
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// bgIdle reports whether no background work of the pool runs.
func (h *harness) bgIdle() bool {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.p.bg == 0
}
