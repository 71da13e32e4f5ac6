package testdaemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider/clock"
)

// Options says how to start a daemon; the zero value is a fresh daemon with
// the defaults.
type Options struct {
	// Root is the daemon's state directory. Empty: a fresh one whose marked
	// processes are killed when the test ends.
	Root string
	// Addr is the loopback address to listen on. Empty: a free one.
	Addr string
	// Minute is the daemon's interval minute. Zero: 200ms.
	Minute time.Duration
	// Config is YAML added to the daemon's config file, after the ports
	// window; it must not set ports itself.
	Config string
	// Env is added to the daemon's environment.
	Env []string
	// Ports is how many sandbox ports the daemon's window holds. Zero: 200.
	Ports int
	// Token, when set, is required by the daemon (given in a 0600
	// --token-file) and sent by Daemon.P.
	Token string
	// Wrap, when set, is the command the daemon runs under (its argv
	// follows), such as nsenter into another mount namespace. It must exec
	// the daemon, so that signals to it reach the daemon.
	Wrap []string
}

const (
	defaultMinute = 200 * time.Millisecond
	defaultPorts  = 200
	upTimeout     = 20 * time.Second
	stopTimeout   = 15 * time.Second
)

// Daemon is one `sandplane serve` process.
type Daemon struct {
	Root string
	Addr string
	URL  string // http://Addr
	P    *local.Provider
	// Stderr is what the daemon has written to its stderr so far.
	Stderr *Buffer

	opts           Options
	portLo, portHi int
	cmd            *exec.Cmd
	exited         chan struct{}
}

// Start runs `sandplane serve` and waits until it answers /v1/info. When t
// ends the daemon is stopped, and its stderr logged if t failed.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	lo, hi := portWindow(o.Ports)
	return start(t, o, lo, hi)
}

// Restart stops d if it still runs and starts it again on the same root,
// address, options and ports.
func (d *Daemon) Restart(t testing.TB) *Daemon {
	t.Helper()
	d.Stop()
	return start(t, d.opts, d.portLo, d.portHi)
}

func start(t testing.TB, o Options, portLo, portHi int) *Daemon {
	t.Helper()
	if o.Root == "" {
		o.Root = t.TempDir()
		root := o.Root
		t.Cleanup(func() { KillMarked(t, root) })
	}
	if o.Addr != "" {
		return launch(t, o, portLo, portHi, false)
	}
	// An address free when FreeAddr asked may be taken by another test
	// before the daemon binds it: the daemon then exits, and another
	// address is tried.
	for attempt := 1; ; attempt++ {
		o.Addr = FreeAddr(t)
		if d := launch(t, o, portLo, portHi, attempt < 3); d != nil {
			return d
		}
	}
}

// launch starts a daemon with o and waits until it answers. A daemon that
// exits first fails t, or, with retry, is reported as nil.
func launch(t testing.TB, o Options, portLo, portHi int, retry bool) *Daemon {
	t.Helper()
	if o.Minute == 0 {
		o.Minute = defaultMinute
	}
	cfg := filepath.Join(t.TempDir(), "sandplane.yaml")
	ports := fmt.Sprintf("ports:\n  min: %d\n  max: %d\n", portLo, portHi)
	require.NoError(t, os.WriteFile(cfg, []byte(ports+o.Config), 0o600))

	d := &Daemon{
		Root: o.Root, Addr: o.Addr, URL: "http://" + o.Addr, Stderr: &Buffer{},
		opts: o, portLo: portLo, portHi: portHi, exited: make(chan struct{}),
	}
	args := []string{"serve", "--listen", d.Addr, "--root", d.Root, "--minute", o.Minute.String(), "--config", cfg}
	var popts []local.Option
	if o.Token != "" {
		tokenFile := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(tokenFile, []byte(o.Token+"\n"), 0o600))
		args = append(args, "--token-file", tokenFile)
		popts = append(popts, local.WithToken(o.Token))
	}
	argv := append(append(append([]string(nil), o.Wrap...), Binary(t)), args...)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = append(os.Environ(), o.Env...)
	d.cmd.Stderr = d.Stderr
	require.NoError(t, d.cmd.Start())
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log (%s):\n%s", d.Addr, d.Stderr)
		}
	})
	var err error
	d.P, err = local.New(d.URL, popts...)
	require.NoError(t, err)
	if !d.waitUp(t) {
		if !retry {
			t.Fatalf("daemon exited before it answered: %s", d.Stderr)
		}
		return nil
	}
	return d
}

// waitUp waits until the daemon answers, and reports false if it exits
// first.
func (d *Daemon) waitUp(t testing.TB) bool {
	t.Helper()
	clk := clock.Real()
	deadline := clk.NewTimer(upTimeout)
	defer deadline.Stop()
	tick := clk.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		// Its own answer: the address was free when FreeAddr asked, and
		// another test's daemon may have taken it since.
		if info, err := d.P.Info(context.Background()); err == nil && info.PID == d.cmd.Process.Pid {
			return true
		}
		select {
		case <-d.exited:
			return false
		case <-deadline.C():
			t.Fatalf("daemon did not come up within %s: %s", upTimeout, d.Stderr)
		case <-tick.C():
		}
	}
}

// Stop ends the daemon with SIGTERM, which leaves its sandboxes running,
// and with SIGKILL if it has not exited after a while. Stopping a stopped
// daemon does nothing.
func (d *Daemon) Stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	timer := clock.Real().NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
	case <-timer.C():
		d.Kill9()
	}
}

// Kill9 kills the daemon with SIGKILL and waits for it to exit.
func (d *Daemon) Kill9() {
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// KillMarked kills the process group of every process that carries root's
// marker, so that no test leaves a workload behind, whatever became of the
// daemon that started it.
func KillMarked(t testing.TB, root string) {
	orphans, err := native.New().Orphans(context.Background(), root, nil)
	if err != nil {
		t.Logf("scan for leftover workloads of %s: %v", root, err)
		return
	}
	for _, h := range orphans {
		_ = syscall.Kill(-h.PID, syscall.SIGKILL)
	}
}

// FreeAddr is a loopback address nobody listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// Sandbox ports come from below the kernel's ephemeral range (32768 and up),
// which outgoing connections take from.
const (
	portsLow  = 10000
	portsHigh = 29999
)

var ports struct {
	mu   sync.Mutex
	next int
}

// portWindow hands each daemon of the process ports no other daemon of the
// process has; two daemons that both find a port free would otherwise hand
// it out twice. The first window starts at random, so that test processes
// that run side by side rarely meet.
func portWindow(size int) (lo, hi int) {
	if size <= 0 {
		size = defaultPorts
	}
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.next == 0 {
		ports.next = portsLow + rand.IntN(portsHigh-portsLow+1)
	}
	if ports.next+size-1 > portsHigh {
		ports.next = portsLow
	}
	lo = ports.next
	ports.next += size
	return lo, lo + size - 1
}

// Buffer is written by a process while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// ParkedInits lists the live inits that process parent parked for its
// next native start (native.ParkedEntry).
func ParkedInits(t testing.TB, parent int) []int {
	t.Helper()
	return childrenWhere(t, parent, native.ParkedEntry)
}

// ParkedWorkloads lists the live workloads that the parked init initPID
// started ahead of its sandbox (nsinit.AwaitSandbox).
func ParkedWorkloads(t testing.TB, initPID int) []int {
	t.Helper()
	return childrenWhere(t, initPID, nsinit.WorkloadVar+"=")
}

// childrenWhere lists the live children of parent whose environment
// begins with prefix.
func childrenWhere(t testing.TB, parent int, prefix string) []int {
	t.Helper()
	ppid := "PPid:\t" + strconv.Itoa(parent) + "\n"
	var out []int
	for _, pid := range ProcessesWhere(t, "environ", func(env []byte) bool {
		return strings.HasPrefix(string(env), prefix)
	}) {
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err == nil && strings.Contains(string(status), ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// ProcessesWhere lists the live processes whose /proc/<pid>/<file> match
// says yes to.
func ProcessesWhere(t testing.TB, file string, match func([]byte) bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/" + file)
		if err == nil && match(b) && ProcessAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// ProcessAlive reports whether pid runs; a zombie nobody reaps counts as
// dead.
func ProcessAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
