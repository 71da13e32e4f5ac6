package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
)

type sseClient struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

func openEvents(t *testing.T, ts *httptest.Server, query, lastID string) *sseClient {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+"/v1/events"+query, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &sseClient{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next reads one event, checking that the SSE id and event name agree with
// the data.
func (c *sseClient) next() provider.Event {
	c.t.Helper()
	var id, name string
	for c.sc.Scan() {
		line := c.sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var ev provider.Event
			require.NoError(c.t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev))
			assert.Equal(c.t, strconv.FormatInt(ev.Seq, 10), id)
			assert.Equal(c.t, string(ev.Type), name)
			return ev
		}
	}
	c.t.Fatalf("stream ended: %v", c.sc.Err())
	return provider.Event{}
}

func (c *sseClient) nextOf(t provider.EventType) provider.Event {
	c.t.Helper()
	for {
		if ev := c.next(); ev.Type == t {
			return ev
		}
	}
}

func TestEventsSnapshotThenChanges(t *testing.T) {
	ts, m := newTestServer(t, "")
	ctx := context.Background()
	_, err := m.Create(ctx, provider.CreateRequest{Name: "before", Labels: map[string]string{"origin": "cli"}})
	require.NoError(t, err)
	all := openEvents(t, ts, "", "")
	cli := openEvents(t, ts, "?label.origin=cli", "")

	snap := all.next()
	require.Equal(t, provider.EventSandboxesReplaced, snap.Type)
	require.Len(t, snap.Sandboxes, 1)
	assert.Equal(t, "before", snap.Sandboxes[0].Name)
	assert.Equal(t, provider.EventSandboxesReplaced, cli.next().Type)

	_, err = m.Create(ctx, provider.CreateRequest{Name: "web", Labels: map[string]string{"origin": "web-ui"}})
	require.NoError(t, err)
	require.NoError(t, m.RefreshActivity(ctx, "before"))
	_, err = m.Stop(ctx, "before")
	require.NoError(t, err)
	require.NoError(t, m.Delete(ctx, "before"))

	var got []string
	for len(got) < 7 {
		ev := all.next()
		got = append(got, string(ev.Type)+" "+ev.Sandbox.Name+" "+ev.Source)
		assert.Greater(t, ev.Seq, snap.Seq)
	}
	assert.Equal(t, []string{
		"sandbox.created web ", "sandbox.started web ", "sandbox.activity web mutation",
		"sandbox.activity before refresh",
		"sandbox.stopped before ", "sandbox.activity before mutation",
		"sandbox.deleted before ",
	}, got)

	// The filtered stream never saw the web-ui sandbox.
	ev := cli.next()
	assert.Equal(t, "before", ev.Sandbox.Name)
	assert.Equal(t, provider.EventActivity, ev.Type)
}

func TestEventsResumeFromLastEventID(t *testing.T) {
	ts, m := newTestServer(t, "")
	ctx := context.Background()
	first := openEvents(t, ts, "", "")
	first.next()
	_, err := m.Create(ctx, provider.CreateRequest{Name: "a"})
	require.NoError(t, err)
	created := first.nextOf(provider.EventCreated)
	first.resp.Body.Close()

	// Missed while disconnected:
	_, err = m.Stop(ctx, "a")
	require.NoError(t, err)

	resumed := openEvents(t, ts, "", strconv.FormatInt(created.Seq, 10))
	ev := resumed.next()
	assert.Equal(t, provider.EventStarted, ev.Type, "replay continues right after the last id, no snapshot")
	assert.Equal(t, created.Seq+1, ev.Seq)
	assert.Equal(t, provider.EventStopped, resumed.nextOf(provider.EventStopped).Type)

	stale := openEvents(t, ts, "", "1")
	assert.Equal(t, provider.EventSandboxesReplaced, stale.next().Type, "an id the ring no longer covers gets a snapshot")
	future := openEvents(t, ts, "", strconv.FormatInt(created.Seq+1_000_000, 10))
	assert.Equal(t, provider.EventSandboxesReplaced, future.next().Type, "an id from another daemon gets a snapshot")

	req, _ := http.NewRequest("GET", ts.URL+"/v1/events", nil)
	req.Header.Set("Last-Event-ID", "abc")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode)
}

func TestSlowConsumerIsCutOffNotWaitedFor(t *testing.T) {
	h := NewHub(nil)
	sub, _, _, _ := h.subscribe(0, false, manager.Filter{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < subBuffer+10; i++ {
			h.Publish(manager.Event{Type: provider.EventActivity, Time: time.Now()})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("publishing blocked on a consumer that does not read")
	}
	select {
	case <-sub.lagged:
	default:
		t.Fatal("the lagging consumer was not cut off")
	}
	assert.Equal(t, subBuffer+10, h.ring.len())
}

func TestRingKeepsTheLatest(t *testing.T) {
	h := NewHub(nil)
	for i := 0; i < ringSize+5; i++ {
		h.Publish(manager.Event{Type: provider.EventActivity})
	}
	require.Equal(t, ringSize, h.ring.len())
	assert.Equal(t, h.seq, h.ring.at(ringSize-1).Seq)
	assert.Equal(t, h.seq-ringSize+1, h.ring.at(0).Seq)
	for i := 1; i < ringSize; i++ {
		require.Equal(t, h.ring.at(i-1).Seq+1, h.ring.at(i).Seq, "oldest first, consecutive")
	}
	_, replay, fresh, _ := h.subscribe(h.seq-3, true, manager.Filter{})
	assert.False(t, fresh)
	require.Len(t, replay, 3)
	assert.Equal(t, []int64{h.seq - 2, h.seq - 1, h.seq}, []int64{replay[0].Seq, replay[1].Seq, replay[2].Seq})
	_, replay, fresh, _ = h.subscribe(h.seq-ringSize, true, manager.Filter{})
	assert.False(t, fresh, "the oldest event in the ring is still replayed")
	assert.Len(t, replay, ringSize)
	_, _, fresh, _ = h.subscribe(h.seq-ringSize-1, true, manager.Filter{})
	assert.True(t, fresh)
}
