package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// Reads answer from memory: listing and getting any number of sandboxes
// asks no driver anything, since each watch learns of its workload's end
// from the driver's own signal.
func TestReadsAskNoDriver(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i := range 50 {
		h.create(provider.CreateRequest{ID: fmt.Sprintf("sb-%02d", i), Labels: map[string]string{"even": fmt.Sprint(i%2 == 0)}})
	}
	before := h.rt.StatusCalls()
	assert.Len(t, h.m.List(ctx, Filter{}), 50)
	assert.Len(t, h.m.List(ctx, Filter{Labels: map[string]string{"even": "true"}}), 25)
	for i := range 50 {
		_, err := h.m.Get(ctx, fmt.Sprintf("sb-%02d", i))
		require.NoError(t, err)
	}
	h.m.ListJSON(ctx, Filter{})
	assert.Equal(t, before, h.rt.StatusCalls(), "no read asked a driver")

	// And an exit still shows, through the watch.
	h.rt.Kill(h.handle("sb-07"), "exited: code 2")
	h.eventually(func() bool { return h.get("sb-07").State == provider.StateStopped }, "the exit is recorded")
	assert.Equal(t, "exited: code 2", h.get("sb-07").ErrorReason)
}

// ListJSON is List as the API encodes it, oldest first, filtered alike,
// and follows every change.
func TestListJSONIsTheEncodedList(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	check := func(labels map[string]string) {
		t.Helper()
		list := h.m.List(ctx, Filter{Labels: labels})
		if list == nil {
			list = []provider.Sandbox{}
		}
		want, err := json.Marshal(list)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(h.m.ListJSON(ctx, Filter{Labels: labels})))
	}
	check(nil)
	h.create(provider.CreateRequest{ID: "b", Labels: map[string]string{"team": "x"}})
	h.clk.Advance(time.Second)
	h.create(provider.CreateRequest{Name: "a", Labels: map[string]string{"team": "y"}})
	check(nil)
	check(map[string]string{"team": "x"})
	check(map[string]string{"team": "none"})
	var ids []string
	for _, s := range h.m.List(ctx, Filter{}) {
		ids = append(ids, s.ID)
	}
	assert.Equal(t, []string{"b", "a"}, ids, "oldest first")

	_, err := h.m.Stop(ctx, "b")
	require.NoError(t, err)
	check(nil)
	require.NoError(t, h.m.RefreshActivity(ctx, "a"))
	check(nil)
	require.NoError(t, h.m.Delete(ctx, "a"))
	check(nil)
}

// An exit the watch could not record (its write failed) is recorded by
// the next read once the write works.
func TestAReadRecordsAnExitTheWatchCouldNot(t *testing.T) {
	failed := logged(`msg="persist exit"`)
	h := newHarness(t, func(o *Options) { o.Logger = failed.logger() })
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "moved"})
	dir := filepath.Join(h.root, "moved")
	require.NoError(t, os.Rename(dir, dir+".away"))
	h.rt.Kill(h.handle("moved"), "exited: code 4")
	select {
	case <-failed.seen:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not try to record the exit")
	}
	h.eventually(func() bool {
		// The watch holds the sandbox's operation lock while it tries to
		// record the exit, and notes the exit before it takes the lock;
		// a read skips a sandbox whose lock is held.
		e, err := h.m.lookup("moved")
		if err != nil || !e.op.tryLock() {
			return false
		}
		defer e.op.unlock()
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return h.m.reg.unsettled == 1
	}, "the watch learnt of the exit and failed to record it")
	assert.Equal(t, provider.StateStarted, h.get("moved").State, "not on disk, so not in memory")

	require.NoError(t, os.Rename(dir+".away", dir))
	got, err := h.m.Get(ctx, "moved")
	require.NoError(t, err)
	assert.Equal(t, provider.StateStopped, got.State)
	assert.Equal(t, "exited: code 4", got.ErrorReason)
	assert.Equal(t, provider.StateStopped, readRecord(t, h.root, "moved").State)
}

// A watch whose driver lost track of the workload (an engine that went
// away) asks again on the clock, and so still records the exit.
func TestAWatchThatLostItsSignalAsksAgain(t *testing.T) {
	h := newHarness(t)
	h.rt.FailWait(errors.New("engine went away"))
	h.create(provider.CreateRequest{ID: "w"})
	require.NoError(t, h.clk.BlockUntilWaiters(context.Background(), 2), "the reaper and the watch's pause")
	h.rt.Kill(h.handle("w"), "killed: signal SIGKILL")
	h.rt.FailWait(nil)
	h.clk.Advance(watchRetryMin)
	h.eventually(func() bool { return h.get("w").State == provider.StateStopped }, "the exit is recorded")
	assert.Equal(t, "killed: signal SIGKILL", h.get("w").ErrorReason)
}

// Refreshes move the idle clock at once in memory and reach the disk with
// the next flush, however many there were, and Close writes what is
// pending.
func TestRefreshesAreWrittenInBatches(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	created := h.create(provider.CreateRequest{ID: "busy"})
	for range 10 {
		h.clk.Advance(time.Millisecond)
		require.NoError(t, h.m.RefreshActivity(ctx, "busy"))
	}
	last := h.clk.Now()
	assert.Equal(t, last, h.get("busy").LastActivityAt, "in memory at once")
	assert.True(t, created.LastActivityAt.Equal(readRecord(t, h.root, "busy").LastActivityAt), "not on disk yet")

	h.clk.Advance(h.m.flush.every)
	assert.True(t, last.Equal(readRecord(t, h.root, "busy").LastActivityAt), "written by the flush")

	h.clk.Advance(time.Second)
	require.NoError(t, h.m.RefreshActivity(ctx, "busy"))
	pending := h.clk.Now()
	h.m.Close()
	assert.True(t, pending.Equal(readRecord(t, h.root, "busy").LastActivityAt), "Close writes what is pending")
	h.m = nil
	h.restart()
	assert.True(t, pending.Equal(h.get("busy").LastActivityAt))
}

// A state change writes its record whole, with the latest activity, at
// once: a crash right after it loses neither.
func TestAStateChangeWritesThePendingActivity(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "s", AutoStopInterval: ptr(30)})
	h.clk.Advance(time.Second)
	require.NoError(t, h.m.RefreshActivity(ctx, "s"))
	refreshed := h.clk.Now()
	_, err := h.m.SetAutoStopInterval(ctx, "s", 5)
	require.NoError(t, err)
	r := readRecord(t, h.root, "s")
	assert.Equal(t, 5, r.AutoStopInterval)
	assert.True(t, refreshed.Equal(r.LastActivityAt))
}

// logLine closes seen once a log line containing want is written.
type logLine struct {
	want string
	once sync.Once
	seen chan struct{}
}

func logged(want string) *logLine { return &logLine{want: want, seen: make(chan struct{})} }

func (l *logLine) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

func (l *logLine) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
