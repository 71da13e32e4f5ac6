package conformance

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// The scenarios of this file hold providers to the parts of the contract
// that are about the call rather than the sandbox: what a cancelled call
// answers, why a sandbox says it stopped, and what a watcher sees.

// cancelledCall: a call whose context has already ended answers canceled
// or deadline_exceeded, keeps the context's error as its cause, and changes
// nothing. A host server cancels calls when its own request goes away; an
// outage code there would make it back off, fence credentials or page
// someone for a reason that is its own.
func cancelledCall(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("box"), AutoStopInterval: ptr(0)})

	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	expired, cancelExpired := context.WithDeadline(e.ctx, time.Unix(0, 0))
	defer cancelExpired()
	for _, c := range []struct {
		ctx   context.Context
		code  provider.ErrorCode
		cause error
		is    error
	}{
		{cancelled, provider.Canceled, context.Canceled, provider.ErrCanceled},
		{expired, provider.DeadlineExceeded, context.DeadlineExceeded, provider.ErrDeadlineExceeded},
	} {
		calls := []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"create", func(ctx context.Context) error {
				_, err := e.p.Create(ctx, provider.CreateRequest{Name: e.name("never"), Labels: e.labels})
				return err
			}},
			{"get", func(ctx context.Context) error { _, err := e.p.Get(ctx, sb.ID); return err }},
			{"list", func(ctx context.Context) error {
				_, err := e.p.List(ctx, provider.ListOptions{Labels: e.labels})
				return err
			}},
			{"stop", func(ctx context.Context) error { _, err := e.p.Stop(ctx, sb.ID); return err }},
			{"delete", func(ctx context.Context) error { return e.p.Delete(ctx, sb.ID) }},
		}
		for _, call := range calls {
			err := call.call(c.ctx)
			require.Error(e.t, err, "%s with a context that ended (%v)", call.name, c.cause)
			assert.Equal(e.t, c.code, provider.Code(err), "%s: %v", call.name, err)
			assert.ErrorIs(e.t, err, c.cause, "%s: the context's error is kept as the cause", call.name)
			assert.ErrorIs(e.t, err, c.is, "%s: matches its code's sentinel", call.name)
			assert.False(e.t, errors.Is(err, provider.ErrUnavailable), "%s: a caller's own cancellation is not an outage", call.name)
		}
	}

	got := e.get(sb.ID)
	assert.Equal(e.t, provider.StateStarted, got.State, "the cancelled stop and delete changed nothing")
	_, err := e.p.Get(e.ctx, e.name("never"))
	assert.ErrorIs(e.t, err, provider.ErrNotFound, "the cancelled create made nothing")
	all, err := e.p.List(e.ctx, provider.ListOptions{Labels: e.labels})
	require.NoError(e.t, err)
	assert.Len(e.t, all, 1, "only the scenario's own sandbox")
}

// stopReasons: a sandbox stopped by a caller says so in its errorReason
// (unless the provider records no reasons at all), and a provider that
// takes a reason keeps the one given and refuses a malformed one.
func stopReasons(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("manual"), AutoStopInterval: ptr(0)})
	stopped := e.stop(sb.ID, "")
	if !e.want.Traits.NoStopReason {
		assert.Equal(e.t, provider.StopReasonManual, stopped.ErrorReason, "a stop without a reason")
	}
	started, err := e.p.Start(e.ctx, sb.ID)
	require.NoError(e.t, err)
	assert.Empty(e.t, started.ErrorReason, "a started sandbox carries no stop reason")

	rs, ok := e.p.(provider.ReasonStopper)
	require.Equal(e.t, e.want.StopWithReason, ok, "%T implements provider.ReasonStopper", e.p)
	if !ok {
		return
	}
	for _, bad := range []string{" leading-space", "-dash-first", "semi;colon", string(make([]byte, 65))} {
		_, err := rs.StopWithReason(e.ctx, sb.ID, bad)
		assert.ErrorIs(e.t, err, provider.ErrInvalidArgument, "reason %q", bad)
	}
	assert.Equal(e.t, provider.StateStarted, e.get(sb.ID).State, "a refused reason stops nothing")
	const reason = "pool: evicted"
	stopped = e.stop(sb.ID, reason)
	assert.Equal(e.t, reason, stopped.ErrorReason, "the reason given is kept")
	assert.Equal(e.t, reason, e.get(sb.ID).ErrorReason, "and read back")
}

// stop stops a sandbox, with reason if it is not empty, and returns it
// stopped.
func (e *env) stop(id, reason string) *provider.Sandbox {
	e.t.Helper()
	var sb *provider.Sandbox
	var err error
	if reason == "" {
		sb, err = e.p.Stop(e.ctx, id)
	} else {
		sb, err = e.p.(provider.ReasonStopper).StopWithReason(e.ctx, id, reason)
	}
	require.NoError(e.t, err, "stop %s", id)
	if sb.State != provider.StateStopped {
		sb = e.waitState(id, provider.StateStopped, 1)
	}
	return sb
}

// watchSeesLifecycle: a watcher gets a snapshot first, then a sandbox's
// creation, stop and deletion in that order with rising sequence numbers,
// and its channel closes when its context ends.
func watchSeesLifecycle(e *env) {
	w, ok := e.p.(provider.Watcher)
	require.Equal(e.t, e.want.Watch, ok, "%T implements provider.Watcher", e.p)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	events, err := w.Watch(ctx, provider.WatchOptions{Labels: e.labels})
	require.NoError(e.t, err, "watch")
	first := e.next(events)
	assert.Equal(e.t, provider.EventSandboxesReplaced, first.Type, "the stream opens with a snapshot")
	assert.Empty(e.t, first.Sandboxes, "of this scenario's sandboxes, of which there are none yet")

	sb := e.create(provider.CreateRequest{Name: e.name("watched"), AutoStopInterval: ptr(0)})
	e.stop(sb.ID, "")
	require.NoError(e.t, e.p.Delete(e.ctx, sb.ID))

	var seen []provider.EventType
	last := first.Seq
	for !slices.Contains(seen, provider.EventDeleted) {
		ev := e.next(events)
		assert.Greater(e.t, ev.Seq, last, "sequence numbers rise")
		last = ev.Seq
		if ev.Sandbox == nil || ev.Sandbox.ID != sb.ID {
			continue
		}
		seen = append(seen, ev.Type)
	}
	created := slices.Index(seen, provider.EventCreated)
	stopped := slices.Index(seen, provider.EventStopped)
	require.True(e.t, created >= 0 && stopped > created, "created, then stopped, then deleted: %v", seen)

	cancel()
	timeout := e.clk.NewTimer(e.wait(0.5) + fixedSlack)
	defer timeout.Stop()
	for {
		select {
		case _, open := <-events:
			if !open {
				return
			}
		case <-timeout.C():
			e.t.Fatalf("the event channel stayed open after its context ended")
		}
	}
}

// next is the watcher's next event, within half an interval minute and
// fixedSlack.
func (e *env) next(events <-chan provider.Event) provider.Event {
	e.t.Helper()
	timeout := e.clk.NewTimer(e.wait(0.5) + fixedSlack)
	defer timeout.Stop()
	select {
	case ev, open := <-events:
		require.True(e.t, open, "the event channel closed while the watch's context was live")
		return ev
	case <-timeout.C():
		e.t.Fatalf("no event within half an interval minute and %v", fixedSlack)
		return provider.Event{}
	}
}
