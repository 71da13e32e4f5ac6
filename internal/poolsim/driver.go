package poolsim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// driver runs simulated time: whenever every goroutine of the process waits
// (on the fake clock, a channel, a lock held by another waiter) and no HTTP
// message is on its way between client and server, it jumps the clock to
// the next timer. A day of traffic then takes seconds, and every duration in
// it is exact on an idle machine: the same seed gives the same figures.
//
// Quiet is judged from the scheduler (no goroutine running but the driver,
// none runnable, none in a system call) and from the messages in transit: a
// request sent but not yet in its handler, or a response written but not
// yet read, has its goroutines parked on the network while it is very much
// under way. A request inside its handler may wait on the clock (Daytona's
// create holds until the sandbox started), which the scheduler shows.
// DRIVER_DEBUG=1 prints its progress, and the goroutines when it is stuck.
type driver struct {
	clk     *clocktest.Fake
	base    http.RoundTripper
	seq     atomic.Int64
	mu      sync.Mutex
	transit map[string]bool // request id: in transit (sent, or answered and unread)
	buf     []byte
	sched   []metrics.Sample
	// idleSyscalls is how many goroutines sit in a system call for good:
	// those that did before the run began, and those settle learns.
	idleSyscalls uint64
	// parked counts the settle spins in a row in which nothing moved but
	// goroutines in system calls beyond idleSyscalls.
	parked int
	// wall paces the driver's own yields: the one clock here that is not
	// simulated.
	wall clock.Clock
}

const driverHeader = "X-Driver-Request"

func newDriver(clk *clocktest.Fake, base http.RoundTripper) *driver {
	d := &driver{clk: clk, wall: clock.Real(), base: base, transit: map[string]bool{}, buf: make([]byte, 1<<20), sched: []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/not-in-go:goroutines"},
	}}
	// What already sits in a system call for good (os/signal's loop, in a
	// CLI) is no sign of progress.
	metrics.Read(d.sched)
	d.idleSyscalls = d.sched[2].Value.Uint64()
	return d
}

func (d *driver) mark(id string, inTransit bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if inTransit {
		d.transit[id] = true
	} else {
		delete(d.transit, id)
	}
}

func (d *driver) inTransit() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.transit)
}

// RoundTrip marks the request in transit until its handler takes it, and
// its answer from the handler's end until the body is read or closed.
func (d *driver) RoundTrip(req *http.Request) (*http.Response, error) {
	id := fmt.Sprint(d.seq.Add(1))
	req = req.Clone(req.Context())
	req.Header.Set(driverHeader, id)
	d.mark(id, true)
	resp, err := d.base.RoundTrip(req)
	if err != nil {
		d.mark(id, false)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { d.mark(id, false) }}
	return resp, nil
}

// server wraps the handler under test.
func (d *driver) server(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(driverHeader)
		if id != "" {
			d.mark(id, false)
			defer d.mark(id, true)
		}
		h.ServeHTTP(w, r)
	})
}

type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *countedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// parkedSpins is how many settle spins (each at least a 10 µs wait) more
// goroutines than idleSyscalls may stay in system calls before the extra
// ones count as parked there for good: far longer than a file or socket
// call of the run takes.
const parkedSpins = 2000

// quiet reports whether nothing but the driver can make progress now: no
// message in transit, and the scheduler counts no goroutine running but the
// driver, none runnable and none in a system call but those parked there.
// The counts are approximate, so settle asks twice.
func (d *driver) quiet() bool {
	metrics.Read(d.sched)
	running, runnable, syscall := d.sched[0].Value.Uint64(), d.sched[1].Value.Uint64(), d.sched[2].Value.Uint64()
	d.learnParked(syscall)
	return d.inTransit() == 0 && running <= 1 && runnable == 0 && syscall <= d.idleSyscalls
}

// learnParked counts how long more goroutines than idleSyscalls have sat
// in system calls, and once that is parkedSpins, takes them for parked: a
// goroutine that entered its system call for good after the baseline was
// read (os/signal's loop starts lazily, and on a busy machine late) would
// otherwise hold settle forever.
func (d *driver) learnParked(syscall uint64) {
	if syscall <= d.idleSyscalls {
		// One of them has left (a signal arrived): count it again when it
		// is back.
		d.idleSyscalls, d.parked = syscall, 0
		return
	}
	if d.parked++; d.parked >= parkedSpins {
		d.idleSyscalls, d.parked = syscall, 0
	}
}

func (d *driver) settle() {
	for calm, spins := 0, 0; calm < 2; spins++ {
		runtime.Gosched()
		if d.quiet() {
			calm++
			continue
		}
		calm = 0
		if spins == 100000 && os.Getenv("DRIVER_DEBUG") != "" {
			n := runtime.Stack(d.buf, true)
			fmt.Fprintf(os.Stderr, "driver stuck: %d in transit, sched %d/%d/%d idle %d parked %d\n%s\n", d.inTransit(), d.sched[0].Value.Uint64(), d.sched[1].Value.Uint64(), d.sched[2].Value.Uint64(), d.idleSyscalls, d.parked, d.buf[:n])
		}
		// Yield to goroutines in a syscall, which Gosched does not wait
		// for; settle loops until quiet however long that takes.
		_ = clock.Sleep(context.Background(), d.wall, 10*time.Microsecond)
	}
}

// runUntil jumps from event to event up to end, or until ctx ends.
func (d *driver) runUntil(ctx context.Context, end time.Time) {
	steps := 0
	began := d.wall.Now()
	for ctx.Err() == nil {
		steps++
		if os.Getenv("DRIVER_DEBUG") != "" && steps%500 == 0 {
			fmt.Fprintf(os.Stderr, "driver: %d steps, sim %s, wall %s\n", steps, d.clk.Now().Format("15:04:05"), d.wall.Since(began))
		}
		d.settle()
		next, ok := d.clk.Next()
		if !ok || next.After(end) {
			d.clk.Set(end)
			d.settle()
			return
		}
		d.clk.Set(next)
	}
}

// during runs f while it drives the clock, until f returns.
func (d *driver) during(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	for {
		d.settle()
		select {
		case <-done:
			return
		default:
		}
		if next, ok := d.clk.Next(); ok {
			d.clk.Set(next)
		}
	}
}
