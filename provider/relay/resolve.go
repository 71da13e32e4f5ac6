package relay

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Resolver is what the relay needs from a sandbox backend. FromProvider
// adapts any provider.Provider; host servers with their own bookkeeping may
// implement it directly. Implementations are safe for concurrent use.
type Resolver interface {
	// Resolve says where port of the sandbox idOrName is served.
	// not_found: no such sandbox. failed_precondition: the sandbox is not
	// started. invalid_argument: the port cannot be reached.
	// unavailable: the backend does not answer. With any error but
	// not_found, a Target carrying the sandbox's ID and Token, when they
	// are known, lets the relay check the caller before it says why: a
	// stranger learns nothing of a private sandbox's state.
	Resolve(ctx context.Context, idOrName string, port int) (Target, error)

	// RefreshActivity resets the sandbox's idle clock. id is Target.ID.
	// not_found, unavailable.
	RefreshActivity(ctx context.Context, id string) error
}

// Invalidator is implemented by resolvers that can tell when a resolution
// goes stale, so that a stopped sandbox's address (which the next sandbox may
// get) leaves the cache at once rather than at the end of WithCacheTTL.
type Invalidator interface {
	// Stale streams the ids of sandboxes whose targets may have changed
	// (stopped, started again, deleted, updated), and "" for "any of them",
	// until ctx ends or the channel closes. unsupported: the backend has no
	// event stream; unavailable: not now.
	Stale(ctx context.Context) (<-chan string, error)
}

// Target is a resolved upstream.
type Target struct {
	// ID is the sandbox's canonical id: what RefreshActivity gets, and the
	// key of its activity state whatever name the address used.
	ID string
	// URL is the upstream base; the request path is joined to its path.
	URL *url.URL
	// Header is set on every request toward the upstream, replacing what
	// the client sent under the same names (the preview token, say).
	Header http.Header
	// Token, when not empty, makes the sandbox private: a request passes
	// only with this token (header, query parameter or the cookie the relay
	// sets). Empty means public.
	Token string
	// AutoStop is the sandbox's auto-stop interval (0: never stops).
	AutoStop time.Duration
	// Minute is the length of the backend's interval minute; Daytona's
	// 45 s dedupe and 50 s heartbeat scale with it. Zero means a minute.
	Minute time.Duration
}

func (t Target) validate() error {
	if t.ID == "" {
		return provider.Errorf(provider.Internal, "the resolver returned a target without a sandbox id")
	}
	if t.URL == nil || (t.URL.Scheme != "http" && t.URL.Scheme != "https") || t.URL.Host == "" {
		return provider.Errorf(provider.Internal, "the resolver returned no http(s) upstream for sandbox %s", t.ID)
	}
	return nil
}

// timing is the debounce window and the heartbeat period of a sandbox: skip
// a refresh within a third of the auto-stop interval, and never more often
// than Daytona's 45 s dedupe; heartbeat at 10/9 of the window, which is
// Daytona's 50 s at a one-minute interval and always passes the window.
// With daytona, the 45 s and 50 s whatever the interval.
func timing(autoStop, minute time.Duration, daytona bool) (window, beat time.Duration) {
	if minute <= 0 {
		minute = time.Minute
	}
	window = minute * 45 / 60
	if !daytona {
		window = max(autoStop/3, window)
	}
	return window, window + window/9 // not window*10/9, which overflows for an interval of centuries
}

// entry is a cached resolution.
type entry struct {
	target  Target
	sb      *sandbox
	expires time.Time
}

// resolver caches resolutions for a while and asks the backend once for
// concurrent misses.
type resolver struct {
	res     Resolver
	clk     clock.Clock
	ttl     time.Duration
	timeout time.Duration
	daytona bool            // WithDaytonaTiming
	base    context.Context // ends with the relay
	track   *tracker
	group   singleflight.Group

	mu        sync.RWMutex
	entries   map[routeKey]*entry
	lastSweep time.Time
}

const sweepEvery = time.Minute

func (r *resolver) cached(k routeKey) *entry {
	if r.ttl < 0 {
		return nil
	}
	r.mu.RLock()
	e := r.entries[k]
	r.mu.RUnlock()
	if e == nil || !r.clk.Now().Before(e.expires) {
		return nil
	}
	return e
}

// resolve returns the cached entry for k or resolves it. Waiting ends with
// ctx; the resolution itself is bounded by the relay's timeout, so one
// caller that leaves does not fail the others.
func (r *resolver) resolve(ctx context.Context, k routeKey) (*entry, error) {
	if e := r.cached(k); e != nil {
		return e, nil
	}
	ch := r.group.DoChan(k.id+"\x00"+strconv.Itoa(k.port), func() (any, error) {
		return r.fetch(k)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*entry), nil
	case <-ctx.Done():
		return nil, provider.Errorf(provider.Unavailable, "the request ended while sandbox %s was being resolved", k.id)
	}
}

func (r *resolver) fetch(k routeKey) (*entry, error) {
	ctx, cancel := withTimeout(r.base, r.clk, r.timeout)
	defer cancel()
	t, err := r.res.Resolve(ctx, k.id, k.port)
	if err != nil {
		if t.ID != "" && t.Token == "" {
			t.Token = r.track.knownToken(t.ID)
		}
		if t.ID != "" && t.Token != "" && provider.Code(err) != provider.NotFound {
			return nil, &unreachable{id: t.ID, token: t.Token, err: err}
		}
		return nil, err
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	window, beat := timing(t.AutoStop, t.Minute, r.daytona)
	now := r.clk.Now()
	sb := r.track.sandbox(t.ID)
	sb.setTiming(window, beat, now)
	sb.setToken(t.Token)
	e := &entry{target: t, sb: sb, expires: now.Add(r.ttl)}
	r.mu.Lock()
	if r.ttl > 0 {
		r.entries[k] = e
	}
	sweep := now.Sub(r.lastSweep) >= sweepEvery
	if sweep {
		r.lastSweep = now
		for key, old := range r.entries {
			if !now.Before(old.expires) {
				delete(r.entries, key)
			}
		}
	}
	r.mu.Unlock()
	if sweep {
		r.track.sweep(now)
	}
	return e, nil
}

// forgetSandbox drops every entry of the sandbox id; "" drops them all.
func (r *resolver) forgetSandbox(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, e := range r.entries {
		if id == "" || e.target.ID == id {
			delete(r.entries, k)
		}
	}
}

// forget drops e, so that the next request resolves again; a newer entry for
// the same key stays.
func (r *resolver) forget(k routeKey, e *entry) {
	r.mu.Lock()
	if r.entries[k] == e {
		delete(r.entries, k)
	}
	r.mu.Unlock()
}

// withTimeout is clock.WithTimeout, or no bound at all for a negative d:
// an in-process backend that never blocks needs no timer per call.
func withTimeout(parent context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if d < 0 {
		return context.WithCancel(parent)
	}
	return clock.WithTimeout(parent, clk, d)
}

// unreachable is a resolution that failed for a private sandbox whose token
// the resolver still knew: the relay checks the caller against it before it
// passes err on.
type unreachable struct {
	id, token string
	err       error
}

func (u *unreachable) Error() string { return u.err.Error() }
func (u *unreachable) Unwrap() error { return u.err }
