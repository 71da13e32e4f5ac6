package nsinit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/provider/clock"
)

// ack is what the inner half sends once it has reached the target, before
// any of the target's bytes.
const ack = 0x06

// maxSunPath leaves room for the NUL in sockaddr_un's 108 bytes.
const maxSunPath = 107

// acceptBackoff paces a listener whose Accept fails (out of descriptors).
const acceptBackoff = 50 * time.Millisecond

// DialUnix connects to the unix socket at path, also when path is longer than
// a socket address holds: it then goes through /proc/self/fd of the socket's
// directory.
func DialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) <= maxSunPath {
		return d.DialContext(ctx, "unix", path)
	}
	dir, base := filepath.Split(path)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: fmt.Errorf("open %s: %w", dir, err)}
	}
	defer unix.Close(fd)
	return d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/%s", fd, base))
}

// Probe reports whether the inner half behind the unix socket at path reaches
// its target: it connects and waits for the acknowledgement, or ctx's end.
func Probe(ctx context.Context, path string) bool {
	c, err := DialUnix(ctx, path)
	if err != nil {
		return false
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	return err == nil && b[0] == ack
}

// forwardTCP is the outer half: each connection on ln goes to the unix socket
// at sock, once the inner half behind it has acknowledged.
func forwardTCP(ln net.Listener, sock string) {
	serveConns(ln, func(c net.Conn) {
		defer c.Close()
		u, err := DialUnix(context.Background(), sock)
		if err != nil {
			return
		}
		defer u.Close()
		var b [1]byte
		if _, err := io.ReadFull(u, b[:]); err != nil || b[0] != ack {
			return
		}
		splice(c, u)
	})
}

// AnyPort, as the port of a Serve's Target, has each connection name the
// port it goes to: two bytes, big-endian, before any of its own (DialPort).
const AnyPort = "*"

// DialPort connects through the inner half behind the unix socket at path,
// whose Target's port is AnyPort, to port there, and returns once the inner
// half has reached it; an error when nothing listens there or ctx ends.
func DialPort(ctx context.Context, path string, port int) (net.Conn, error) {
	c, err := DialUnix(ctx, path)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], uint16(port))
	if _, err := c.Write(b[:]); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := io.ReadFull(c, b[:1]); err != nil || b[0] != ack {
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("nothing listens on port %d behind %s", port, path)
	}
	return c, nil
}

// forwardUnix is the inner half: each connection on ln goes to target, and is
// acknowledged once target accepted it. A target on AnyPort takes the port
// each connection names.
func forwardUnix(ln net.Listener, target string) {
	serveConns(ln, func(c net.Conn) {
		defer c.Close()
		addr := target
		if host, port, _ := net.SplitHostPort(target); port == AnyPort {
			var b [2]byte
			if _, err := io.ReadFull(c, b[:]); err != nil {
				return
			}
			addr = net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(b[:]))))
		}
		var d net.Dialer
		t, err := d.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			return
		}
		defer t.Close()
		if _, err := c.Write([]byte{ack}); err != nil {
			return
		}
		splice(c, t)
	})
}

// serveConns accepts on ln until it is closed, handling each connection in a
// goroutine of its own.
func serveConns(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			_ = clock.Sleep(context.Background(), clock.Real(), acceptBackoff)
			continue
		}
		go handle(c)
	}
}

type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// splice copies both ways until both directions are done, passing each
// half-close on. Between a TCP and a unix socket io.Copy uses splice(2).
func splice(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyHalf(b, a)
	}()
	copyHalf(a, b)
	<-done
}

func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if hc, ok := dst.(halfCloser); ok && err == nil {
		_ = hc.CloseWrite()
		return
	}
	// An error on one direction ends both: nobody reads what is left.
	dst.Close()
	src.Close()
}
