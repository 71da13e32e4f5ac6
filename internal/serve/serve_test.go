package serve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/leakcheck"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// started runs Serve on a fresh loopback listener and returns its address
// and the channel that receives what Serve returned.
func started(t *testing.T, ctx context.Context, h http.Handler, opts ...Option) (addr string, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, ln, h, append(opts, WithStarted(func() { close(ready) }))...) }()
	<-ready
	return ln.Addr().String(), errc
}

// client is a client of its own, whose idle connections the test closes.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, addr string) (string, error) {
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func hello(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }

func TestServeUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := started(t, ctx, http.HandlerFunc(hello))
	c := client(t)
	body, err := get(t, c, addr)
	require.NoError(t, err)
	assert.Equal(t, "hello", body)

	cancel()
	require.NoError(t, <-done, "a shutdown asked for by ctx is no error")
	_, err = net.Dial("tcp", addr)
	assert.Error(t, err, "the listener is closed")
}

func TestServeReturnsTheServeError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	err = Serve(context.Background(), ln, http.HandlerFunc(hello))
	require.Error(t, err)
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.NotErrorIs(t, err, http.ErrServerClosed)
}

func TestServeContextAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	assert.NoError(t, Serve(ctx, ln, http.HandlerFunc(hello)))
}

// blocking is a handler whose requests wait for release or for their own
// context, and that says when one has arrived.
type blocking struct {
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
	ended   chan error // the request context's error, or nil when released
}

func newBlocking() *blocking {
	return &blocking{arrived: make(chan struct{}), release: make(chan struct{}), ended: make(chan error, 1)}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.once.Do(func() { close(b.arrived) })
	select {
	case <-b.release:
		io.WriteString(w, "finished")
		b.ended <- nil
	case <-r.Context().Done():
		b.ended <- r.Context().Err()
	}
}

// logged signals the first record whose message is msg.
type logged struct {
	slog.Handler
	msg  string
	once sync.Once
	seen chan struct{}
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }

func (l *logged) Handle(_ context.Context, r slog.Record) error {
	if r.Message == l.msg {
		l.once.Do(func() { close(l.seen) })
	}
	return nil
}

func newLogged(msg string) *logged {
	return &logged{Handler: slog.DiscardHandler, msg: msg, seen: make(chan struct{})}
}

func TestShutdownLetsRequestsInFlightFinish(t *testing.T) {
	clk := clocktest.NewFake(time.Unix(0, 0)) // never advanced: the grace never ends
	h, log := newBlocking(), newLogged("shutting down")
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := started(t, ctx, h, WithClock(clk), WithLogger(slog.New(log)))
	type result struct {
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		body, err := get(t, client(t), addr)
		res <- result{body, err}
	}()
	<-h.arrived

	cancel()
	<-log.seen
	close(h.release)
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, "finished", r.body)
	assert.NoError(t, <-h.ended)
	assert.NoError(t, <-done)
}

func TestShutdownClosesWhatOutlivesTheGrace(t *testing.T) {
	clk := clocktest.NewFake(time.Unix(0, 0))
	h := newBlocking()
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := started(t, ctx, h, WithClock(clk), WithGrace(time.Minute))
	errc := make(chan error, 1)
	go func() {
		_, err := get(t, client(t), addr)
		errc <- err
	}()
	<-h.arrived

	cancel()
	// The grace period's timer is the fake clock's only waiter.
	require.NoError(t, clk.BlockUntilWaiters(context.Background(), 1))
	clk.Advance(time.Minute)
	assert.ErrorIs(t, <-h.ended, context.Canceled, "closing the server ends the request")
	assert.Error(t, <-errc, "the client's connection is cut")
	assert.NoError(t, <-done, "a grace period that ran out is no error of serving")
}

func TestWithCancelRequestsEndsStreamsAtOnce(t *testing.T) {
	clk := clocktest.NewFake(time.Unix(0, 0)) // never advanced: only the cancel can end the request
	h := newBlocking()
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := started(t, ctx, h, WithClock(clk), WithCancelRequests())
	errc := make(chan error, 1)
	go func() {
		_, err := get(t, client(t), addr)
		errc <- err
	}()
	<-h.arrived

	cancel()
	assert.ErrorIs(t, <-h.ended, context.Canceled)
	<-errc // the handler wrote nothing: the client sees an empty answer or a cut
	assert.NoError(t, <-done)
}

func TestStartedRunsBeforeServeWaits(t *testing.T) {
	var order []string
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	err = Serve(ctx, ln, http.HandlerFunc(hello), WithStarted(func() {
		order = append(order, "started")
		// The listener accepts already: a client that saw the banner may
		// connect at once.
		body, err := get(t, client(t), ln.Addr().String())
		if err == nil && strings.Contains(body, "hello") {
			order = append(order, "served")
		}
		cancel()
	}))
	require.NoError(t, err)
	assert.Equal(t, []string{"started", "served"}, order)
}
