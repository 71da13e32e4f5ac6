package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

const (
	retryBaseDelay = 250 * time.Millisecond
	retryMaxDelay  = 5 * time.Second
	// maxRetryAfter is the longest Retry-After worth waiting for; a longer
	// one is handed to the caller as resource_exhausted.
	maxRetryAfter = time.Minute
)

type (
	sentOnceKey  struct{}
	noRetriesKey struct{}
)

// withoutRetries makes ctx's requests single attempts.
func withoutRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRetriesKey{}, true)
}

// sentOnce marks ctx's requests as ones the server may act on only once (a
// create): they are retried only when the server cannot have acted yet, that
// is when the connection was refused or a rate limit turned them away.
func sentOnce(ctx context.Context) context.Context {
	return context.WithValue(ctx, sentOnceKey{}, true)
}

// retryTransport retries transient failures with backoff on the clock:
// refused connections, 429 (after its Retry-After), 5xx and connections that
// broke mid-request.
type retryTransport struct {
	base    http.RoundTripper
	clk     clock.Clock
	retries int
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	once := ctx.Value(sentOnceKey{}) != nil
	retries := t.retries
	if ctx.Value(noRetriesKey{}) != nil {
		retries = 0
	}
	delay := retryBaseDelay
	for attempt := 0; ; attempt++ {
		try := req
		if attempt > 0 {
			if req.Body != nil && req.Body != http.NoBody {
				if req.GetBody == nil {
					return nil, errors.New("cannot retry a request whose body cannot be replayed")
				}
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				try = req.Clone(ctx)
				try.Body = body
			}
		}
		resp, err := t.base.RoundTrip(try)
		wait, again := t.decide(resp, err, once)
		if !again || attempt >= retries || ctx.Err() != nil {
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if wait == 0 {
			wait = delay
			delay = min(2*delay, retryMaxDelay)
		}
		if err := clock.Sleep(ctx, t.clk, wait); err != nil {
			return nil, err
		}
	}
}

// decide says whether an outcome is worth another attempt, and how long the
// server asked to wait (0 for the transport's own backoff).
func (t *retryTransport) decide(resp *http.Response, err error, once bool) (time.Duration, bool) {
	if err != nil {
		var oe *net.OpError
		var dns *net.DNSError
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return 0, false
		case errors.As(err, &dns):
			return 0, false // a misspelt host does not heal
		case errors.As(err, &oe) && oe.Op == "dial":
			return 0, true // never reached the server
		}
		return 0, !once // reset or broken: the server may have acted
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		wait, limit := retryAfter(resp, t.clk)
		return wait, limit == "" // the rate limit turns requests away before they act
	case resp.StatusCode >= 500:
		wait, _ := retryAfter(resp, t.clk)
		return wait, !once
	}
	return 0, false
}

// retryAfter reads Retry-After in seconds or as an HTTP date. A missing
// header is 0 and fine. When the wait is not worth it, limit names what it
// exceeds: maxRetryAfter, or the deadline of the request's context.
func retryAfter(resp *http.Response, clk clock.Clock) (wait time.Duration, limit string) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, ""
	}
	if s, err := strconv.Atoi(v); err == nil {
		wait = time.Duration(s) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		wait = at.Sub(clk.Now())
	}
	switch {
	case wait <= 0:
		return 0, ""
	case wait > maxRetryAfter:
		return wait, fmt.Sprintf("the %s sandplane waits at most", maxRetryAfter)
	}
	if resp.Request == nil {
		return wait, ""
	}
	if dl, ok := resp.Request.Context().Deadline(); ok && time.Until(dl) < wait {
		return wait, "the deadline of the call"
	}
	return wait, ""
}

// rateLimitMessage explains a 429 handed back to the caller: the retries
// ran out, or Daytona asked to wait longer than the call may, and so it
// was not retried at all.
func rateLimitMessage(resp *http.Response, clk clock.Clock, retries int, msg string) string {
	if wait, limit := retryAfter(resp, clk); limit != "" {
		return fmt.Sprintf("Daytona's rate limit asks to wait %s (Retry-After), longer than %s, so the request was not retried: try again later: %s",
			wait.Round(time.Second), limit, msg)
	}
	return fmt.Sprintf("Daytona's rate limit held after %d retries: %s", retries, msg)
}
