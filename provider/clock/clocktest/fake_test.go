package clocktest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimerFiresOnlyWhenDue(t *testing.T) {
	f := NewFake(time.Time{})
	start := f.Now()
	tm := f.NewTimer(10 * time.Second)
	f.Advance(9 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Second)
	got := <-tm.C()
	assert.Equal(t, start.Add(10*time.Second), got)
	assert.False(t, tm.Stop(), "a fired timer is no longer pending")
}

func TestTickerFiresEachPeriodAtItsOwnInstant(t *testing.T) {
	f := NewFake(time.Time{})
	var fired []time.Duration
	start := f.Now()
	tk := f.NewTicker(time.Minute)
	defer tk.Stop()
	for i := 0; i < 3; i++ {
		f.Advance(time.Minute)
		fired = append(fired, (<-tk.C()).Sub(start))
	}
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute}, fired)
}

func TestAfterFuncOrderAndStop(t *testing.T) {
	f := NewFake(time.Time{})
	var order []string
	f.AfterFunc(2*time.Second, func() { order = append(order, "b") })
	f.AfterFunc(time.Second, func() { order = append(order, "a") })
	stopped := f.AfterFunc(1500*time.Millisecond, func() { order = append(order, "never") })
	require.True(t, stopped.Stop())
	f.Advance(5 * time.Second)
	assert.Equal(t, []string{"a", "b"}, order)
	assert.Zero(t, f.Waiters())
}

func TestResetReschedules(t *testing.T) {
	f := NewFake(time.Time{})
	tm := f.NewTimer(time.Second)
	assert.True(t, tm.Reset(time.Hour))
	f.Advance(time.Minute)
	select {
	case <-tm.C():
		t.Fatal("reset timer fired at its old deadline")
	default:
	}
}

func TestBlockUntilWaiters(t *testing.T) {
	f := NewFake(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { f.NewTimer(time.Second) }()
	require.NoError(t, f.BlockUntilWaiters(ctx, 1))
	assert.Equal(t, 1, f.Waiters())
}

func TestNextIsTheEarliestPendingDeadline(t *testing.T) {
	f := NewFake(time.Time{})
	_, ok := f.Next()
	assert.False(t, ok, "nothing pending")
	start := f.Now()
	late := f.NewTimer(time.Hour)
	tk := f.NewTicker(time.Minute)
	next, ok := f.Next()
	require.True(t, ok)
	assert.Equal(t, start.Add(time.Minute), next)
	tk.Stop()
	next, _ = f.Next()
	assert.Equal(t, start.Add(time.Hour), next)
	late.Stop()
	_, ok = f.Next()
	assert.False(t, ok)
}
