package local

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

var _ provider.Watcher = (*Provider)(nil)

// maxReconnectDelay caps the backoff between reconnects of Watch.
const maxReconnectDelay = 5 * time.Second

// Watch streams the daemon's lifecycle events, starting with a
// sandboxes_replaced snapshot. After a dropped connection it reconnects with
// the last sequence number it saw, so the daemon replays what was missed (or
// sends a fresh snapshot when the gap is too old). The first connection is
// made before Watch returns: unavailable when no daemon answers. The channel
// closes when ctx ends or when a reconnect is refused for good (a changed
// token, say).
func (p *Provider) Watch(ctx context.Context, opts provider.WatchOptions) (<-chan provider.Event, error) {
	body, err := p.openStream(ctx, opts, -1)
	if err != nil {
		return nil, err
	}
	ch := make(chan provider.Event, 64)
	go func() {
		defer close(ch)
		last := int64(-1)
		delay := 100 * time.Millisecond
		for {
			if readStream(ctx, body, ch, &last) {
				delay = 100 * time.Millisecond // it worked for a while
			}
			body.Close()
			for {
				if clock.Sleep(ctx, p.clk, delay) != nil {
					return
				}
				delay = min(2*delay, maxReconnectDelay)
				if body, err = p.openStream(ctx, opts, last); err == nil {
					break
				}
				switch provider.Code(err) {
				case provider.Unauthenticated, provider.PermissionDenied, provider.InvalidArgument:
					// Retrying cannot fix these; closing the channel tells the caller.
					p.log.Warn("event stream refused; giving up", "err", err)
					return
				}
				p.log.Debug("reconnect to the event stream", "err", err)
			}
		}
	}()
	return ch, nil
}

func (p *Provider) openStream(ctx context.Context, opts provider.WatchOptions, last int64) (io.ReadCloser, error) {
	q := url.Values{}
	for k, v := range opts.Labels {
		q.Set("label."+k, v)
	}
	u := p.base + "/v1/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, provider.Errorf(provider.InvalidArgument, "%v", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.stream.Do(req)
	if err != nil {
		return nil, p.classify(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, p.check(resp.StatusCode, b, false)
	}
	return resp.Body, nil
}

// readStream delivers events until the stream ends or ctx does. It reports
// whether it delivered any.
func readStream(ctx context.Context, body io.Reader, ch chan<- provider.Event, last *int64) bool {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a snapshot of many sandboxes is one line
	var data strings.Builder
	delivered := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var ev provider.Event
			if err := json.Unmarshal([]byte(data.String()), &ev); err == nil {
				select {
				case ch <- ev:
				case <-ctx.Done():
					return delivered
				}
				*last = ev.Seq
				delivered = true
			}
			data.Reset()
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
		// id: and event: repeat what the data holds; comments keep the line alive.
	}
	return delivered
}
