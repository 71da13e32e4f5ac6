package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchSim is a simulator on loopback with the none backend, the instant
// profile and request validation on, as `sandplane sim --backend none` runs.
func benchSim(b *testing.B) (*Simulator, *httptest.Server, *http.Client) {
	b.Helper()
	sim, err := New(Config{Seed: 1})
	require.NoError(b, err)
	srv := httptest.NewServer(sim.Handler())
	b.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return sim, srv, client
}

func do(b *testing.B, c *http.Client, method, url string, body []byte, want int) []byte {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer bench")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, out)
	}
	return out
}

// parallel runs n calls of f on workers goroutines.
func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

const benchWorkers = 8

// BenchmarkSimCreateGetDelete measures whole lifecycles (create, get,
// delete: three validated requests) per second over loopback HTTP.
func BenchmarkSimCreateGetDelete(b *testing.B) {
	_, srv, c := benchSim(b)
	const batch = 200
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		parallel(batch, benchWorkers, func(int) {
			out := do(b, c, "POST", srv.URL+"/api/sandbox", []byte(`{"labels":{"bench":"1"}}`), 200)
			var sb struct{ ID string }
			if err := json.Unmarshal(out, &sb); err != nil {
				b.Fatal(err)
			}
			do(b, c, "GET", srv.URL+"/api/sandbox/"+sb.ID, nil, 200)
			do(b, c, "DELETE", srv.URL+"/api/sandbox/"+sb.ID, nil, 200)
		})
	}
	secs := time.Since(start).Seconds()
	lifecycles := float64(b.N * batch)
	b.ReportMetric(lifecycles/secs, "lifecycles/s")
	b.ReportMetric(3*lifecycles/secs, "req/s")
}

// BenchmarkSimRequestsPerSecond compares a simple validated API request
// (GET /api/sandbox/{id}) with a bare net/http handler writing the same
// bytes, over the same loopback, as subject and baseline.
func BenchmarkSimRequestsPerSecond(b *testing.B) {
	_, srv, c := benchSim(b)
	out := do(b, c, "POST", srv.URL+"/api/sandbox", []byte(`{}`), 200)
	var sb struct{ ID string }
	require.NoError(b, json.Unmarshal(out, &sb))
	body := do(b, c, "GET", srv.URL+"/api/sandbox/"+sb.ID, nil, 200)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(body)
	}))
	b.Cleanup(bare.Close)

	const batch = 1000
	var subject, baseline time.Duration
	for b.Loop() {
		t0 := time.Now()
		parallel(batch, benchWorkers, func(int) { do(b, c, "GET", srv.URL+"/api/sandbox/"+sb.ID, nil, 200) })
		t1 := time.Now()
		parallel(batch, benchWorkers, func(int) { do(b, c, "GET", bare.URL+"/api/sandbox/"+sb.ID, nil, 200) })
		subject += t1.Sub(t0)
		baseline += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(b.N*batch)/subject.Seconds(), "req/s")
	b.ReportMetric(float64(b.N*batch)/baseline.Seconds(), "req/s-bare")
	b.ReportMetric(subject.Seconds()*1000/n, "ms/op-subject")
	b.ReportMetric(baseline.Seconds()*1000/n, "ms/op-baseline")
	b.ReportMetric(subject.Seconds()/baseline.Seconds(), "x-baseline")
}

// BenchmarkSimMemory10kSandboxes reports the heap that 10,000 started
// sandboxes take in the none backend. The loop then times one GET among
// them, through the handler.
func BenchmarkSimMemory10kSandboxes(b *testing.B) {
	const n = 10000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sim, err := New(Config{Seed: 1})
	require.NoError(b, err)
	defer sim.Close()
	h := sim.Handler()
	var last string
	for i := 0; i < n; i++ {
		req := httptest.NewRequest("POST", "/api/sandbox", bytes.NewReader([]byte(fmt.Sprintf(`{"name":"sb-%d","labels":{"i":"%d"}}`, i, i))))
		req.Header.Set("Authorization", "Bearer bench")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("create %d: %d %s", i, rec.Code, rec.Body)
		}
		last = fmt.Sprintf("sb-%d", i)
	}
	sim.calls.reset(everyOrg) // the call log is bounded and not part of the sandboxes
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)

	for b.Loop() {
		req := httptest.NewRequest("GET", "/api/sandbox/"+last, nil)
		req.Header.Set("Authorization", "Bearer bench")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
	runtime.KeepAlive(sim)
	b.ReportMetric(heap/(1<<20), "MiB/10k-sandboxes")
	b.ReportMetric(heap/n, "B/sandbox")
}

// BenchmarkSimList100Of10k lists one page of 100 among 10,000 sandboxes.
func BenchmarkSimList100Of10k(b *testing.B) {
	sim, err := New(Config{Seed: 1})
	require.NoError(b, err)
	defer sim.Close()
	h := sim.Handler()
	for i := 0; i < 10000; i++ {
		req := httptest.NewRequest("POST", "/api/sandbox", bytes.NewReader([]byte(`{}`)))
		req.Header.Set("Authorization", "Bearer bench")
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	for b.Loop() {
		req := httptest.NewRequest("GET", "/api/sandbox?limit=100", nil)
		req.Header.Set("Authorization", "Bearer bench")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkSimHandlerGet times one validated GET /api/sandbox/{id} through
// the handler, without the network: the server's own cost per request.
func BenchmarkSimHandlerGet(b *testing.B) {
	sim, err := New(Config{Seed: 1})
	require.NoError(b, err)
	defer sim.Close()
	h := sim.Handler()
	req := httptest.NewRequest("POST", "/api/sandbox", bytes.NewReader([]byte(`{"name":"x"}`)))
	req.Header.Set("Authorization", "Bearer bench")
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(httptest.NewRecorder(), req)
	start := time.Now()
	for b.Loop() {
		req := httptest.NewRequest("GET", "/api/sandbox/x", nil)
		req.Header.Set("Authorization", "Bearer bench")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s-per-core")
}
