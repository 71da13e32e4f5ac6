package relay

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// fakeBackend is a Resolver whose answers the test sets, and which records
// every RefreshActivity.
type fakeBackend struct {
	mu       sync.Mutex
	targets  map[string]Target
	errs     map[string]error
	partial  map[string]Target // what Resolve returns with errs
	resolves int
	// refresh, when set, answers RefreshActivity after the call is recorded.
	refresh func(ctx context.Context, id string) error
	calls   chan string
}

func newBackend() *fakeBackend {
	return &fakeBackend{targets: map[string]Target{}, errs: map[string]error{}, calls: make(chan string, 100000)}
}

func (b *fakeBackend) set(name string, t Target) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.targets[name] = t
	delete(b.errs, name)
}

func (b *fakeBackend) fail(name string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs[name] = err
}

// failWith makes name fail with err and t, the ID and Token a resolver
// still knows of a sandbox it cannot reach.
func (b *fakeBackend) failWith(name string, t Target, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs[name] = err
	if b.partial == nil {
		b.partial = map[string]Target{}
	}
	b.partial[name] = t
}

func (b *fakeBackend) resolveCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.resolves
}

func (b *fakeBackend) Resolve(_ context.Context, idOrName string, _ int) (Target, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resolves++
	if err := b.errs[idOrName]; err != nil {
		return b.partial[idOrName], err
	}
	t, ok := b.targets[idOrName]
	if !ok {
		return Target{}, provider.Errorf(provider.NotFound, "sandbox %s not found", idOrName)
	}
	return t, nil
}

func (b *fakeBackend) RefreshActivity(ctx context.Context, id string) error {
	b.calls <- id
	b.mu.Lock()
	f := b.refresh
	b.mu.Unlock()
	if f != nil {
		return f(ctx, id)
	}
	return nil
}

func (b *fakeBackend) setRefresh(f func(context.Context, string) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refresh = f
}

// drain returns the refreshes recorded so far.
func (b *fakeBackend) drain() []string {
	var out []string
	for {
		select {
		case id := <-b.calls:
			out = append(out, id)
		default:
			return out
		}
	}
}

// target is a sandbox served by upstream with a one-minute auto-stop
// interval on a one-minute minute.
func target(id string, upstream string) Target {
	u, err := url.Parse(upstream)
	if err != nil {
		panic(err)
	}
	return Target{ID: id, URL: u, AutoStop: time.Minute, Minute: time.Minute}
}

type fixture struct {
	clk     *clocktest.Fake
	backend *fakeBackend
	relay   *Relay
	logs    *logBuffer
}

// newFixture makes a relay on a fake clock (unless opts give another) that
// logs into the fixture.
func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{clk: clocktest.NewFake(time.Time{}), backend: newBackend(), logs: &logBuffer{}}
	opts = append(append([]Option{WithClock(f.clk)}, opts...),
		WithLogger(slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	rl, err := New(f.backend, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	f.relay = rl
	return f
}

// do serves one request through the relay in-process; host "" means the
// relay's own host.
func (f *fixture) do(t *testing.T, method, host, path string, hdr http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "http://relay.test"+path, nil)
	req.Host = host
	if host == "" {
		req.Host = "127.0.0.1:4030"
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	f.relay.ServeHTTP(rec, req)
	return rec
}

// settle waits until no refresh is in flight, so that the sandbox state the
// next step sees is the one the last refresh left.
func (f *fixture) settle(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return f.relay.Stats().RefreshesInFlight == 0 },
		10*time.Second, time.Millisecond, "a refresh is still in flight")
}

// upstream is a real HTTP server on loopback.
func upstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
