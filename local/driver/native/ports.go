package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/internal/procfs"
	"github.com/sandplane/sandplane/local/driver"
)

var _ driver.PortLister = (*Driver)(nil)

// member is a process of a sandbox. The start time lets a scan notice that
// a pid was reused while it looked.
type member struct {
	pid   int
	start uint64
}

// ListeningPorts returns the TCP sockets in LISTEN state held by the
// processes of h's sandbox, read from /proc at the time of the call.
//
// The sandbox's processes are those of h's PID namespace when it has one of
// its own (or of the namespace it made for its children, as `unshare --pid
// --fork` does). Otherwise they are h's descendants and the members of its
// session, which covers servers started in the background (`nohup srv &`)
// whose parent has exited; a process that calls setsid and is reparented
// leaves the sandbox, so such a port is never reached (the safe side).
//
// Sockets are matched by inode against the tables of each process's own
// network namespace (/proc/PID/net/tcp and tcp6), so a sandbox in a network
// namespace of its own is read correctly.
func (r *Driver) ListeningPorts(ctx context.Context, h driver.Handle) ([]netip.AddrPort, error) {
	running, err := alive(h)
	if err != nil || !running {
		return nil, err
	}
	procs, err := sandboxProcs(ctx, h)
	if err != nil {
		return nil, err
	}
	inodes, nets := socketsOf(procs)
	if len(inodes) == 0 {
		return nil, nil
	}
	return listeners(nets, inodes)
}

func procPath(pid int, rest string) string {
	return procRoot + "/" + strconv.Itoa(pid) + "/" + rest
}

// nsOf names the namespace of kind ("pid", "pid_for_children", "net") that
// pid is in, as "pid:[4026531836]".
func nsOf(pid int, kind string) (string, error) {
	return os.Readlink(procPath(pid, "ns/"+kind))
}

// sandboxProcs lists the processes of h's sandbox, h's own included.
func sandboxProcs(ctx context.Context, h driver.Handle) ([]member, error) {
	own, err := os.Readlink(procRoot + "/self/ns/pid")
	if err != nil {
		return nil, classify(phaseInspect, "read own PID namespace", err)
	}
	ns, err := nsOf(h.PID, "pid")
	if gone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify(phaseInspect, fmt.Sprintf("read the PID namespace of process %d", h.PID), err)
	}
	self := member{h.PID, h.StartTime}
	if ns != own {
		return inNamespace(ctx, ns, self)
	}
	if kids, err := nsOf(h.PID, "pid_for_children"); err == nil && kids != own {
		return inNamespace(ctx, kids, self)
	}
	return descendants(ctx, self)
}

// eachProc calls f for every pid in /proc.
func eachProc(ctx context.Context, f func(pid int)) error {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return classify(phaseInspect, "list processes", err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			f(pid)
		}
	}
	return nil
}

// inNamespace lists the processes of PID namespace ns and of the namespaces
// nested in it (a workload's init's namespace holds bwrap's, or one made
// with unshare), plus self.
func inNamespace(ctx context.Context, ns string, self member) ([]member, error) {
	own, err := os.Readlink(procRoot + "/self/ns/pid")
	if err != nil {
		return nil, classify(phaseInspect, "read own PID namespace", err)
	}
	var nsStat unix.Stat_t
	if err := unix.Stat(procPath(self.pid, "ns/pid"), &nsStat); err != nil {
		return nil, nil // self is gone
	}
	out := []member{self}
	err = eachProc(ctx, func(pid int) {
		if pid == self.pid {
			return
		}
		// Other users' processes and processes that just ended are
		// unreadable, and neither can be the sandbox's.
		got, err := nsOf(pid, "pid")
		if err != nil || got == own || got != ns && !nestedIn(pid, nsStat.Ino) {
			return
		}
		if st, err := readStat(pid); err == nil && !st.Zombie() {
			out = append(out, member{pid, st.StartTime})
		}
	})
	return out, err
}

// nsGetParent is ioctl NS_GET_PARENT, _IO(0xb7, 0x2): a descriptor of the
// parent of a PID namespace.
const nsGetParent = 0xb702

// nestedIn reports whether process pid's PID namespace is nested in the one
// whose inode is ino. The walk up ends at the caller's own namespace, whose
// parent the kernel does not reveal.
func nestedIn(pid int, ino uint64) bool {
	fd, err := unix.Open(procPath(pid, "ns/pid"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	for {
		parent, err := unix.IoctlRetInt(fd, nsGetParent)
		unix.Close(fd)
		if err != nil {
			return false
		}
		fd = parent
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return false
		}
		if st.Ino == ino {
			unix.Close(fd)
			return true
		}
	}
}

// descendants lists self, the members of its session (self leads one:
// Start made it with setsid) and the descendants of them all.
func descendants(ctx context.Context, self member) ([]member, error) {
	type proc struct {
		member
		ppid int
	}
	children := map[int][]proc{}
	var session []member
	err := eachProc(ctx, func(pid int) {
		b, err := os.ReadFile(procPath(pid, "stat"))
		if err != nil {
			return
		}
		st, err := procfs.ParseStat(b)
		if err != nil || st.Zombie() || pid == self.pid {
			return
		}
		p := proc{member{pid, st.StartTime}, st.PPID}
		children[st.PPID] = append(children[st.PPID], p)
		if st.Session == self.pid {
			session = append(session, p.member)
		}
	})
	if err != nil {
		return nil, err
	}
	out := append([]member{self}, session...)
	seen := map[int]bool{}
	for _, m := range out {
		seen[m.pid] = true
	}
	for i := 0; i < len(out); i++ {
		for _, c := range children[out[i].pid] {
			if !seen[c.pid] {
				seen[c.pid] = true
				out = append(out, c.member)
			}
		}
	}
	return out, nil
}

// socketsOf returns the inodes of the sockets procs hold, and for each
// network namespace among them the pids that can read its tables.
func socketsOf(procs []member) (inodes map[uint64]bool, nets map[string][]int) {
	inodes, nets = map[uint64]bool{}, map[string][]int{}
	for _, m := range procs {
		found := socketInodes(m.pid)
		if len(found) == 0 {
			continue
		}
		net, err := nsOf(m.pid, "net")
		if err != nil {
			continue
		}
		// A pid reused during the scan holds someone else's sockets.
		if st, err := readStat(m.pid); err != nil || st.StartTime != m.start {
			continue
		}
		for _, ino := range found {
			inodes[ino] = true
		}
		nets[net] = append(nets[net], m.pid)
	}
	return inodes, nets
}

// socketInodes lists the inodes of the sockets among pid's open files.
func socketInodes(pid int) []uint64 {
	dir := procPath(pid, "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []uint64
	for _, e := range entries {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		if ino, ok := procfs.SocketInode(link); ok {
			out = append(out, ino)
		}
	}
	return out
}

// listeners reads each network namespace's TCP tables through one of its
// processes and keeps the listening sockets among inodes. The caller's own
// namespace is asked through sock_diag for its listening sockets only:
// reading /proc/PID/net/tcp walks every connection of the host, which takes
// milliseconds on a busy one, on every proxied request.
func listeners(nets map[string][]int, inodes map[uint64]bool) ([]netip.AddrPort, error) {
	own, _ := os.Readlink(procRoot + "/self/ns/net")
	var out []netip.AddrPort
	for net, pids := range nets {
		if net == own {
			if found, err := diagListeners(inodes); err == nil {
				out = append(out, found...)
				continue
			}
			// No sock_diag here (the inet_diag module is missing): read the
			// tables as for any other namespace.
		}
		var errs []error
		for _, pid := range pids {
			found, err := readTables(pid, inodes)
			if err == nil {
				out = append(out, found...)
				errs = nil
				break
			}
			errs = append(errs, err)
		}
		// Every process of the namespace ended meanwhile: its sockets are
		// gone too. Anything else is a real failure to read.
		for _, err := range errs {
			if !gone(err) {
				return nil, classify(phaseInspect, "read the sandbox's TCP sockets", err)
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out), nil
}

func readTables(pid int, inodes map[uint64]bool) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		b, err := os.ReadFile(procPath(pid, name))
		if errors.Is(err, os.ErrNotExist) && name == "net/tcp6" {
			continue // IPv6 is off
		}
		if err != nil {
			return nil, err
		}
		out = append(out, listenersAmong(b, inodes)...)
	}
	return out, nil
}

// listenersAmong keeps the listening sockets of a TCP table whose inodes
// are among inodes.
func listenersAmong(table []byte, inodes map[uint64]bool) []netip.AddrPort {
	var out []netip.AddrPort
	for _, l := range procfs.ParseTCPListeners(table) {
		if inodes[l.Inode] {
			out = append(out, l.Addr)
		}
	}
	return out
}

// diagListeners asks the kernel (NETLINK_SOCK_DIAG) for the TCP sockets in
// LISTEN state of the caller's network namespace and keeps those among
// inodes.
func diagListeners(inodes map[uint64]bool) ([]netip.AddrPort, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []netip.AddrPort
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		found, err := diagDump(fd, family, inodes)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// Layout of the sock_diag messages (linux/inet_diag.h).
const (
	sizeofNlMsghdr     = 16
	sizeofInetDiagReq  = 56 // struct inet_diag_req_v2
	sizeofInetDiagMsg  = 72 // struct inet_diag_msg
	inetDiagMsgSrc     = 8  // id.idiag_src, after family, state, timer, retrans, sport, dport
	inetDiagMsgSport   = 4  // id.idiag_sport, big endian
	inetDiagMsgInode   = 68 // idiag_inode
	tcpListenStateMask = 1 << 10
)

// diagDump runs one inet_diag dump of family's listening TCP sockets on fd.
func diagDump(fd int, family uint8, inodes map[uint64]bool) ([]netip.AddrPort, error) {
	req := make([]byte, sizeofNlMsghdr+sizeofInetDiagReq)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], uint32(family)) // sequence number
	req[16], req[17] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[20:], tcpListenStateMask)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				return nil, fmt.Errorf("sock_diag: %w", diagErrno(m.Data))
			}
			if ap, ino, ok := parseDiagMsg(m.Data); ok && inodes[ino] {
				out = append(out, ap)
			}
		}
	}
}

// parseDiagMsg reads the local address and inode of an inet_diag_msg.
func parseDiagMsg(b []byte) (netip.AddrPort, uint64, bool) {
	if len(b) < sizeofInetDiagMsg {
		return netip.AddrPort{}, 0, false
	}
	port := binary.BigEndian.Uint16(b[inetDiagMsgSport:])
	var addr netip.Addr
	switch b[0] {
	case unix.AF_INET:
		addr = netip.AddrFrom4([4]byte(b[inetDiagMsgSrc : inetDiagMsgSrc+4]))
	case unix.AF_INET6:
		addr = netip.AddrFrom16([16]byte(b[inetDiagMsgSrc : inetDiagMsgSrc+16]))
	default:
		return netip.AddrPort{}, 0, false
	}
	return netip.AddrPortFrom(addr, port), uint64(binary.NativeEndian.Uint32(b[inetDiagMsgInode:])), true
}

// diagErrno is the error an NLMSG_ERROR message carries.
func diagErrno(b []byte) error {
	if len(b) < 4 {
		return errors.New("truncated netlink error")
	}
	if e := -int32(binary.NativeEndian.Uint32(b)); e != 0 {
		return syscall.Errno(e)
	}
	return errors.New("netlink error without an errno")
}
