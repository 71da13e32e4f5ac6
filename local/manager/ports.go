package manager

import (
	"net"
	"strconv"
	"sync"

	"github.com/sandplane/sandplane/provider"
)

// portAllocator hands out sandbox ports. A port is never handed out twice
// while held, and a port that something outside sandplane already listens on
// is skipped.
type portAllocator struct {
	min, max int
	mu       sync.Mutex
	held     map[int]bool
	next     int
}

func newPortAllocator(min, max int) *portAllocator {
	return &portAllocator{min: min, max: max, held: map[int]bool{}, next: min}
}

// allocate returns a free port, preferring prefer when it is free.
// resource_exhausted when the range is used up.
func (p *portAllocator) allocate(prefer int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prefer >= p.min && prefer <= p.max && !p.held[prefer] && bindable(prefer) {
		p.held[prefer] = true
		return prefer, nil
	}
	size := p.max - p.min + 1
	for i := 0; i < size; i++ {
		port := p.next
		p.next++
		if p.next > p.max {
			p.next = p.min
		}
		if p.held[port] || !bindable(port) {
			continue
		}
		p.held[port] = true
		return port, nil
	}
	return 0, provider.Errorf(provider.ResourceExhausted,
		"no free port in %d-%d: delete unused sandboxes or widen the range with --ports", p.min, p.max)
}

// reserve marks a port held by a workload adopted after a restart.
func (p *portAllocator) reserve(port int) {
	if port <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[port] = true
}

func (p *portAllocator) release(port int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, port)
}

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
