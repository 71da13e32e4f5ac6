package simulator

import "time"

// Daytona's activity timings, in wall-clock seconds at Minute = 1m.
const (
	// activityThrottle: the API records at most one bump per sandbox per 5 s.
	activityThrottle = 5 * time.Second
	// proxyDedupe: the proxy calls the API at most once per 45 s per
	// sandbox. (Its 50 s re-bump while a request stays open is the relay's
	// heartbeat; see proxy.go.)
	proxyDedupe = 45 * time.Second
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
