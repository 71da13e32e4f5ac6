package testdaemon

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setCursor makes the next window start at next (0: a random start).
func setCursor(t *testing.T, next int) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	old := ports.next
	ports.next = next
	t.Cleanup(func() {
		ports.mu.Lock()
		defer ports.mu.Unlock()
		ports.next = old
	})
}

func TestPortWindow(t *testing.T) {
	tests := []struct {
		name   string
		cursor int
		sizes  []int
		want   [][2]int
	}{
		{"default size", 12000, []int{0}, [][2]int{{12000, 12199}}},
		{"windows of the process follow each other", 12000, []int{20, 100, 20}, [][2]int{{12000, 12019}, {12020, 12119}, {12120, 12139}}},
		{"a window that would pass the range wraps to its start", portsHigh - 10, []int{20, 20}, [][2]int{{portsLow, portsLow + 19}, {portsLow + 20, portsLow + 39}}},
		{"a window that ends the range fits", portsHigh - 19, []int{20}, [][2]int{{portsHigh - 19, portsHigh}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setCursor(t, tt.cursor)
			for i, size := range tt.sizes {
				lo, hi := portWindow(size)
				assert.Equal(t, tt.want[i], [2]int{lo, hi}, "window %d", i)
			}
		})
	}
}

func TestPortWindowStartsAtRandomInRange(t *testing.T) {
	setCursor(t, 0)
	lo, hi := portWindow(20)
	require.GreaterOrEqual(t, lo, portsLow)
	require.LessOrEqual(t, hi, portsHigh)
	assert.Equal(t, 19, hi-lo)
}
