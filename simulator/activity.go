package simulator

import "time"

// Daytona's activity timings, in wall-clock seconds at Minute = 1m.
const (
	// activityThrottle: the API records at most one bump per sandbox per 5 s.
	activityThrottle = 5 * time.Second
)

// skipActivityHeader lets a client opt a proxied request out of activity.
const skipActivityHeader = "X-Daytona-Skip-Last-Activity-Update"

// bumpLocked records activity through the API's throttle. Called with s.mu
// held.
func (s reconciler) bumpLocked(sb *sandbox) {
	now := s.clk.Now()
	if !sb.lastBump.IsZero() && now.Sub(sb.lastBump) < s.cfg.scaled(activityThrottle) {
		return
	}
	sb.lastBump = now
	if now.After(sb.LastActivity) {
		sb.LastActivity = now
		s.rows.ActivityMoved(sb)
	}
}
