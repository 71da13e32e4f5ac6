// Package humanize formats figures for people: the CLI's tables and the
// dashboard share it so that both say the same thing the same way.
package humanize

import (
	"fmt"
	"time"
)

// Duration formats d with its two largest units: "250ms", "42s",
// "3m<sep>12s", "2h<sep>5m", "3d<sep>4h". Milliseconds show only under a
// second, which matters when the daemon runs with a shrunk minute.
func Duration(d time.Duration, sep string) string {
	if d > 0 && d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	s := max(int64(d/time.Second), 0)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%s%ds", s/60, sep, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%s%dm", s/3600, sep, s%3600/60)
	}
	return fmt.Sprintf("%dd%s%dh", s/86400, sep, s%86400/3600)
}
