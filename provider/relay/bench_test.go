package relay

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"testing"
	"time"
)

// staticResolver serves one upstream with a 15-minute interval, and its
// refreshes cost nothing: what is measured is the relay's own work.
type staticResolver struct{ t Target }

func (s staticResolver) Resolve(context.Context, string, int) (Target, error) { return s.t, nil }
func (staticResolver) RefreshActivity(context.Context, string) error          { return nil }

// paths are the three ways to the same upstream, each with its own client
// and kept-alive connection.
type paths struct {
	direct, bare, relay string
	host                string // the relay's Host for the sandbox
	client              *http.Client
}

func benchPaths(b *testing.B, up http.Handler) *paths {
	b.Helper()
	upSrv := httptest.NewServer(up)
	b.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)

	transport := func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy, t.MaxIdleConnsPerHost = nil, 64
		return t
	}
	bare := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
		Transport: transport(),
	})
	b.Cleanup(bare.Close)

	rl, err := New(staticResolver{Target{ID: "bench", URL: u, AutoStop: 15 * time.Minute, Minute: time.Minute}},
		WithTransport(transport()))
	if err != nil {
		b.Fatal(err)
	}
	relaySrv := httptest.NewServer(rl)
	b.Cleanup(func() { relaySrv.Close(); _ = rl.Close() })
	return &paths{
		direct: upSrv.URL, bare: bare.URL, relay: relaySrv.URL, host: "3000-bench.localhost",
		client: &http.Client{Transport: transport()},
	}
}

// sample times n requests on each path, interleaved in a rotating order so
// that neither position nor drift favours one path. f returns one request's
// figure.
func sample(b *testing.B, p *paths, n int, f func(url, host string) time.Duration) (direct, bare, relay []time.Duration) {
	b.Helper()
	for i := 0; i < n+n/10; i++ {
		calls := []func(){
			func() { d := f(p.direct, ""); direct = append(direct, d) },
			func() { d := f(p.bare, ""); bare = append(bare, d) },
			func() { d := f(p.relay, p.host); relay = append(relay, d) },
		}
		for j := range calls {
			calls[(i+j)%len(calls)]()
		}
		if i == n/10-1 { // the first tenth warms connections and caches
			direct, bare, relay = nil, nil, nil
		}
	}
	return direct, bare, relay
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// versus reports subject beside baseline in the form internal/benchreport
// prints as a ratio.
func versus(b *testing.B, name string, subject, baseline time.Duration) {
	b.Run(name, func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(subject)/1e6, "ms/op-subject")
		b.ReportMetric(float64(baseline)/1e6, "ms/op-baseline")
		b.ReportMetric(float64(subject)/float64(baseline), "x-baseline")
		b.ReportMetric(float64(subject)/1e3, "us-relay")
		b.ReportMetric(float64(baseline)/1e3, "us-baseline")
	})
}

const benchSamples = 4000

// BenchmarkLatency times a small GET through the relay, through a bare
// httputil.ReverseProxy and straight to the upstream, in the same run, and
// reports the relay's median and p99 against each.
func BenchmarkLatency(b *testing.B) {
	p := benchPaths(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	get := func(base, host string) time.Duration {
		req, _ := http.NewRequest("GET", base+"/x", nil)
		if host != "" {
			req.Host = host
		}
		start := time.Now()
		resp, err := p.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d", base, resp.StatusCode)
		}
		return d
	}
	direct, bare, relay := sample(b, p, benchSamples, get)
	versus(b, "p50-vs-proxy", quantile(relay, 0.5), quantile(bare, 0.5))
	versus(b, "p99-vs-proxy", quantile(relay, 0.99), quantile(bare, 0.99))
	versus(b, "p50-vs-direct", quantile(relay, 0.5), quantile(direct, 0.5))
	versus(b, "p99-vs-direct", quantile(relay, 0.99), quantile(direct, 0.99))
}

// BenchmarkStreamTTFB times the first event of an SSE response
// that goes on after it: a relay that buffered would add the rest's time.
func BenchmarkStreamTTFB(b *testing.B) {
	p := benchPaths(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select { // the rest of the stream comes much later
		case <-time.After(5 * time.Millisecond):
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "data: last\n\n")
	}))
	ttfb := func(base, host string) time.Duration {
		req, _ := http.NewRequest("GET", base+"/events", nil)
		if host != "" {
			req.Host = host
		}
		start := time.Now()
		resp, err := p.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		d := time.Since(start)
		if err != nil || line != "data: first\n" {
			b.Fatalf("%s: %q %v", base, line, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return d
	}
	direct, bare, relay := sample(b, p, benchSamples/8, ttfb)
	versus(b, "p50-vs-proxy", quantile(relay, 0.5), quantile(bare, 0.5))
	versus(b, "p50-vs-direct", quantile(relay, 0.5), quantile(direct, 0.5))
}
