package humanize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{250 * time.Millisecond, "250ms"},
		{42 * time.Second, "42s"},
		{3*time.Minute + 12*time.Second, "3m 12s"},
		{2*time.Hour + 5*time.Minute, "2h 5m"},
		{76 * time.Hour, "3d 4h"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Duration(tt.d, " "), tt.d)
	}
	assert.Equal(t, "3m12s", Duration(3*time.Minute+12*time.Second, ""))
}
