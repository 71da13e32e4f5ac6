package webhooks_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/simulator/internal/webhooks"
)

// delivery is what the receiver got.
type delivery struct {
	id, timestamp string
	body          map[string]any
	verified      error
}

// receiver verifies every delivery with Svix's own library, as a host's
// handler would, and answers the statuses it is given in turn (then 204).
type receiver struct {
	srv     *httptest.Server
	secret  string
	mu      sync.Mutex
	got     []delivery
	answers []int
	arrived chan struct{}
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	r := &receiver{answers: answers, arrived: make(chan struct{}, 64)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	wh, err := svix.NewWebhook(r.secret)
	if err == nil {
		// The fake clock may be hours ahead of the tolerance Verify
		// applies; the test checks the timestamp itself.
		err = wh.VerifyIgnoringTimestamp(body, req.Header)
	}
	d := delivery{id: req.Header.Get("svix-id"), timestamp: req.Header.Get("svix-timestamp"), verified: err}
	_ = json.Unmarshal(body, &d.body)
	r.mu.Lock()
	r.got = append(r.got, d)
	status := http.StatusNoContent
	if len(r.answers) > 0 {
		status, r.answers = r.answers[0], r.answers[1:]
	}
	r.mu.Unlock()
	w.WriteHeader(status)
	r.arrived <- struct{}{}
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func newDispatcher(t *testing.T, clk *clocktest.Fake, r *receiver, fault func(webhooks.Message) (webhooks.Fault, bool)) *webhooks.Dispatcher {
	t.Helper()
	d, err := webhooks.New(webhooks.Config{Endpoints: []string{r.srv.URL + "/hook"}, Clock: clk, Fault: fault})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	r.secret = d.Secret()
	return d
}

var payload = map[string]any{"event": "sandbox.state.updated", "id": "sb-1", "oldState": "started", "newState": "stopped"}

// waitAttempts waits until the log holds n attempts.
func waitAttempts(t *testing.T, d *webhooks.Dispatcher, n int) []webhooks.Attempt {
	t.Helper()
	require.Eventually(t, func() bool { return len(d.Attempts()) >= n }, 10*time.Second, 5*time.Millisecond)
	return d.Attempts()
}

func TestDeliveryIsSignedAsSvixSigns(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	r := newReceiver(t)
	d := newDispatcher(t, clk, r, nil)
	id, err := d.Send(webhooks.Message{Org: "org-1", EventType: "sandbox.state.updated", Payload: payload})
	require.NoError(t, err)
	<-r.arrived
	got := r.deliveries()
	require.Len(t, got, 1)
	assert.NoError(t, got[0].verified, "Svix's library verifies it")
	assert.Equal(t, id, got[0].id)
	assert.Regexp(t, `^msg_[A-Za-z0-9_-]{27}$`, id)
	assert.Equal(t, strconv.FormatInt(clk.Now().Unix(), 10), got[0].timestamp)
	assert.Equal(t, "stopped", got[0].body["newState"])
	a := waitAttempts(t, d, 1)
	assert.Equal(t, "succeeded", a[0].Status)
	assert.Equal(t, 204, a[0].ResponseStatus)

	wh, err := svix.NewWebhook(webhooks.NewSecret())
	require.NoError(t, err)
	req := httptest.NewRequest("POST", "/", nil)
	req.Header.Set("svix-id", got[0].id)
	req.Header.Set("svix-timestamp", got[0].timestamp)
	req.Header.Set("svix-signature", webhooks.Sign([]byte("another key, 16+"), got[0].id, got[0].timestamp, []byte("{}")))
	assert.Error(t, wh.Verify([]byte("{}"), req.Header), "another secret's signature fails")
}

// A delivery the receiver refuses, or one a fault drops, is retried on
// Svix's schedule with the same svix-id and a new signature; a duplicating
// fault delivers one svix-id twice; a delaying one holds it back.
func TestRetriesAndFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []int
		fault   *webhooks.Fault
		// advances are the clock steps after which one more delivery
		// reaches the receiver.
		advances []time.Duration
		statuses []string
	}{
		{name: "a 500 then success", answers: []int{500},
			advances: []time.Duration{0, 5 * time.Second}, statuses: []string{"failed", "succeeded"}},
		{name: "two refusals", answers: []int{503, 400},
			advances: []time.Duration{0, 5 * time.Second, 5 * time.Minute}, statuses: []string{"failed", "failed", "succeeded"}},
		{name: "a dropped attempt", fault: &webhooks.Fault{Drop: true},
			advances: []time.Duration{5 * time.Second}, statuses: []string{"dropped", "succeeded"}},
		{name: "a duplicate", fault: &webhooks.Fault{Duplicate: true},
			advances: []time.Duration{0, 0}, statuses: []string{"succeeded", "succeeded"}},
		{name: "a delay", fault: &webhooks.Fault{Delay: 3 * time.Second},
			advances: []time.Duration{3 * time.Second}, statuses: []string{"succeeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.Now())
			r := newReceiver(t, tc.answers...)
			var once sync.Once
			fault := func(webhooks.Message) (webhooks.Fault, bool) {
				hit := false
				once.Do(func() { hit = tc.fault != nil })
				if hit {
					return *tc.fault, true
				}
				return webhooks.Fault{}, false
			}
			d := newDispatcher(t, clk, r, fault)
			id, err := d.Send(webhooks.Message{Org: "org-1", EventType: "sandbox.created", Payload: payload})
			require.NoError(t, err)
			for i, step := range tc.advances {
				if step > 0 {
					require.NoError(t, clk.BlockUntilWaiters(t.Context(), 1))
					clk.Advance(step)
				}
				select {
				case <-r.arrived:
				case <-time.After(10 * time.Second):
					t.Fatalf("delivery %d never arrived", i+1)
				}
			}
			attempts := waitAttempts(t, d, len(tc.statuses))
			var statuses, sent []string
			for _, a := range attempts {
				statuses = append(statuses, a.Status)
				assert.Equal(t, id, a.MessageID)
				if a.Status != "dropped" {
					sent = append(sent, strconv.FormatInt(a.At.Unix(), 10))
				}
			}
			assert.Equal(t, tc.statuses, statuses)
			var stamps []string
			for _, g := range r.deliveries() {
				assert.Equal(t, id, g.id, "one svix-id for every attempt")
				assert.NoError(t, g.verified)
				stamps = append(stamps, g.timestamp)
			}
			assert.Equal(t, sent, stamps, "each attempt signed when sent")
		})
	}
}

// After the last attempt of the schedule the message is failed, and nothing
// more is sent.
func TestScheduleEnds(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	answers := make([]int, 20)
	for i := range answers {
		answers[i] = 500
	}
	r := newReceiver(t, answers...)
	d := newDispatcher(t, clk, r, nil)
	_, err := d.Send(webhooks.Message{Org: "org-1", EventType: "volume.created", EventID: "ev-1", Payload: payload})
	require.NoError(t, err)
	<-r.arrived
	for _, wait := range webhooks.Schedule {
		require.NoError(t, clk.BlockUntilWaiters(t.Context(), 1))
		clk.Advance(wait)
		<-r.arrived
	}
	attempts := waitAttempts(t, d, len(webhooks.Schedule)+1)
	require.Len(t, attempts, len(webhooks.Schedule)+1, "the first and one per step")
	assert.Equal(t, len(webhooks.Schedule)+1, attempts[len(attempts)-1].Attempt)
	assert.Equal(t, "ev-1", attempts[0].EventID)
	require.Eventually(t, func() bool { return clk.Waiters() == 0 }, 10*time.Second, 5*time.Millisecond, "no retry is left")
}

// Close cancels retries still to come.
func TestCloseCancelsRetries(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	r := newReceiver(t, 500)
	d := newDispatcher(t, clk, r, nil)
	_, err := d.Send(webhooks.Message{Org: "org-1", EventType: "sandbox.created", Payload: payload})
	require.NoError(t, err)
	<-r.arrived
	require.NoError(t, clk.BlockUntilWaiters(t.Context(), 1))
	d.Close()
	assert.Equal(t, 0, clk.Waiters())
	clk.Advance(time.Hour)
	assert.Len(t, r.deliveries(), 1)
}

func TestConfigIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  webhooks.Config
		want string
	}{
		{name: "a secret without its prefix", cfg: webhooks.Config{Secret: "abc"}, want: "whsec_"},
		{name: "a short key", cfg: webhooks.Config{Secret: "whsec_YWJj"}, want: "16 to 64"},
		{name: "an endpoint that is no URL", cfg: webhooks.Config{Endpoints: []string{"localhost:8080"}}, want: "http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhooks.New(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
