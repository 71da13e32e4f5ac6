package serve

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// DefaultGrace is how long requests in flight get to finish once the
// context ends, unless WithGrace says otherwise.
const DefaultGrace = 10 * time.Second

// readHeaderTimeout bounds how long a client may take to send its request
// headers: slow-header protection, which net/http owns.
const readHeaderTimeout = 10 * time.Second

// Option configures Serve.
type Option func(*options)

type options struct {
	grace          time.Duration
	clock          clock.Clock
	started        func()
	log            *slog.Logger
	cancelRequests bool
}

// WithGrace sets how long requests in flight get to finish at shutdown
// (DefaultGrace otherwise). 0 closes every connection at once.
func WithGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// WithClock sets the clock that times the grace period (clock.Real()
// otherwise).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithStarted sets a function that Serve calls once the server accepts
// connections, before it waits: the place for a banner or a ready signal.
func WithStarted(f func()) Option { return func(o *options) { o.started = f } }

// WithLogger sets where Serve says that it shuts down, and that the grace
// period ran out (nowhere otherwise).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithCancelRequests makes shutdown end every request's context before the
// grace period begins, so that long streams end at once rather than hold
// the shutdown for the whole period. For servers whose handlers detach
// what must finish from the request.
func WithCancelRequests() Option { return func(o *options) { o.cancelRequests = true } }

// Serve serves h on ln until ctx ends or serving fails. When ctx ends it
// shuts down gracefully (see the package doc) and returns nil, even when
// the grace period ran out and connections had to be closed. When serving
// fails first it returns that error. ln is closed either way.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, opts ...Option) error {
	o := options{grace: DefaultGrace, clock: clock.Real(), started: func() {}, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	o.started()
	select {
	case err := <-errc:
		return err // never http.ErrServerClosed: no one else closes srv
	case <-ctx.Done():
	}
	o.log.Info("shutting down")
	if o.cancelRequests {
		cancelBase()
	}
	o.shutdown(srv)
	<-errc // http.ErrServerClosed, now that srv is shut down
	return nil
}

// shutdown stops srv within the grace period, and closes what is still
// open once it is over.
func (o options) shutdown(srv *http.Server) {
	ctx, cancel := clock.WithTimeout(context.Background(), o.clock, o.grace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		o.log.Warn("shutdown: closing what is still open", "err", err)
		_ = srv.Close()
	}
}
