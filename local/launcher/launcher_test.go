package launcher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandplane/sandplane/internal/redact"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/leakcheck"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/drivertest"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/provider"
)

// serveVar makes the test binary a workload instead of running tests: "tcp"
// accepts connections on $PORT and closes them, "silent" accepts them and
// holds them without a word, "http" answers every request there, "fail"
// writes to stderr and exits 3.
const serveVar = "LAUNCHER_TEST_SERVE"

// TestMain lets this test binary be the workloads' init and the workloads.
func TestMain(m *testing.M) {
	nsinit.Main()
	switch os.Getenv(serveVar) {
	case "":
		os.Exit(leakcheck.Main(m))
	case "fail":
		fmt.Fprintln(os.Stderr, "cannot start: the key is hunter2")
		os.Exit(3)
	case "http":
		_ = http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), http.NotFoundHandler())
		os.Exit(1)
	case "ports":
		// Answers on the port PORT_3000 names with the environment's port
		// variables, and on PORT.
		vars := func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "PORT=%s PORT_4000=%s PORT_3000=%s", os.Getenv("PORT"), os.Getenv("PORT_4000"), os.Getenv("PORT_3000"))
		}
		go func() { _ = http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT_3000"), http.HandlerFunc(vars)) }()
		_ = http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), http.HandlerFunc(vars))
		os.Exit(1)
	default:
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
		if err != nil {
			os.Exit(1)
		}
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			if os.Getenv(serveVar) == "silent" {
				held = append(held, c)
				continue
			}
			c.Close()
		}
	}
}

// harness is a launcher on the native driver with its own ports.
type harness struct {
	t     *testing.T
	d     *native.Driver
	ports *launcher.PortRange
	gate  *sync.RWMutex
	l     *launcher.Launcher
	root  string
	base  int // the first port of the range
}

func newHarness(t *testing.T, ready time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, d: native.New(), gate: &sync.RWMutex{}, root: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := l.Addr().(*net.TCPAddr).Port
	l.Close()
	h.base, h.ports = base, launcher.NewPortRange(base, base+20, "")
	t.Cleanup(h.ports.Close)
	h.l, err = launcher.New(launcher.Config{Driver: h.d, Ports: h.ports, ReadyTimeout: ready, StopGrace: time.Second, StartGate: h.gate.RLocker()})
	require.NoError(t, err)
	t.Cleanup(h.l.Cool)
	return h
}

// A launch leaves the driver an init parked for the next, which the
// launcher's Cool ends.
func TestLaunchWarmsTheNextAndCoolEndsIt(t *testing.T) {
	h := newHarness(t, 30*time.Second)
	if h.d.Containment() != native.ContainPIDNamespace {
		t.Skip("no PID namespaces here: the native driver parks no init")
	}
	parked := func() []int { return testdaemon.ParkedInits(t, os.Getpid()) }
	require.Eventually(t, func() bool { return len(parked()) == 0 }, 20*time.Second, 5*time.Millisecond,
		"an init parked by another test is still there")
	_, err := h.launch(h.request("tcp", launcher.ReadyPort))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(parked()) == 1 }, 20*time.Second, 5*time.Millisecond,
		"no init parked after the launch")
	h.l.Cool()
	assert.Eventually(t, func() bool { return len(parked()) == 0 }, 20*time.Second, 5*time.Millisecond,
		"the parked init outlived Cool")
	h.d.Warm(h.request("tcp", launcher.ReadyPort).Spec) // returns once it has parked one, if it does
	assert.Empty(t, parked(), "Warm parked one after Cool")
}

// request runs this test binary as mode, with $PORT set by Prepare.
func (h *harness) request(mode string, ready launcher.Readiness) launcher.Request {
	dir := h.t.TempDir()
	return launcher.Request{
		Spec:  driver.Spec{SandboxID: "sb", Root: h.root, Dir: dir, Command: []string{os.Args[0]}},
		Ready: ready,
		Prepare: func(_ context.Context, spec *driver.Spec) error {
			spec.Env = map[string]string{serveVar: mode, "PORT": fmt.Sprint(spec.Port), "PATH": os.Getenv("PATH")}
			return nil
		},
	}
}

// launch launches req and ends the workload when the test does.
func (h *harness) launch(req launcher.Request) (launcher.Workload, error) {
	w, err := h.l.Launch(context.Background(), req)
	if err == nil {
		h.t.Cleanup(func() { assert.NoError(h.t, h.l.End(context.Background(), w.Handle)) })
	}
	return w, err
}

func (h *harness) running(w driver.Handle) bool {
	st, err := h.d.Status(context.Background(), w)
	require.NoError(h.t, err)
	return st.Running
}

func TestLaunchWaitsUntilTheWorkloadServes(t *testing.T) {
	tests := []struct {
		name  string
		mode  string
		ready launcher.Readiness
		check func(t *testing.T, port int)
	}{
		{"a connection to its port", "tcp", launcher.ReadyPort, func(t *testing.T, port int) {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			require.NoError(t, err, "it accepts once the launch returns")
			c.Close()
		}},
		{"an HTTP answer", "http", launcher.ReadyHTTP("/version"), func(t *testing.T, port int) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/version", port))
			require.NoError(t, err, "it answers once the launch returns")
			resp.Body.Close()
		}},
		{"nothing but its start", "tcp", launcher.ReadyNone, func(*testing.T, int) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 30*time.Second)
			w, err := h.launch(h.request(tt.mode, tt.ready))
			require.NoError(t, err)
			assert.True(t, h.running(w.Handle))
			tt.check(t, w.Port)
		})
	}
}

func TestLaunchRecordsUnderTheGateAndKeepsThePreferredPort(t *testing.T) {
	h := newHarness(t, 30*time.Second)
	req := h.request("tcp", launcher.ReadyPort)
	first, err := h.launch(req)
	require.NoError(t, err)
	require.NoError(t, h.l.End(context.Background(), first.Handle))
	h.ports.Release(first.Port)

	var recorded launcher.Workload
	req.PreferPort = first.Port
	req.Record = func(hd driver.Handle, port int) error {
		assert.False(t, h.gate.TryLock(), "the start gate is held while the workload is recorded")
		recorded = launcher.Workload{Handle: hd, Port: port}
		return nil
	}
	w, err := h.launch(req)
	require.NoError(t, err)
	assert.Equal(t, first.Port, w.Port, "the preferred port, free again, is taken")
	assert.Equal(t, launcher.Workload{Handle: w.Handle, Port: w.Port}, recorded, "recorded before it was ready")
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), w.Addr, "without OwnAddresses a workload is on 127.0.0.1")
	assert.True(t, h.gate.TryLock(), "the gate is free once the launch returns")
	h.gate.Unlock()
}

func TestSandboxPortsGetHostPortsAndTheirVariables(t *testing.T) {
	h := newHarness(t, 30*time.Second)
	req := h.request("ports", launcher.ReadyHTTP("/"))
	req.SandboxPorts = []int{4000, 3000}
	req.Prepare = func(_ context.Context, spec *driver.Spec) error {
		assert.Equal(t, 4000, spec.SandboxPort, "the ports are known to Prepare")
		require.Len(t, spec.ExtraPorts, 1)
		spec.Env = map[string]string{serveVar: "ports", "PATH": os.Getenv("PATH"), "PORT": "1", "PORT_3000": "2"}
		return nil
	}
	w, err := h.launch(req)
	require.NoError(t, err)
	require.Len(t, w.Ports, 2)
	assert.Equal(t, w.Port, w.Ports[4000])
	assert.NotEqual(t, w.Ports[4000], w.Ports[3000])
	// A native workload shares the host's network: it is told the host
	// ports, which win over what Prepare set.
	want := fmt.Sprintf("PORT=%d PORT_4000=%d PORT_3000=%d", w.Ports[4000], w.Ports[4000], w.Ports[3000])
	for _, port := range []int{w.Ports[4000], w.Ports[3000]} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, want, string(body), "port %d", port)
	}

	t.Run("the host ports are preferred again, and given back on failure", func(t *testing.T) {
		require.NoError(t, h.l.End(context.Background(), w.Handle))
		h.ports.Release(w.Ports[4000])
		h.ports.Release(w.Ports[3000])
		req.PreferPorts = w.Ports
		again, err := h.launch(req)
		require.NoError(t, err)
		assert.Equal(t, w.Ports, again.Ports)
		require.NoError(t, h.l.End(context.Background(), again.Handle))
		h.ports.Release(again.Ports[4000])
		h.ports.Release(again.Ports[3000])

		req.Spec.Command = []string{"no-such-command-here"}
		_, err = h.launch(req)
		require.Error(t, err)
		for _, p := range []int{w.Ports[4000], w.Ports[3000]} {
			got, err := h.ports.Allocate(p)
			require.NoError(t, err)
			assert.Equal(t, p, got, "port %d is free again", p)
		}
	})
}

func TestFailedLaunchLeavesNothing(t *testing.T) {
	refused := errors.New("no room in the registry")
	tests := []struct {
		name    string
		mode    string
		timeout time.Duration
		edit    func(req *launcher.Request)
		code    provider.ErrorCode
		message []string
		undone  bool
	}{
		{name: "the workload exits before it serves", mode: "fail", code: provider.CreateFailed, undone: true,
			message: []string{"ended before it listened on port", "exited: code 3", "workload output: cannot start: the key is ***"}},
		{name: "the workload never serves", mode: "http", timeout: 300 * time.Millisecond, code: provider.Unavailable, undone: true,
			edit: func(req *launcher.Request) {
				req.Ready = launcher.ReadyHTTP("/version")
				req.Spec.Command = []string{"sleep", "30"}
			},
			message: []string{"did not answer HTTP on port", "within 300ms", "it must answer HTTP on $PORT, or declare ready: port"}},
		{name: "the command is missing", mode: "tcp", code: provider.PreflightFailed, undone: true,
			edit: func(req *launcher.Request) { req.Spec.Command = []string{"no-such-command-here"} }},
		{name: "the record is refused", mode: "tcp", code: provider.Internal, undone: true, message: []string{"no room in the registry"},
			edit: func(req *launcher.Request) { req.Record = func(driver.Handle, int) error { return refused } }},
		{name: "prepare refuses", mode: "tcp", code: provider.InvalidArgument, undone: false, message: []string{"not today"},
			edit: func(req *launcher.Request) {
				req.Prepare = func(context.Context, *driver.Spec) error {
					return provider.Errorf(provider.InvalidArgument, "not today")
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			h := newHarness(t, timeout)
			req := h.request(tt.mode, launcher.ReadyPort)
			req.Redact = func(s string) string { return strings.ReplaceAll(s, "hunter2", "***") }
			var started []driver.Handle
			if tt.edit != nil {
				tt.edit(&req)
			}
			if record := req.Record; record != nil {
				req.Record = func(hd driver.Handle, port int) error { started = append(started, hd); return record(hd, port) }
			} else {
				req.Record = func(hd driver.Handle, _ int) error { started = append(started, hd); return nil }
			}
			undone := false
			req.Undo = func() { undone = true }
			_, err := h.launch(req)
			require.Error(t, err)
			assert.Equal(t, tt.code, provider.Code(err), "%v", err)
			for _, m := range tt.message {
				assert.Contains(t, err.Error(), m)
			}
			assert.NotContains(t, err.Error(), "hunter2", "secrets stay out of the message")
			assert.Equal(t, tt.undone, undone, "Undo runs once Prepare succeeded")
			for _, hd := range started {
				assert.False(t, h.running(hd), "the workload it started is gone")
			}
			port, err := h.ports.Allocate(h.base)
			require.NoError(t, err)
			assert.Equal(t, h.base, port, "the port of the failed launch is free again")
		})
	}
}

// Ready means the workload answers as its readiness says: HTTP, whatever
// accepts the connection first; or, for a workload that speaks something
// else, a connection accepted. A workload that never does fails the launch
// with unavailable, and leaves nothing running. (The never-ready cases
// wait out a short deadline, but what they assert holds however long it
// is: their workload never answers.)
func TestReadinessIsTheWorkloadsAnswer(t *testing.T) {
	tests := []struct {
		mode  string // what the workload does with a connection
		ready launcher.Readiness
		up    bool
	}{
		{"http", launcher.ReadyHTTP("/"), true},
		{"tcp", launcher.ReadyHTTP("/"), false},
		{"silent", launcher.ReadyHTTP("/"), false},
		{"http", launcher.ReadyPort, true},
		{"tcp", launcher.ReadyPort, true},
		{"silent", launcher.ReadyPort, true},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s workload, %v", tt.mode, tt.ready)
		t.Run(name, func(t *testing.T) {
			timeout := 30 * time.Second
			if !tt.up {
				timeout = 300 * time.Millisecond
			}
			h := newHarness(t, timeout)
			req := h.request(tt.mode, tt.ready)
			var started []driver.Handle
			req.Record = func(hd driver.Handle, _ int) error { started = append(started, hd); return nil }
			w, err := h.launch(req)
			if tt.up {
				require.NoError(t, err)
				assert.True(t, h.running(w.Handle))
				return
			}
			require.Error(t, err)
			assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
			assert.Contains(t, err.Error(), "did not answer HTTP on port")
			require.Len(t, started, 1)
			assert.False(t, h.running(started[0]), "the workload that never answered is gone")
		})
	}
}

func TestFreePorts(t *testing.T) {
	var p launcher.FreePorts
	port, err := p.Allocate(0)
	require.NoError(t, err)
	again, err := p.Allocate(port)
	require.NoError(t, err)
	assert.Equal(t, port, again, "a free preferred port is taken again")

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer l.Close()
	other, err := p.Allocate(port)
	require.NoError(t, err)
	assert.NotEqual(t, port, other, "a taken one is not")
}

func TestPortRange(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	taken := l.Addr().(*net.TCPAddr).Port
	defer l.Close()
	lockDir := t.TempDir()
	a := launcher.NewPortRange(taken, taken+10, lockDir)
	defer a.Close()
	b := launcher.NewPortRange(taken, taken+10, lockDir)
	defer b.Close()

	first, err := a.Allocate(taken)
	require.NoError(t, err)
	assert.NotEqual(t, taken, first, "a port something listens on is skipped")
	second, err := b.Allocate(first)
	require.NoError(t, err)
	assert.NotEqual(t, first, second, "another range on the same lock directory never hands out a held port")

	a.Release(first)
	again, err := b.Allocate(first)
	require.NoError(t, err)
	assert.Equal(t, first, again, "a released port is free again")

	full := launcher.NewPortRange(taken, taken, "")
	defer full.Close()
	_, err = full.Allocate(0)
	assert.Equal(t, provider.ResourceExhausted, provider.Code(err), "no free port in the range")
}

// The lock file of the port a range hands out next is made ahead, off the
// path of the create that will take it; Close waits for it.
func TestPortRangeMakesTheNextLockFileAhead(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := l.Addr().(*net.TCPAddr).Port
	l.Close()
	lockDir := t.TempDir()
	p := launcher.NewPortRange(base, base+10, lockDir)
	port, err := p.Allocate(0)
	require.NoError(t, err)
	p.Close()
	assert.FileExists(t, filepath.Join(lockDir, strconv.Itoa(port+1)+".lock"), "the next port's, which nothing took yet")
}

func TestNotReadyErrorSaysWhy(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		command []string
		timeout time.Duration
		exited  bool
		reason  string
		output  string
	}{
		{name: "it ended first", mode: "fail", timeout: 30 * time.Second, exited: true, reason: "exited: code 3",
			output: "cannot start: the key is [REDACTED]"},
		{name: "the time ran out", mode: "http", command: []string{"sleep", "30"}, timeout: 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.timeout)
			req := h.request(tt.mode, launcher.ReadyHTTP("/version"))
			if tt.command != nil {
				req.Spec.Command = tt.command
			}
			req.Redact = redact.Env(map[string]string{"KEY": "hunter2"})
			var port int
			req.Record = func(_ driver.Handle, p int) error { port = p; return nil }
			_, err := h.launch(req)
			require.Error(t, err)
			code := provider.Unavailable // it may yet answer: a retry can succeed
			if tt.exited {
				code = provider.CreateFailed // its command is at fault
			}
			assert.Equal(t, code, provider.Code(err))
			var nr *launcher.NotReadyError
			require.ErrorAs(t, err, &nr)
			assert.Equal(t, provider.Message(err), nr.Error(), "the error's message is the cause's")
			assert.Equal(t, port, nr.Port)
			assert.Equal(t, tt.exited, nr.Exited)
			assert.Equal(t, tt.reason, nr.Reason)
			assert.Equal(t, tt.output, nr.Output)
			if !tt.exited {
				assert.Equal(t, tt.timeout, nr.Timeout)
			}
		})
	}
}

// With OwnAddresses, a workload with a network of its own gets the
// loopback address of its first host port, which its spec binds and its
// Workload names; one on the host's network stays on 127.0.0.1, where it
// binds for itself.
func TestOwnAddresses(t *testing.T) {
	tests := []struct {
		name      string
		runtime   provider.Runtime
		isolation string
		own       bool
	}{
		{"isolated native", provider.RuntimeNative, "bwrap", true},
		{"docker", provider.RuntimeDocker, "", true},
		{"native on the host's network", provider.RuntimeNative, "none", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := drivertest.New(tt.runtime)
			ports := launcher.NewPortRange(17400, 17420, "")
			t.Cleanup(ports.Close)
			l, err := launcher.New(launcher.Config{Driver: fake, Ports: ports, OwnAddresses: true})
			require.NoError(t, err)
			w, err := l.Launch(context.Background(), launcher.Request{
				Spec:         driver.Spec{SandboxID: "s", Dir: t.TempDir(), Command: []string{"w"}, Isolation: tt.isolation},
				SandboxPorts: []int{4000, 5000},
				Ready:        launcher.ReadyNone,
			})
			require.NoError(t, err)
			specs := fake.Specs()
			require.Len(t, specs, 1)
			want := netip.MustParseAddr("127.0.0.1")
			if tt.own {
				want = launcher.OwnAddress(w.Port)
				assert.Equal(t, want, specs[0].HostIP, "the spec binds the sandbox's own address")
			} else {
				assert.False(t, specs[0].HostIP.IsValid(), "a workload on the host's network binds 127.0.0.1 itself")
			}
			assert.Equal(t, want, w.Addr)
			assert.Equal(t, want, specs[0].HostAddr())
		})
	}
}

// Each port has an address of its own, none of them 127.0.0.1 or a
// neighbour's, and none outside loopback.
func TestOwnAddressIsOnePerPort(t *testing.T) {
	seen := map[netip.Addr]int{}
	for port := 1; port <= 65535; port++ {
		a := launcher.OwnAddress(port)
		require.True(t, a.IsLoopback(), "port %d: %s", port, a)
		require.NotEqual(t, netip.MustParseAddr("127.0.0.1"), a)
		if prev, ok := seen[a]; ok {
			t.Fatalf("ports %d and %d share %s", prev, port, a)
		}
		seen[a] = port
	}
}
