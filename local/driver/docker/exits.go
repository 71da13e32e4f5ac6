package docker

import (
	"context"
	"sync"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// Bounds of the pause before the exits feed connects again.
const (
	exitsRetryMin = 100 * time.Millisecond
	exitsRetryMax = 5 * time.Second
)

// exitFeed tells waiters when a container may have ended, from one
// subscription to the Engine's event stream (die and destroy of
// containers) for all of them, instead of a wait request per container.
// A waiter learns nothing but "look again": on an event of its container,
// when the stream breaks, and on every (re)connection of the stream, since
// an event may have been missed while it was down. It runs from the first subscription until
// Close.
type exitFeed struct {
	r *Driver

	mu      sync.Mutex
	subs    map[string]map[chan struct{}]struct{} // by container id
	running bool
	ctx     context.Context
	stop    context.CancelFunc
	// lost counts the connections of the stream that broke: the engine
	// went away, and events of then may never have come.
	lost uint64
}

// breaks is how many connections of the stream have broken so far.
func (f *exitFeed) breaks() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}

// subscribe returns a channel that receives a value whenever container id
// may have ended, and its cancellation.
func (f *exitFeed) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[string]map[chan struct{}]struct{}{}
	}
	if f.subs[id] == nil {
		f.subs[id] = map[chan struct{}]struct{}{}
	}
	f.subs[id][ch] = struct{}{}
	if !f.running && f.ctx == nil {
		f.ctx, f.stop = context.WithCancel(context.Background())
	}
	if !f.running && f.ctx.Err() == nil {
		f.running = true
		go f.run(f.ctx)
	}
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs[id], ch)
		if len(f.subs[id]) == 0 {
			delete(f.subs, id)
		}
	}
}

// close ends the feed.
func (f *exitFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil {
		f.ctx, f.stop = context.WithCancel(context.Background())
	}
	f.stop()
}

// run follows the event stream until ctx ends, connecting again after a
// pause that grows while the engine does not answer.
func (f *exitFeed) run(ctx context.Context) {
	defer func() {
		f.mu.Lock()
		f.running = false
		f.mu.Unlock()
	}()
	pause := exitsRetryMin
	for ctx.Err() == nil {
		if f.follow(ctx) {
			pause = exitsRetryMin
		}
		t := f.r.clk.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		pause = min(2*pause, exitsRetryMax)
	}
}

// follow reads one connection of the stream until it breaks, and reports
// whether it connected.
func (f *exitFeed) follow(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, errs := f.r.api(ctx).Events(ctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", string(events.ActionDestroy)),
	)})
	select {
	case <-errs:
		return false // no stream at all
	default:
	}
	// Connected: whatever happened while the stream was down is looked at
	// again.
	f.tickAll()
	for {
		select {
		case m := <-msgs:
			f.tick(m.Actor.ID)
		case <-errs:
			// The engine went away: every waiter looks, and learns
			// that it cannot tell, rather than wait for an event that
			// may never come.
			f.mu.Lock()
			f.lost++
			f.mu.Unlock()
			f.tickAll()
			return true
		}
	}
}

func (f *exitFeed) tick(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs[id] {
		notify(ch)
	}
}

func (f *exitFeed) tickAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, chs := range f.subs {
		for ch := range chs {
			notify(ch)
		}
	}
}

// notify leaves a value in ch unless one is waiting there already.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
