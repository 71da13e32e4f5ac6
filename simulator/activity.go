package simulator

import (
	"context"
	"net/http"
	"time"
)

// Daytona's activity timings, in wall-clock seconds at Minute = 1m.
const (
	// activityThrottle: the API records at most one bump per sandbox per 5 s.
	activityThrottle = 5 * time.Second
	// proxyDedupe: the proxy calls the API at most once per 45 s per sandbox.
	proxyDedupe = 45 * time.Second
	// proxyRebump: while a request stays open the proxy bumps every 50 s.
	proxyRebump = 50 * time.Second
)

// skipActivityHeader lets a client opt a proxied request out of activity.
const skipActivityHeader = "X-Daytona-Skip-Last-Activity-Update"

// bumpLocked records activity through the API's throttle. Called with s.mu
// held.
func (s *Simulator) bumpLocked(sb *sandbox) {
	now := s.clk.Now()
	if !sb.lastBump.IsZero() && now.Sub(sb.lastBump) < s.cfg.scaled(activityThrottle) {
		return
	}
	sb.lastBump = now
	if now.After(sb.LastActivity) {
		sb.LastActivity = now
		s.activityMovedLocked(sb)
	}
}

// proxyBumpLocked is the proxy's bump: deduplicated for 45 s per sandbox,
// then through the API's throttle.
func (s *Simulator) proxyBumpLocked(sb *sandbox) {
	now := s.clk.Now()
	if !sb.lastProxyBump.IsZero() && now.Sub(sb.lastProxyBump) < s.cfg.scaled(proxyDedupe) {
		return
	}
	sb.lastProxyBump = now
	s.bumpLocked(sb)
}

// trackProxied bumps activity for a proxied request now and every 50 s
// until the returned stop is called, unless the client opted out.
func (s *Simulator) trackProxied(r *http.Request, sb *sandbox) (stop func()) {
	if r.Header.Get(skipActivityHeader) == "true" {
		return func() {}
	}
	s.mu.Lock()
	s.proxyBumpLocked(sb)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(r.Context())
	t := s.clk.NewTicker(s.cfg.scaled(proxyRebump))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				s.mu.Lock()
				if !sb.gone {
					s.proxyBumpLocked(sb)
				}
				s.mu.Unlock()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
