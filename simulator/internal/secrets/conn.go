package secrets

import (
	"bufio"
	"io"
	"net"
	"sync"
)

// connListener hands the intercepted connections to the server that
// reads their requests: they come from CONNECTs, not from an accept.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// push gives c to the server, or says no once the listener is closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

// intercepted is a sandbox's TLS connection opened by the proxy, with
// whose it is and where it was CONNECTed to: the requests read from it
// go there, whatever their Host says.
type intercepted struct {
	net.Conn
	client *client
	target string
}

// hijacked reads first what the server had buffered past the CONNECT
// (a client may send its TLS hello without waiting for the 200).
type hijacked struct {
	net.Conn
	r io.Reader
}

func (h hijacked) Read(p []byte) (int, error) { return h.r.Read(p) }

func newHijacked(c net.Conn, rw *bufio.ReadWriter) net.Conn {
	if rw.Reader.Buffered() == 0 {
		return c
	}
	return hijacked{c, io.MultiReader(rw.Reader, c)}
}

// tracked are the connections no http.Server owns (hijacked tunnels),
// so that Close can end them.
type tracked struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	shut  bool
}

// add registers c, or closes it and says no once shut.
func (t *tracked) add(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		_ = c.Close()
		return false
	}
	if t.conns == nil {
		t.conns = map[net.Conn]struct{}{}
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *tracked) remove(c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
}

func (t *tracked) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.shut = true
	for c := range t.conns {
		_ = c.Close()
	}
	t.conns = nil
}
