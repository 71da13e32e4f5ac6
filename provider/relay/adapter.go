package relay

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// FromProvider adapts a provider.Provider: Get gives the canonical id, the
// state and the auto-stop interval, Info the interval minute (once), and
// PreviewURL the upstream.
func FromProvider(p provider.Provider) Resolver {
	return &providerResolver{p: p}
}

type providerResolver struct {
	p provider.Provider

	mu     sync.Mutex
	minute time.Duration // 0 until Info answered
}

func (a *providerResolver) Resolve(ctx context.Context, idOrName string, port int) (Target, error) {
	sb, err := a.p.Get(ctx, idOrName)
	if err != nil {
		return Target{}, err
	}
	if sb.State != provider.StateStarted {
		// The token, where the provider still gives one, lets the relay
		// check its caller before it says why.
		t, _ := previewTarget(ctx, a.p, sb.ID, port)
		return Target{ID: sb.ID, Token: t.Token}, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s", sb.ID, sb.State)
	}
	minute, err := a.intervalMinute(ctx)
	if err != nil {
		return Target{}, err
	}
	t, err := previewTarget(ctx, a.p, sb.ID, port)
	if err != nil {
		return Target{ID: sb.ID, Token: t.Token}, err
	}
	t.ID = sb.ID
	t.AutoStop = provider.IntervalDuration(sb.AutoStopInterval, minute)
	t.Minute = minute
	return t, nil
}

// previewTarget is the one place that reads the provider's preview answer:
// the upstream URL and the sandbox's preview token, which both guards the
// sandbox here and goes upstream in X-Daytona-Preview-Token, as the sandbox
// (Daytona's proxy, or the local toolbox) expects. An empty token means the
// URL carries its own authorisation (Daytona's signed preview URLs).
//
// The upstream is a proxy that counts activity itself (Daytona's, the local
// daemon's), and would count an open connection for as long as it is open:
// the relay tells it not to, so that the relay alone decides what is
// activity (its idle keep-alive limit included) and says so through the
// provider.
func previewTarget(ctx context.Context, p provider.Provider, id string, port int) (Target, error) {
	pv, err := p.PreviewURL(ctx, id, port)
	if err != nil {
		return Target{}, err
	}
	u, err := url.Parse(pv.URL)
	if err != nil {
		return Target{}, provider.Errorf(provider.Internal, "the provider's preview URL for sandbox %s does not parse", id)
	}
	t := Target{URL: u, Token: pv.Token, Header: http.Header{SkipActivityHeader: {"true"}}}
	if pv.Token != "" {
		t.Header.Set(TokenHeader, pv.Token)
	}
	return t, nil
}

// intervalMinute is the provider's interval minute, from Info: local daemons
// report their --minute, Daytona's is a minute.
func (a *providerResolver) intervalMinute(ctx context.Context) (time.Duration, error) {
	a.mu.Lock()
	m := a.minute
	a.mu.Unlock()
	if m > 0 {
		return m, nil
	}
	info, err := a.p.Info(ctx)
	if err != nil {
		return 0, err
	}
	m, err = time.ParseDuration(info.Minute)
	if err != nil || m <= 0 {
		m = time.Minute
	}
	a.mu.Lock()
	a.minute = m
	a.mu.Unlock()
	return m, nil
}

// Stale turns the provider's lifecycle events into cache invalidations:
// stopped, started, deleted and updated name their sandbox; a fresh snapshot
// (after a gap in the stream) means any.
func (a *providerResolver) Stale(ctx context.Context) (<-chan string, error) {
	w, ok := a.p.(provider.Watcher)
	if !ok {
		return nil, provider.Errorf(provider.Unsupported, "the %s provider streams no events", a.p.Traits().Name)
	}
	events, err := w.Watch(ctx, provider.WatchOptions{})
	if err != nil {
		return nil, err
	}
	out := make(chan string)
	go func() {
		defer close(out)
		for ev := range events {
			id, stale := "", true
			switch ev.Type {
			case provider.EventStopped, provider.EventStarted, provider.EventDeleted, provider.EventUpdated:
				if ev.Sandbox == nil {
					break
				}
				id = ev.Sandbox.ID
			case provider.EventSandboxesReplaced:
			default:
				stale = false
			}
			if !stale {
				continue
			}
			select {
			case out <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (a *providerResolver) RefreshActivity(ctx context.Context, id string) error {
	return a.p.RefreshActivity(ctx, id)
}
