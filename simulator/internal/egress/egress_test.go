package egress

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// host is a network namespace joined to this machine by a veth pair, and
// two addresses of this machine's end, in IPv4 and in IPv6, that answer
// on port.
type host struct {
	ns             string // its path
	self           string // its address
	near, far      string // this machine's two addresses
	near6, far6    string // and in IPv6
	port           string
	listenerInside net.Listener
}

// newHost makes a host whose namespace this test owns. It needs root and
// iproute2, which CI has.
func newHost(t *testing.T) *host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("making a network namespace needs iproute2 (ip)")
	}
	b := make([]byte, 3)
	_, err := rand.Read(b)
	require.NoError(t, err)
	sfx := hex.EncodeToString(b)
	name, out, in := "sbeg-"+sfx, "sge"+sfx, "sgi"+sfx
	n := int(b[0])
	h := &host{ns: "/var/run/netns/" + name, self: fmt.Sprintf("10.252.%d.2", n),
		near: fmt.Sprintf("10.252.%d.1", n), far: fmt.Sprintf("10.251.%d.1", n),
		near6: fmt.Sprintf("fd00:77:%x::1", n), far6: fmt.Sprintf("fd00:78:%x::1", n)}
	ip := func(args ...string) {
		t.Helper()
		b, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, b)
	}
	ip("netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ip("link", "add", out, "type", "veth", "peer", "name", in)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", out).Run() })
	ip("link", "set", in, "netns", name)
	ip("addr", "add", h.near+"/24", "dev", out)
	ip("addr", "add", h.far+"/32", "dev", out)
	ip("addr", "add", h.near6+"/64", "dev", out, "nodad")
	ip("addr", "add", h.far6+"/128", "dev", out, "nodad")
	ip("link", "set", out, "up")
	ip("-n", name, "addr", "add", h.self+"/24", "dev", in)
	ip("-n", name, "addr", "add", fmt.Sprintf("fd00:77:%x::2/64", n), "dev", in, "nodad")
	ip("-n", name, "link", "set", in, "up")
	ip("-n", name, "link", "set", "lo", "up")
	ip("-n", name, "route", "add", "default", "via", h.near)
	ip("-n", name, "-6", "route", "add", "default", "via", h.near6)

	// The first listener gets a free port, the others the same one.
	for _, addr := range []string{h.near, h.far, h.near6, h.far6} {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, h.port))
		require.NoError(t, err)
		h.port = portOf(l)
		t.Cleanup(func() { _ = l.Close() })
		go greet(l)
	}
	h.listenerInside, err = inNS(h.ns, func() (net.Listener, error) { return net.Listen("tcp", "0.0.0.0:0") })
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.listenerInside.Close() })
	go greet(h.listenerInside)
	return h
}

func portOf(l net.Listener) string {
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// greet answers each connection with "hi" and closes it.
func greet(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("hi"))
		_ = c.Close()
	}
}

// inNS runs f on a thread in the network namespace at ns: a socket
// belongs to the namespace it was made in, wherever it is used after. The
// thread is never given back to the runtime.
func inNS[T any](ns string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err != nil {
			var zero T
			ch <- result{zero, err}
			return
		}
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// reaches reports whether a connection from h's namespace to addr:port
// gets its greeting. A dropped connection attempt is told by the dialer
// giving up: the timeout is how long a drop is waited for, not a limit on
// one that is let through.
func (h *host) reaches(t *testing.T, addr, port string) bool {
	t.Helper()
	return greeted(h.dial(t, addr, port))
}

// dial connects from h's namespace to addr:port.
func (h *host) dial(t *testing.T, addr, port string) (net.Conn, error) {
	t.Helper()
	return inNS(h.ns, func() (net.Conn, error) { return net.DialTimeout("tcp", net.JoinHostPort(addr, port), time.Second) })
}

// limit is Limit on h's namespace.
func (h *host) limit(t *testing.T, allow ...string) {
	t.Helper()
	ns, err := os.Open(h.ns)
	require.NoError(t, err)
	defer ns.Close()
	require.NoError(t, Limit(ns, prefixes(allow...)))
}

// lift is Lift on h's namespace.
func (h *host) lift(t *testing.T) {
	t.Helper()
	ns, err := os.Open(h.ns)
	require.NoError(t, err)
	defer ns.Close()
	require.NoError(t, Lift(ns))
}

func greeted(c net.Conn, err error) bool {
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	return err == nil && string(b) == "hi"
}

func prefixes(ps ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestLimit(t *testing.T) {
	h := newHost(t)
	require.True(t, h.reaches(t, h.far, h.port), "before any limit")
	require.True(t, h.reaches(t, h.far6, h.port), "before any limit, IPv6")
	inPort := portOf(h.listenerInside)

	for _, tc := range []struct {
		name                   string
		allow                  []string
		near, far, near6, far6 bool
	}{
		{"one address", []string{h.near + "/32"}, true, false, false, false},
		{"a block holding both", []string{"10.248.0.0/13"}, true, true, false, false},
		{"a block written unmasked", []string{h.far + "/16"}, false, true, false, false},
		{"one IPv6 address", []string{h.far6 + "/128"}, false, false, false, true},
		{"an IPv6 block", []string{"fd00::/8"}, false, false, true, true},
		{"among others", []string{"192.0.2.0/24", "2001:db8::/32", h.far + "/32", h.near6 + "/128"}, false, true, true, false},
		{"nothing", nil, false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.limit(t, tc.allow...)
			assert.Equal(t, tc.near, h.reaches(t, h.near, h.port), "near")
			assert.Equal(t, tc.far, h.reaches(t, h.far, h.port), "far")
			assert.Equal(t, tc.near6, h.reaches(t, h.near6, h.port), "near, IPv6")
			assert.Equal(t, tc.far6, h.reaches(t, h.far6, h.port), "far, IPv6")
			assert.True(t, h.reaches(t, "127.0.0.1", inPort), "loopback always passes")
			assert.True(t, greeted(net.DialTimeout("tcp", net.JoinHostPort(h.self, inPort), 10*time.Second)),
				"a connection made to the namespace is answered")
		})
	}

	t.Run("lifted", func(t *testing.T) {
		h.lift(t)
		assert.True(t, h.reaches(t, h.near, h.port))
		assert.True(t, h.reaches(t, h.far, h.port))
		h.lift(t) // lifting twice is fine
	})
}

// A limit holds for connections already open: one to an address no longer
// allowed goes no further.
func TestLimitCutsWhatItNoLongerAllows(t *testing.T) {
	h := newHost(t)
	echo, err := net.Listen("tcp", net.JoinHostPort(h.far, "0"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	h.limit(t, h.far+"/32")
	c, err := h.dial(t, h.far, portOf(echo))
	require.NoError(t, err)
	defer c.Close()
	roundTrip := func() error {
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err := io.ReadFull(c, make([]byte, 1))
		return err
	}
	require.NoError(t, roundTrip(), "allowed")
	h.limit(t, h.near+"/32")
	assert.Error(t, roundTrip(), "the connection went on after its address was taken off the list")
}

func TestLimitErrors(t *testing.T) {
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer f.Close()
	assert.ErrorContains(t, Limit(f, nil), "setns", "a file that is not a namespace")
}
