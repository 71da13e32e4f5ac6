package launcher

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/provider"
)

// Ports hands out the host ports workloads serve on.
type Ports interface {
	// Allocate returns a free port, prefer when it is free.
	// resource_exhausted: none is free.
	Allocate(prefer int) (int, error)
	// Release gives a port back; releasing one not held does nothing.
	Release(port int)
}

// PortRange hands out ports of a range. A port is never handed out twice
// while held, a port that something already listens on is skipped, and
// daemons on one machine (each with its own root) never hand out the same
// port: each holds a machine-wide advisory lock on every port it assigned.
// Binding alone cannot guarantee that, since two daemons may both find a
// port free before either workload binds it.
type PortRange struct {
	min, max int
	lockDir  string // "" disables cross-daemon locks

	mu   sync.Mutex
	held map[int]*os.File // the lock file of each held port, or nil
	next int
	// ahead makes the lock file of the port handed out next, in the
	// background; Close waits for it.
	ahead sync.WaitGroup
}

var _ Ports = (*PortRange)(nil)

// NewPortRange hands out min..max. Daemons that share lockDir (DefaultLockDir)
// coordinate through it; "" turns the coordination off.
func NewPortRange(min, max int, lockDir string) *PortRange {
	if lockDir != "" {
		if err := os.MkdirAll(lockDir, 0o700); err != nil {
			lockDir = "" // locking is a courtesy between daemons; binding still guards
		}
	}
	p := &PortRange{min: min, max: max, lockDir: lockDir, held: map[int]*os.File{}, next: min}
	p.makeAhead(p.next)
	return p
}

// DefaultLockDir is shared by every daemon of this user on this machine.
func DefaultLockDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("sandplane-ports-%d", os.Getuid()))
}

// Allocate returns a free port of the range, preferring prefer when it is
// free. resource_exhausted when the range is used up.
func (p *PortRange) Allocate(prefer int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prefer >= p.min && prefer <= p.max && p.take(prefer) {
		return prefer, nil
	}
	size := p.max - p.min + 1
	for i := 0; i < size; i++ {
		port := p.next
		p.next++
		if p.next > p.max {
			p.next = p.min
		}
		if p.take(port) {
			p.makeAhead(p.next)
			return port, nil
		}
	}
	return 0, provider.Errorf(provider.ResourceExhausted,
		"no free port in %d-%d: delete unused sandboxes or widen the range (ports in the config file)", p.min, p.max)
}

// take holds port if no one has it. The caller holds p.mu.
func (p *PortRange) take(port int) bool {
	if _, ok := p.held[port]; ok {
		return false
	}
	lock, ok := p.lock(port)
	if !ok {
		return false
	}
	if !bindable(port) {
		if lock != nil {
			lock.Close()
		}
		return false
	}
	p.held[port] = lock
	return true
}

// lock takes the machine-wide lock of port: false when another daemon holds
// it. The lock ends with the file, or with the process.
func (p *PortRange) lock(port int) (*os.File, bool) {
	if p.lockDir == "" {
		return nil, true
	}
	f, err := os.OpenFile(p.lockPath(port), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, true // cannot coordinate; binding still guards
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// lockPath is the file of port's machine-wide lock.
func (p *PortRange) lockPath(port int) string {
	return filepath.Join(p.lockDir, strconv.Itoa(port)+".lock")
}

// makeAhead makes the lock file of port, which the range hands out next,
// unless it exists, in the background: creating a file costs a create far
// more than opening one (an inode to allocate, on ext4 a search past the
// recently freed ones), and the first pass through a range would pay it
// on every create. Lock files are never removed, so this is needed only
// once per port and machine. The caller holds p.mu (or has p to itself).
func (p *PortRange) makeAhead(port int) {
	if p.lockDir == "" {
		return
	}
	path := p.lockPath(port)
	if _, err := os.Lstat(path); err == nil {
		return
	}
	p.ahead.Add(1)
	go func() {
		defer p.ahead.Done()
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600); err == nil {
			f.Close() // only the file is wanted; take locks it
		}
	}()
}

// Reserve marks a port held by a workload adopted after a restart.
func (p *PortRange) Reserve(port int) {
	if port <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.held[port]; ok {
		return
	}
	lock, _ := p.lock(port) // the workload has the port whatever the lock says
	p.held[port] = lock
}

// Release gives port back.
func (p *PortRange) Release(port int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if lock := p.held[port]; lock != nil {
		lock.Close()
	}
	delete(p.held, port)
}

// Close drops every port lock, for a daemon that is done; the next one on
// the same root reserves the ports of the workloads it adopts.
func (p *PortRange) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ahead.Wait() // its goroutine never takes p.mu
	for port, lock := range p.held {
		if lock != nil {
			lock.Close()
		}
		delete(p.held, port)
	}
}

// FreePorts hands out any port nothing listens on, as the kernel picks it,
// and the preferred one when it is still free, so that a restarted workload
// keeps its port. It holds nothing: a port is free again once released or
// not, which suits a process that owns every workload of the machine's
// range it uses (the simulator).
type FreePorts struct{}

var _ Ports = FreePorts{}

// Allocate returns prefer when nothing binds it, else a port the kernel
// picks. unavailable: no port can be bound.
func (FreePorts) Allocate(prefer int) (int, error) {
	if prefer > 0 && bindable(prefer) {
		return prefer, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, provider.Errorf(provider.Unavailable, "find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Release does nothing: FreePorts holds no port.
func (FreePorts) Release(int) {}

// bindable reports whether nothing listens on the loopback port now. Bind, not
// dial: a dial to a closed port costs a round trip and says nothing about
// ports held without listening.
func bindable(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
