package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

func TestWithTimeoutRunsOnTheClock(t *testing.T) {
	fake := clocktest.NewFake(time.Time{})
	ctx, cancel := clock.WithTimeout(context.Background(), fake, time.Minute)
	defer cancel()
	fake.Advance(59 * time.Second)
	assert.NoError(t, ctx.Err())
	fake.Advance(time.Second)
	assert.ErrorIs(t, ctx.Err(), context.Canceled)

	ctx, cancel = clock.WithTimeout(context.Background(), fake, time.Minute)
	cancel()
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	assert.Zero(t, fake.Waiters(), "cancel stops the timer")
}

func TestSleep(t *testing.T) {
	fake := clocktest.NewFake(time.Time{})
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), fake, time.Second) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.NoError(t, fake.BlockUntilWaiters(ctx, 1))
	fake.Advance(time.Second)
	assert.NoError(t, <-done)
}
