package native

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/internal/procfs"
	"github.com/sandplane/sandplane/local/driver"
)

// busybox returns the path of a busybox binary, whose httpd makes a
// listener in one word.
func busybox(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox is not installed (apt-get install busybox-static)")
	}
	return p
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ports lists h's listeners, port numbers only.
func ports(t *testing.T, r *Driver, h driver.Handle) []netip.AddrPort {
	t.Helper()
	got, err := r.ListeningPorts(testCtx(t), h)
	require.NoError(t, err)
	return got
}

// waitListening waits until h's sandbox listens on every one of want.
func waitListening(t *testing.T, r *Driver, h driver.Handle, want ...netip.AddrPort) []netip.AddrPort {
	t.Helper()
	var got []netip.AddrPort
	require.Eventually(t, func() bool {
		got = ports(t, r, h)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}, hangGuard, 20*time.Millisecond, "the sandbox never listened on all of %v", want)
	return got
}

// killPIDFile kills the process whose pid the workload wrote to p, for
// processes that left the workload's process group.
func killPIDFile(t *testing.T, p string) {
	t.Helper()
	t.Cleanup(func() {
		b, err := os.ReadFile(p)
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
}

// TestListeningPortsAreTheSandboxs is about workloads without a PID
// namespace (the process-group fallback): there the process tree and the
// session say what is the sandbox's.
func TestListeningPortsAreTheSandboxs(t *testing.T) {
	bb := busybox(t)
	r := New(WithContainment(ContainProcessGroup))
	direct, background, v6, escaped := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	spec := newSpec(t, "")
	escapedPID := filepath.Join(spec.Dir, "escaped.pid")
	killPIDFile(t, escapedPID)
	// The escaped server first: its subshell has exited, so it has left
	// the tree, before any server the test waits for listens. Started
	// last, it could be seen listening while its subshell still ran.
	spec.Command = []string{"/bin/sh", "-c", fmt.Sprintf(`
		( setsid %[1]s httpd -f -p 127.0.0.1:%[5]d & echo $! > %[6]s )
		%[1]s httpd -f -p 127.0.0.1:%[2]d &
		( %[1]s httpd -f -p 0.0.0.0:%[3]d & )
		%[1]s httpd -f -p [::1]:%[4]d &
		exec %[1]s sleep 600`, bb, direct, background, v6, escaped, escapedPID)}
	h := start(t, r, spec)

	// A listener of the test's own: never the sandbox's.
	mine, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer mine.Close()

	want := []netip.AddrPort{
		netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", direct)),
		netip.MustParseAddrPort(fmt.Sprintf("0.0.0.0:%d", background)),
		netip.MustParseAddrPort(fmt.Sprintf("[::1]:%d", v6)),
	}
	got := waitListening(t, r, h, want...)
	assert.ElementsMatch(t, want, got, "the direct child, the server whose parent exited (same session), the IPv6 one")
	// The escaped server listens too, but left both the tree and the
	// session: it is not the sandbox's any more.
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", escaped))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, hangGuard, 20*time.Millisecond)
	got = ports(t, r, h)
	assert.NotContains(t, got, netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", escaped)))
	assert.NotContains(t, got, mine.Addr().(*net.TCPAddr).AddrPort())

	t.Run("sock_diag and /proc agree", func(t *testing.T) {
		procs, err := sandboxProcs(testCtx(t), h)
		require.NoError(t, err)
		inodes, _ := socketsOf(procs)
		viaDiag, err := diagListeners(inodes)
		require.NoError(t, err)
		viaProc, err := readTables(os.Getpid(), inodes)
		require.NoError(t, err)
		assert.ElementsMatch(t, viaProc, viaDiag)
		assert.Len(t, viaDiag, 3)
	})

	require.NoError(t, r.Stop(testCtx(t), h, 0))
	assert.Empty(t, ports(t, r, h), "a stopped workload listens on nothing")
	assert.Empty(t, ports(t, r, driver.Handle{}), "the zero handle listens on nothing")
}

func TestListeningPortsInAPIDNamespace(t *testing.T) {
	bb := busybox(t)
	if out, err := exec.Command("unshare", "--pid", "--fork", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a PID namespace here (needs root or user namespaces): %v: %s", err, out)
	}
	r := New()
	port := freeTCPPort(t)
	spec := newSpec(t, "")
	// Inside the namespace the server leaves the session and is reparented
	// to the namespace's init: only the namespace still says whose it is.
	// --kill-child ends the namespace with the workload.
	spec.Command = []string{"unshare", "--pid", "--kill-child", "/bin/sh", "-c",
		fmt.Sprintf(`( setsid %[1]s httpd -f -p 127.0.0.1:%[2]d & ); exec %[1]s sleep 600`, bb, port)}
	h := start(t, r, spec)
	want := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", port))
	waitListening(t, r, h, want)

	init := childOf(t, h.PID)

	// A process that joined the namespace from outside (nsenter) is no
	// descendant of the workload, yet it is the sandbox's.
	joined := freeTCPPort(t)
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(init), "--pid", "--", bb, "httpd", "-f", "-p", fmt.Sprintf("127.0.0.1:%d", joined))
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	wantJoined := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", joined))
	waitListening(t, r, h, want, wantJoined)

	t.Run("from the namespace's init", func(t *testing.T) {
		st, err := readStat(init)
		require.NoError(t, err)
		got := ports(t, r, driver.Handle{PID: init, StartTime: st.StartTime})
		assert.ElementsMatch(t, []netip.AddrPort{want, wantJoined}, got)
	})
}

// childOf returns the one child of pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	var kids []int
	require.NoError(t, eachProc(context.Background(), func(p int) {
		b, err := os.ReadFile(procPath(p, "stat"))
		if err != nil {
			return
		}
		if st, err := procfs.ParseStat(b); err == nil && st.PPID == pid {
			kids = append(kids, p)
		}
	}))
	require.Len(t, kids, 1, "children of %d", pid)
	return kids[0]
}

// kernelHex formats addr as the kernel prints it in /proc/net/tcp: 32-bit
// words in host byte order.
func kernelHex(ap netip.AddrPort) string {
	b := ap.Addr().AsSlice()
	var s strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&s, "%08X", binary.NativeEndian.Uint32(b[i:]))
	}
	return fmt.Sprintf("%s:%04X", s.String(), ap.Port())
}

// TestListenersAmong: the sockets of the table that are the sandbox's
// (internal/procfs parses and fuzzes the table itself).
func TestListenersAmong(t *testing.T) {
	const tcpListen = "0A"
	line := func(local netip.AddrPort, state string, inode int) string {
		return fmt.Sprintf("   0: %s 00000000:0000 %s 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 100 0 0 10 0",
			kernelHex(local), state, inode)
	}
	v4 := netip.MustParseAddrPort("127.0.0.1:8080")
	any4 := netip.MustParseAddrPort("0.0.0.0:3000")
	v6 := netip.MustParseAddrPort("[::1]:4000")
	mapped := netip.MustParseAddrPort("[::ffff:127.0.0.1]:5000")
	table := strings.Join([]string{
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
		line(v4, tcpListen, 11),
		line(any4, tcpListen, 12),
		line(v6, tcpListen, 13),
		line(mapped, tcpListen, 14),
		line(netip.MustParseAddrPort("127.0.0.1:9000"), "01", 15),      // established, not listening
		line(netip.MustParseAddrPort("127.0.0.1:9001"), tcpListen, 99), // someone else's
		"garbage",
	}, "\n")
	tests := []struct {
		name   string
		inodes []uint64
		want   []netip.AddrPort
	}{
		{"every listener of ours", []uint64{11, 12, 13, 14, 15}, []netip.AddrPort{v4, any4, v6, mapped}},
		{"only our inodes", []uint64{12}, []netip.AddrPort{any4}},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := map[uint64]bool{}
			for _, i := range tt.inodes {
				set[i] = true
			}
			assert.Equal(t, tt.want, listenersAmong([]byte(table), set))
		})
	}
}
