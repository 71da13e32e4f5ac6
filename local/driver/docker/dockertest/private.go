package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/sandplane/sandplane/provider/clock"
)

// Bounds of a private engine's start and stop.
const (
	privateUpTimeout   = 60 * time.Second
	privateStopTimeout = 60 * time.Second
)

// PrivateEngine is a dockerd of the test's own, on directories, a socket, a
// default bridge and addresses of its own, that the test may stop, kill and
// start again without touching the machine's engine or its containers. It
// sets no iptables rules: bridge networks work, and published ports reach
// containers through the engine's userland proxy, but the isolation those
// rules would add between containers is not there.
type PrivateEngine struct {
	// Host is its address, as DOCKER_HOST names it.
	Host string

	t    testing.TB
	dir  string
	args []string
	// bridge is the engine's default bridge, which the test makes.
	bridge string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *bytes.Buffer
}

// StartPrivateEngine starts a private engine and waits until it answers. It
// skips t when this process is not root or no dockerd is installed. When t
// ends, every container on it is removed, it is stopped, and its
// directories are removed.
func StartPrivateEngine(t testing.TB) *PrivateEngine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private docker engine needs root: run the test as root (CI does)")
	}
	bin, err := exec.LookPath("dockerd")
	if err != nil {
		t.Skip("no dockerd on PATH to run a private engine: install docker.io (apt-get install -y docker.io)")
	}
	// Short: the engine's and containerd's unix sockets live under it,
	// and a socket's path holds at most 107 bytes.
	dir, err := os.MkdirTemp("", "spe")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(conf, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A containerd namespace and a default bridge of its own keep it off
	// the machine's engine's containers, should it share a system
	// containerd, and off its bridge. Never --bridge none, and no
	// --default-address-pool: an engine started so deletes the host's
	// docker0, the machine's engine's bridge, when it starts (again).
	ns := "spe" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(rand.IntN(1e6))
	octet := 100 + rand.IntN(100) // of its bridge's address
	bridge := fmt.Sprintf("spe%d", rand.IntN(1e8))
	e := &PrivateEngine{
		Host:   "unix://" + filepath.Join(dir, "d.sock"),
		t:      t,
		dir:    dir,
		bridge: bridge,
		args: []string{bin,
			"--config-file", conf,
			"--data-root", filepath.Join(dir, "r"),
			"--exec-root", filepath.Join(dir, "x"),
			"--pidfile", filepath.Join(dir, "d.pid"),
			"-H", "unix://" + filepath.Join(dir, "d.sock"),
			"--containerd-namespace", ns,
			"--containerd-plugins-namespace", ns + "-plugins",
			"--bridge", bridge,
			"--iptables=false",
			"--ip-masq=false",
		},
	}
	if err := e.makeBridge(fmt.Sprintf("10.%d.200.1/24", octet)); err != nil {
		os.RemoveAll(dir)
		t.Skipf("cannot make a bridge for a private docker engine (ip link add): %v", err)
	}
	t.Cleanup(e.cleanup)
	e.Start()
	return e
}

// Start starts the engine again on the same directories and waits until it
// answers; it fails the test if it does not. Starting a running engine
// does nothing.
func (e *PrivateEngine) Start() {
	e.t.Helper()
	if err := e.start(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *PrivateEngine) start() error {
	e.mu.Lock()
	if e.cmd != nil {
		e.mu.Unlock()
		return nil
	}
	e.log = &bytes.Buffer{}
	cmd := exec.Command(e.args[0], e.args[1:]...)
	cmd.Stdout, cmd.Stderr = &lockedWriter{mu: &e.mu, w: e.log}, &lockedWriter{mu: &e.mu, w: e.log}
	// Its own process group: a signal to the test's group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		e.mu.Unlock()
		return fmt.Errorf("start dockerd: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	e.cmd, e.exited = cmd, exited
	e.mu.Unlock()
	return e.waitUp(exited)
}

func (e *PrivateEngine) waitUp(exited chan struct{}) error {
	cli, err := e.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	clk := clock.Real()
	deadline := clk.NewTimer(privateUpTimeout)
	defer deadline.Stop()
	tick := clk.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := Ping(context.Background(), cli); err == nil {
			return nil
		}
		select {
		case <-exited:
			e.mu.Lock()
			e.cmd, e.exited = nil, nil
			e.mu.Unlock()
			return fmt.Errorf("the private dockerd exited before it answered:\n%s", e.Log())
		case <-deadline.C():
			return fmt.Errorf("the private dockerd did not answer within %s:\n%s", privateUpTimeout, e.Log())
		case <-tick.C():
		}
	}
}

// Stop stops the engine with SIGTERM, which stops its containers with it,
// and waits until it has exited; after a minute it kills it, by its own
// pid. Stopping a stopped engine does nothing.
func (e *PrivateEngine) Stop() {
	e.signal(syscall.SIGTERM)
}

// Kill9 kills the engine with SIGKILL, as a crash would, and waits until it
// has exited. Its containers' processes run on without it; the containerd
// it started dies with it.
func (e *PrivateEngine) Kill9() {
	e.signal(syscall.SIGKILL)
	e.forgetDeadContainerd()
}

// forgetDeadContainerd removes the pid file of the engine's containerd
// once that is dead: a killed engine leaves it, and a containerd that died
// with the engine stays a zombie where nothing reaps orphans, which the
// next engine would take for a live containerd and wait for in vain.
func (e *PrivateEngine) forgetDeadContainerd() {
	pidFile := filepath.Join(e.dir, "x", "containerd", "containerd.pid")
	pid, ok := readPID(pidFile)
	if !ok {
		return
	}
	clk := clock.Real()
	deadline := clk.Now().Add(10 * time.Second)
	for clk.Now().Before(deadline) {
		if !alive(pid) {
			_ = os.Remove(pidFile)
			return
		}
		t := clk.NewTimer(20 * time.Millisecond)
		<-t.C()
	}
}

func (e *PrivateEngine) signal(sig syscall.Signal) {
	e.mu.Lock()
	cmd, exited := e.cmd, e.exited
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	timer := clock.Real().NewTimer(privateStopTimeout)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C():
		e.t.Errorf("the private dockerd did not exit within %s of %s; killing it:\n%s", privateStopTimeout, sig, e.Log())
		_ = cmd.Process.Kill()
		<-exited
	}
	e.mu.Lock()
	e.cmd, e.exited = nil, nil
	e.mu.Unlock()
}

// Client is a client of the engine, closed when the test ends.
func (e *PrivateEngine) Client() *client.Client {
	cli, err := e.client()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (e *PrivateEngine) client() (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("client of the private engine: %w", err)
	}
	return cli, nil
}

// Log is what the engine wrote since it last started.
func (e *PrivateEngine) Log() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.log == nil {
		return ""
	}
	return e.log.String()
}

// cleanup removes every container, stops the engine, ends the containerd
// it started should a kill have left it behind, and removes the
// directories.
func (e *PrivateEngine) cleanup() {
	if e.t.Failed() {
		e.t.Logf("private dockerd log:\n%s", e.Log())
	}
	// A killed engine is started again, so that it removes what it made.
	e.forgetDeadContainerd()
	if err := e.start(); err != nil {
		e.t.Errorf("start the private engine to clean it up: %v", err)
	} else {
		e.removeContainers()
		e.removeNetworks()
	}
	e.Stop()
	// A killed engine, or one that would not stop, leaves its containers'
	// processes behind.
	e.endLeftovers()
	e.removeBridge()
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Logf("remove the private engine's directories: %v", err)
	}
}

// makeBridge makes the engine's default bridge with address cidr.
func (e *PrivateEngine) makeBridge(cidr string) error {
	for _, args := range [][]string{
		{"link", "add", e.bridge, "type", "bridge"},
		{"addr", "add", cidr, "dev", e.bridge},
		{"link", "set", e.bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = exec.Command("ip", "link", "del", e.bridge).Run()
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// removeBridge deletes the engine's default bridge.
func (e *PrivateEngine) removeBridge() {
	if out, err := exec.Command("ip", "link", "del", e.bridge).CombinedOutput(); err != nil {
		e.t.Errorf("remove bridge %s of the private engine: %v: %s", e.bridge, err, out)
	}
}

// removeNetworks removes the networks made on the engine, and with them
// their bridges on the host.
func (e *PrivateEngine) removeNetworks() {
	cli, err := e.client()
	if err != nil {
		e.t.Error(err)
		return
	}
	defer cli.Close()
	ctx := context.Background()
	list, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		e.t.Errorf("list the private engine's networks: %v", err)
		return
	}
	for _, n := range list {
		if n.Name == "bridge" || n.Name == "host" || n.Name == "none" {
			continue
		}
		if err := cli.NetworkRemove(ctx, n.ID); err != nil {
			e.t.Errorf("remove network %s of the private engine: %v", n.Name, err)
		}
	}
}

func (e *PrivateEngine) removeContainers() {
	cli, err := e.client()
	if err != nil {
		e.t.Error(err)
		return
	}
	defer cli.Close()
	ctx := context.Background()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		e.t.Errorf("list the private engine's containers: %v", err)
		return
	}
	for _, c := range list {
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			e.t.Errorf("remove container %s of the private engine: %v", c.ID, err)
		}
	}
}

// endLeftovers kills, by pid, what the engine started and left behind
// when it could not stop cleanly: its containerd and the containers' shims
// and their processes, all of which name its directories or its containerd
// namespace on their command lines. Then it unmounts what is still
// mounted under its directories.
func (e *PrivateEngine) endLeftovers() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, de := range entries {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + de.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(e.dir)) {
			e.t.Logf("the private engine left process %d behind; killing it and its children", pid)
			killTree(pid)
		}
	}
	e.unmountAll()
}

// killTree kills pid and every process below it, children first found.
func killTree(pid int) {
	for _, c := range children(pid) {
		killTree(c)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	ppid := "PPid:\t" + strconv.Itoa(pid) + "\n"
	var out []int
	for _, de := range entries {
		c, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if status, err := os.ReadFile("/proc/" + de.Name() + "/status"); err == nil && bytes.Contains(status, []byte(ppid)) {
			out = append(out, c)
		}
	}
	return out
}

// unmountAll detaches every mount under the engine's directories, the
// deepest first.
func (e *PrivateEngine) unmountAll() {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == e.dir || strings.HasPrefix(f[4], e.dir+"/")) {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

func readPID(file string) (int, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	return pid, err == nil && pid > 1
}

// alive reports whether pid runs; a zombie does not.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
