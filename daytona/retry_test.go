package daytona

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/simulator"
)

func TestRetries(t *testing.T) {
	tests := []struct {
		name    string
		faults  []simulator.Fault
		opts    []Option
		code    provider.ErrorCode
		ops     []string
		minWait time.Duration
		// deadline, when set, bounds the caller's context (real time).
		deadline time.Duration
		// msg is part of the error's message.
		msg string
	}{
		{
			name:    "429 waits for its Retry-After",
			faults:  []simulator.Fault{{Op: "getSandbox", Status: 429, RetryAfter: 3, Times: 1}},
			ops:     []string{"getSandbox", "getSandbox"},
			minWait: 3 * time.Second,
		},
		{
			name:   "5xx backs off and retries",
			faults: []simulator.Fault{{Op: "getSandbox", Status: 503, Times: 2}},
			ops:    []string{"getSandbox", "getSandbox", "getSandbox"},
			// 250 ms then 500 ms
			minWait: 750 * time.Millisecond,
		},
		{
			name:   "retries run out",
			faults: []simulator.Fault{{Op: "getSandbox", Status: 502}},
			opts:   []Option{WithRetries(2)},
			code:   provider.Unavailable,
			ops:    []string{"getSandbox", "getSandbox", "getSandbox"},
		},
		{
			name:   "a Retry-After too long is not waited for",
			faults: []simulator.Fault{{Op: "getSandbox", Status: 429, RetryAfter: 3600}},
			code:   provider.ResourceExhausted,
			ops:    []string{"getSandbox"},
			msg:    "asks to wait 1h0m0s (Retry-After), longer than the 1m0s sandplane waits at most, so the request was not retried",
		},
		{
			name:     "a Retry-After beyond the caller's deadline is not waited for",
			faults:   []simulator.Fault{{Op: "getSandbox", Status: 429, RetryAfter: 50}},
			deadline: 30 * time.Second,
			code:     provider.ResourceExhausted,
			ops:      []string{"getSandbox"},
			msg:      "asks to wait 50s (Retry-After), longer than the deadline of the call",
		},
		{
			name:   "a rate limit that holds says how often it was retried",
			faults: []simulator.Fault{{Op: "getSandbox", Status: 429, RetryAfter: 1}},
			opts:   []Option{WithRetries(2)},
			code:   provider.ResourceExhausted,
			ops:    []string{"getSandbox", "getSandbox", "getSandbox"},
			msg:    "held after 2 retries",
		},
		{
			name:   "client errors are final",
			faults: []simulator.Fault{{Op: "getSandbox", Status: 409}},
			code:   provider.FailedPrecondition,
			ops:    []string{"getSandbox"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			_, err := h.p.Create(context.Background(), provider.CreateRequest{Name: "box"})
			require.NoError(t, err)
			p := h.provider(testKey, nil, tt.opts...)
			for _, f := range tt.faults {
				h.sim.AddFault(f)
			}
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			start := h.clk.Now()
			err = drive(h.clk, func() error { _, err := p.Get(ctx, "box"); return err })
			assert.Equal(t, tt.code, provider.Code(err), "%v", err)
			if tt.msg != "" {
				assert.Contains(t, provider.Message(err), tt.msg)
			}
			assert.Equal(t, append([]string{"createSandbox"}, tt.ops...), h.ops())
			assert.GreaterOrEqual(t, h.clk.Since(start), tt.minWait, "waits run on the clock")
		})
	}
}

// lose is a transport that forwards every request but loses the answer of
// the first one that matches, as a reset connection would.
func lose(match func(*http.Request) bool) http.RoundTripper {
	var lost atomic.Bool
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && match(r) && lost.CompareAndSwap(false, true) {
			resp.Body.Close()
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		}
		return resp, err
	})
}

// refuseFirst is a transport whose first request finds nobody listening.
func refuseFirst() http.RoundTripper {
	var refused atomic.Bool
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if refused.CompareAndSwap(false, true) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return http.DefaultTransport.RoundTrip(r)
	})
}

func isCreate(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/api/sandbox"
}

func TestCreateIsNeverRetriedBlindly(t *testing.T) {
	tests := []struct {
		name  string
		req   provider.CreateRequest
		fault *simulator.Fault
		rt    func() http.RoundTripper
		pre   func(h *harness)
		code  provider.ErrorCode
		ops   []string
		count int
	}{
		{
			name:  "a 5xx of a named create looks the name up first",
			req:   provider.CreateRequest{Name: "box"},
			fault: &simulator.Fault{Op: "createSandbox", Status: 503, Times: 1},
			ops:   []string{"createSandbox", "getSandbox", "createSandbox"},
			count: 1,
		},
		{
			name:  "a 5xx of an unnamed create is handed back",
			fault: &simulator.Fault{Op: "createSandbox", Status: 503, Times: 1},
			code:  provider.Unavailable,
			ops:   []string{"createSandbox"},
		},
		{
			name:  "a create whose answer was lost is adopted, not repeated",
			req:   provider.CreateRequest{Name: "box"},
			rt:    func() http.RoundTripper { return lose(isCreate) },
			ops:   []string{"createSandbox", "getSandbox"},
			count: 1,
		},
		{
			name: "a lost create is not confused with another sandbox of the name",
			pre: func(h *harness) {
				_, err := h.p.Create(context.Background(), provider.CreateRequest{Name: "box", Labels: map[string]string{"owner": "other"}})
				require.NoError(h.t, err)
			},
			req:   provider.CreateRequest{Name: "box", Labels: map[string]string{"owner": "me"}},
			rt:    func() http.RoundTripper { return lose(isCreate) },
			code:  provider.AlreadyExists,
			ops:   []string{"createSandbox", "createSandbox", "getSandbox"},
			count: 1,
		},
		{
			name: "a lost unnamed create is not repeated",
			rt:   func() http.RoundTripper { return lose(isCreate) },
			code: provider.Unavailable,
			ops:  []string{"createSandbox"},
			// It happened, but nobody knows its id.
			count: 1,
		},
		{
			name:  "a refused connection never reached the server",
			rt:    refuseFirst,
			ops:   []string{"createSandbox"},
			count: 1,
		},
		{
			name:  "a rate limit turned the create away before it acted",
			fault: &simulator.Fault{Op: "createSandbox", Status: 429, Times: 1},
			ops:   []string{"createSandbox", "createSandbox"},
			count: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			var rt http.RoundTripper
			if tt.rt != nil {
				rt = tt.rt()
			}
			if tt.pre != nil {
				tt.pre(h)
			}
			p := h.provider(testKey, rt)
			if tt.fault != nil {
				h.sim.AddFault(*tt.fault)
			}
			err := drive(h.clk, func() error { _, err := p.Create(context.Background(), tt.req); return err })
			assert.Equal(t, tt.code, provider.Code(err), "%v", err)
			list, lerr := h.p.List(context.Background(), provider.ListOptions{})
			require.NoError(t, lerr)
			assert.Len(t, list, tt.count, "sandboxes that exist")
			assert.Equal(t, tt.ops, h.ops()[:len(tt.ops)])
			assert.Len(t, h.ops(), len(tt.ops)+1, "and the list")
		})
	}
}

func TestUnreachableIsUnavailableAfterRetries(t *testing.T) {
	h := newHarness(t)
	var attempts atomic.Int32
	p := h.provider(testKey, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}))
	err := drive(h.clk, func() error { _, err := p.Create(context.Background(), provider.CreateRequest{}); return err })
	assert.Equal(t, provider.Unavailable, provider.Code(err))
	assert.Contains(t, provider.Message(err), EnvAPIURL, "says what to check")
	assert.Equal(t, int32(DefaultRetries+1), attempts.Load())
}

// A start, stop or delete whose answer was lost may have acted: sending it
// again meets Daytona's 409 (state change in progress) or, once the
// transition is over, 400 (not stoppable). The operation went through, so
// the provider must not report it failed.
func TestLostLifecycleAnswerIsNotAFailure(t *testing.T) {
	path := func(suffix string) func(*http.Request) bool {
		return func(r *http.Request) bool {
			return r.Method != http.MethodGet && strings.HasSuffix(r.URL.Path, suffix) && r.URL.Path != "/api/sandbox"
		}
	}
	tests := []struct {
		name    string
		profile simulator.Profile
		match   func(*http.Request) bool
		run     func(p *Provider, id string) error
		want    provider.State
	}{
		{"stop, instant", simulator.InstantProfile(), path("/stop"), stopOf, provider.StateStopped},
		{"stop, slow", simulator.DaytonaProfile(), path("/stop"), stopOf, provider.StateStopped},
		{"start, slow", simulator.DaytonaProfile(), path("/start"), startOf, provider.StateStarted},
		{"delete, slow", simulator.DaytonaProfile(), func(r *http.Request) bool { return r.Method == http.MethodDelete }, deleteOf, provider.StateDestroyed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, tt.profile)
			sb := drive(h.clk, func() *provider.Sandbox {
				sb, err := h.p.Create(context.Background(), provider.CreateRequest{Name: "box"})
				require.NoError(t, err)
				return sb
			})
			if tt.want == provider.StateStarted {
				require.NoError(t, drive(h.clk, func() error { return stopOf(h.p, sb.ID) }))
			}
			p := h.provider(testKey, lose(tt.match))
			err := drive(h.clk, func() error { return tt.run(p, sb.ID) })
			require.NoError(t, err)
			got, err := h.p.Get(context.Background(), sb.ID)
			if tt.want == provider.StateDestroyed {
				assert.True(t, provider.IsNotFound(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.State)
		})
	}
}

func stopOf(p *Provider, id string) error   { _, err := p.Stop(context.Background(), id); return err }
func startOf(p *Provider, id string) error  { _, err := p.Start(context.Background(), id); return err }
func deleteOf(p *Provider, id string) error { return p.Delete(context.Background(), id) }

// A 5xx may come after Daytona acted, so a stop is read back before it is
// sent again, and sent again only when it did not take.
func TestLifecycle5xxIsReadBackThenResent(t *testing.T) {
	h := newHarness(t)
	sb := drive(h.clk, func() *provider.Sandbox {
		sb, err := h.p.Create(context.Background(), provider.CreateRequest{Name: "box"})
		require.NoError(t, err)
		return sb
	})
	h.sim.AddFault(simulator.Fault{Op: "stopSandbox", Status: 503, Times: 1})
	start := h.clk.Now()
	require.NoError(t, drive(h.clk, func() error { return stopOf(h.p, sb.ID) }))
	assert.Equal(t, []string{"createSandbox", "stopSandbox", "getSandbox", "stopSandbox"}, h.ops()[:4])
	assert.GreaterOrEqual(t, h.clk.Since(start), retryBaseDelay, "the resend backs off on the clock")
	got, err := h.p.Get(context.Background(), sb.ID)
	require.NoError(t, err)
	assert.Equal(t, provider.StateStopped, got.State)
}
