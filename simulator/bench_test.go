package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// hit is do for a load loop: the body is read to the end into a shared
// buffer, not kept, so that the client's allocations, in this same
// process, do not bill the server's garbage collector.
func hit(b *testing.B, c *http.Client, url string) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer bench")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
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
		req := benchRequest("POST", "/api/sandbox", bytes.NewReader([]byte(fmt.Sprintf(`{"name":"sb-%d","labels":{"i":"%d"}}`, i, i))))
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
		req := benchRequest("GET", "/api/sandbox/"+last, nil)
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

// populate creates n sandboxes through the handler (without the network,
// to be quick) in the bench organization and returns the id of the last.
func populate(b *testing.B, sim *Simulator, n int) string {
	b.Helper()
	h := sim.Handler()
	var id string
	for i := 0; i < n; i++ {
		req := benchRequest("POST", "/api/sandbox", bytes.NewReader([]byte(fmt.Sprintf(`{"labels":{"i":"%d"}}`, i))))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("create %d: %d %s", i, rec.Code, rec.Body)
		}
		var sb struct{ ID string }
		if err := json.Unmarshal(rec.Body.Bytes(), &sb); err != nil {
			b.Fatal(err)
		}
		id = sb.ID
	}
	runtime.GC()
	return id
}

// BenchmarkSimList100Of10k compares a list of one page of 100 among 10,000
// sandboxes (GET /api/sandbox?limit=100, the default sort by activity) with
// a GET by id on the same simulator, as many requests of each over the
// same loopback: subject and baseline, so x-baseline is how many GETs a
// list costs.
func BenchmarkSimList100Of10k(b *testing.B) {
	sim, srv, c := benchSim(b)
	id := populate(b, sim, 10000)
	out := do(b, c, "GET", srv.URL+"/api/sandbox?limit=100", nil, 200)
	var page struct{ Items []json.RawMessage }
	require.NoError(b, json.Unmarshal(out, &page))
	require.Len(b, page.Items, 100)

	const batch = 200
	var subject, baseline time.Duration
	for b.Loop() {
		t0 := time.Now()
		parallel(batch, benchWorkers, func(int) { hit(b, c, srv.URL+"/api/sandbox?limit=100") })
		t1 := time.Now()
		parallel(batch, benchWorkers, func(int) { hit(b, c, srv.URL+"/api/sandbox/"+id) })
		subject += t1.Sub(t0)
		baseline += time.Since(t1)
	}
	reportVersus(b, batch, subject, baseline, "lists/s", "gets/s")
}

// BenchmarkSimGetWhileListing compares GET by id among 10,000 sandboxes
// while two clients list pages of 100 without pause (subject) with the same
// GETs alone (baseline): a list must not hold up a get.
func BenchmarkSimGetWhileListing(b *testing.B) {
	sim, srv, c := benchSim(b)
	id := populate(b, sim, 10000)
	benchGetWhile(b, c, srv.URL+"/api/sandbox/"+id, srv.URL+"/api/sandbox?limit=100")
}

// BenchmarkSimGetWhileBareListing is the floor of
// BenchmarkSimGetWhileListing: the same GETs while two clients fetch the
// same bytes as a page of 100 from a bare handler in this process. On a
// machine of two cores what the GETs lose here is the cost of moving those
// bytes through loopback HTTP, which no simulator can avoid; the
// simulator's own share is what BenchmarkSimGetWhileListing loses beyond it.
func BenchmarkSimGetWhileBareListing(b *testing.B) {
	sim, srv, c := benchSim(b)
	id := populate(b, sim, 10000)
	page := do(b, c, "GET", srv.URL+"/api/sandbox?limit=100", nil, 200)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		_, _ = w.Write(page)
	}))
	b.Cleanup(bare.Close)
	benchGetWhile(b, c, srv.URL+"/api/sandbox/"+id, bare.URL+"/api/sandbox?limit=100")
}

// benchGetWhile times batches of GETs of get alone (baseline) and while
// two clients GET list without pause (subject), interleaved.
func benchGetWhile(b *testing.B, c *http.Client, get, list string) {
	const batch = 1000
	var subject, baseline time.Duration
	var lists atomic.Int64
	for b.Loop() {
		t0 := time.Now()
		parallel(batch, benchWorkers, func(int) { hit(b, c, get) })
		baseline += time.Since(t0)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				lc := &http.Client{}
				for {
					select {
					case <-stop:
						return
					default:
					}
					hit(b, lc, list)
					lists.Add(1)
				}
			})
		}
		t1 := time.Now()
		parallel(batch, benchWorkers, func(int) { hit(b, c, get) })
		subject += time.Since(t1)
		close(stop)
		wg.Wait()
	}
	reportVersus(b, batch, subject, baseline, "gets/s-while-listing", "gets/s-alone")
	b.ReportMetric(float64(lists.Load())/subject.Seconds(), "lists/s-meanwhile")
}

// reportVersus reports batch requests per loop of subject against baseline
// as rates and as the ratio of their times.
func reportVersus(b *testing.B, batch int, subject, baseline time.Duration, subjectRate, baselineRate string) {
	n := float64(b.N)
	b.ReportMetric(n*float64(batch)/subject.Seconds(), subjectRate)
	b.ReportMetric(n*float64(batch)/baseline.Seconds(), baselineRate)
	b.ReportMetric(subject.Seconds()*1000/n, "ms/op-subject")
	b.ReportMetric(baseline.Seconds()*1000/n, "ms/op-baseline")
	b.ReportMetric(subject.Seconds()/baseline.Seconds(), "x-baseline")
}

// resident is this process's resident set, from /proc/self/status, in MiB:
// all of it, and its anonymous part (the heap, stacks, the runtime's
// metadata) without the pages of the binary read from disk.
type resident struct{ rss, anon float64 }

// settledResident is the resident set once the heap has settled: two
// collections, then one more that returns every free page to the system.
// One collection is not enough to compare two states fairly: a sync.Pool
// keeps what was put back through one collection (its victim cache), and
// encoding/json's pool keeps the buffer of the largest body it encoded, so
// right after the cost report (2.2 MiB of JSON for 11,000 rows) the
// encoder's 3 to 4 MiB buffer, which the next collection frees, was
// resident, while the state it was compared with had been through two
// collections since its last request. Memory still reachable after these
// collections is counted, pooled or not.
func settledResident(b *testing.B) resident {
	b.Helper()
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	raw, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	var r resident
	for _, line := range strings.Split(string(raw), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || name != "VmRSS" && name != "RssAnon" {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
		require.NoError(b, err)
		if name == "VmRSS" {
			r.rss = kb / 1024
		} else {
			r.anon = kb / 1024
		}
	}
	require.NotZero(b, r.rss, "no VmRSS in /proc/self/status")
	return r
}

// BenchmarkSimChurnRSS measures the resident memory of a simulator (none
// backend) with 10,000 live sandboxes, before and after 200,000 sandboxes
// were created and deleted beside them and the cost report was read: what
// churn leaves behind must not grow with the number of sandboxes the run
// ever had.
//
// Before the first measurement the simulator has already answered one
// create, one delete and one cost report: what their first call costs
// once (the pages of the binary that run them, read from disk on first use,
// and the tables built lazily, such as the JSON encoders of their answers)
// is not churn. The binary's pages the churn still touches for the first
// time (0.5 to 0.9 MiB: the runtime's and btree's rarer paths) stay in the
// growth; MiB-anon-* shows the growth without them.
func BenchmarkSimChurnRSS(b *testing.B) {
	const live, pairs = 10000, 200000
	var before, after resident
	var heapBefore, heapAfter float64
	for b.Loop() {
		sim, err := New(Config{Seed: 1, AdminKey: "bench-admin"})
		require.NoError(b, err)
		h := sim.Handler()
		populate(b, sim, live)
		churnPair(b, h)
		readCost(b, h)
		before = settledResident(b)
		heapBefore = heapMiB()
		for i := 0; i < pairs; i++ {
			churnPair(b, h)
		}
		readCost(b, h)
		after = settledResident(b)
		heapAfter = heapMiB()
		runtime.KeepAlive(sim)
		require.NoError(b, sim.Close())
	}
	b.ReportMetric(before.rss, "MiB-rss-before")
	b.ReportMetric(after.rss, "MiB-rss-after")
	b.ReportMetric(after.rss/before.rss, "x-rss-growth")
	b.ReportMetric(before.anon, "MiB-anon-before")
	b.ReportMetric(after.anon, "MiB-anon-after")
	b.ReportMetric(heapBefore, "MiB-heap-before")
	b.ReportMetric(heapAfter, "MiB-heap-after")
}

// churnPair creates a sandbox and deletes it.
func churnPair(b *testing.B, h http.Handler) {
	b.Helper()
	req := benchRequest("POST", "/api/sandbox", bytes.NewReader([]byte(`{"labels":{"churn":"1"}}`)))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		b.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &sb); err != nil {
		b.Fatal(err)
	}
	req = benchRequest("DELETE", "/api/sandbox/"+sb.ID, nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		b.Fatalf("delete %s: %d %s", sb.ID, rec.Code, rec.Body)
	}
}

// readCost reads the cost report of every organization.
func readCost(b *testing.B, h http.Handler) {
	b.Helper()
	req := httptest.NewRequest("GET", "/_sim/cost?org=all", nil)
	req.Host = "localhost" // the simulator answers loopback names only
	req.Header.Set("Authorization", "Bearer bench-admin")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		b.Fatalf("cost: %d %s", rec.Code, rec.Body)
	}
}

// heapMiB is the live heap after a collection.
func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// BenchmarkSimHandlerGet times one validated GET /api/sandbox/{id} through
// the handler, without the network: the server's own cost per request.
func BenchmarkSimHandlerGet(b *testing.B) {
	sim, err := New(Config{Seed: 1})
	require.NoError(b, err)
	defer sim.Close()
	h := sim.Handler()
	req := benchRequest("POST", "/api/sandbox", bytes.NewReader([]byte(`{"name":"x"}`)))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(httptest.NewRecorder(), req)
	start := time.Now()
	for b.Loop() {
		req := benchRequest("GET", "/api/sandbox/x", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s-per-core")
}

// benchRequest is a request to the handler as the benchmarks' client sends
// it: to a loopback name (the only ones the simulator answers), with its
// API key.
func benchRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = "localhost"
	req.Header.Set("Authorization", "Bearer bench")
	return req
}

// BenchmarkSimHandlerList times one validated list of 100 among 10,000
// sandboxes (GET /api/sandbox?limit=100) through the handler, without the
// network: the server's own cost per page, beside BenchmarkSimHandlerGet.
func BenchmarkSimHandlerList(b *testing.B) {
	sim, err := New(Config{Seed: 1})
	require.NoError(b, err)
	defer sim.Close()
	populate(b, sim, 10000)
	h := sim.Handler()
	b.ReportAllocs()
	for b.Loop() {
		req := benchRequest("GET", "/api/sandbox?limit=100", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkSimWarmPoolCreate times a create that a warm pool serves
// (subject) beside a cold create in the same run (baseline), as the mean
// latency of one create in ms, on the Daytona profile and the real clock:
// what a pool saves a caller. Each loop runs a batch of each kind in
// parallel; the cold one differs from the pool's spec by its env alone.
// Between loops, untimed, the pool refills and the batch is deleted, so
// that the store does not grow with the loops.
func BenchmarkSimWarmPoolCreate(b *testing.B) {
	const batch = benchWorkers
	sim, err := New(Config{Seed: 1, Profile: DaytonaProfile()})
	require.NoError(b, err)
	srv := httptest.NewServer(sim.Handler())
	b.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	out := do(b, c, "POST", srv.URL+"/api/warm-pools", []byte(`{"snapshot":"`+defaultSnapshot+`","pool":`+strconv.Itoa(batch)+`}`), http.StatusCreated)
	var pool struct{ ID string }
	require.NoError(b, json.Unmarshal(out, &pool))

	var subject, baseline atomic.Int64
	timed := func(body string, total *atomic.Int64) []string {
		ids := make([]string, batch)
		parallel(batch, batch, func(i int) {
			t0 := time.Now()
			out := do(b, c, "POST", srv.URL+"/api/sandbox", []byte(body), http.StatusOK)
			total.Add(int64(time.Since(t0)))
			var sb struct{ ID string }
			if err := json.Unmarshal(out, &sb); err != nil {
				b.Error(err)
			}
			ids[i] = sb.ID
		})
		return ids
	}
	for b.Loop() {
		waitPoolReady(sim, pool.ID, batch)
		warm := timed(`{}`, &subject)
		cold := timed(`{"env":{"COLD":"1"}}`, &baseline)
		parallel(2*batch, benchWorkers, func(i int) {
			do(b, c, "DELETE", srv.URL+"/api/sandbox/"+append(warm, cold...)[i], nil, http.StatusOK)
		})
	}
	n := float64(b.N * batch)
	b.ReportMetric(time.Duration(subject.Load()).Seconds()*1000/n, "ms/create-subject")
	b.ReportMetric(time.Duration(baseline.Load()).Seconds()*1000/n, "ms/create-baseline")
	b.ReportMetric(float64(subject.Load())/float64(baseline.Load()), "x-baseline")
}

// waitPoolReady waits until the pool id has n started members.
func waitPoolReady(sim *Simulator, id string, n int) {
	for {
		sim.mu.RLock()
		ready := sim.pools[id].currentSize()
		sim.mu.RUnlock()
		if ready >= n {
			return
		}
		time.Sleep(10 * time.Millisecond) // the refill runs on the real clock of the Daytona profile
	}
}
