package provider

import (
	"math"
	"time"
)

// IntervalDuration is n interval minutes, each minute long: how long an
// auto-stop (or archive, or delete) interval lasts. It saturates at the
// longest Duration, about 292 years, rather than wrapping negative, which
// an interval the API accepts (any non-negative int) would otherwise do;
// 0 or less is 0.
func IntervalDuration(n int, minute time.Duration) time.Duration {
	if n <= 0 || minute <= 0 {
		return 0
	}
	if int64(n) > math.MaxInt64/int64(minute) {
		return math.MaxInt64
	}
	return time.Duration(n) * minute
}
