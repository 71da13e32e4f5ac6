package provider

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestIntervalDuration(t *testing.T) {
	for _, tc := range []struct {
		n      int
		minute time.Duration
		want   time.Duration
	}{
		{15, time.Minute, 15 * time.Minute},
		{15, 200 * time.Millisecond, 3 * time.Second},
		{0, time.Minute, 0},
		{-1, time.Minute, 0},
		{15, 0, 0},
		{math.MaxInt64 / int(time.Minute), time.Minute, time.Duration(math.MaxInt64/int64(time.Minute)) * time.Minute},
		{math.MaxInt64/int(time.Minute) + 1, time.Minute, math.MaxInt64},
		{99999999999, time.Minute, math.MaxInt64},
	} {
		assert.Equal(t, tc.want, IntervalDuration(tc.n, tc.minute), "%d x %s", tc.n, tc.minute)
	}
}
