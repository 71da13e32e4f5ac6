package procfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Root is where the proc filesystem is mounted.
const Root = "/proc"

// ErrMalformed says that a /proc entry did not read as the kernel writes it.
var ErrMalformed = errors.New("malformed /proc entry")

// Stat is the part of /proc/PID/stat sandplane needs.
type Stat struct {
	State     byte // R, S, D, Z, ...
	PPID      int
	PGrp      int
	Session   int
	StartTime uint64 // clock ticks since boot: with the pid, tells a process from a later one given its pid
}

// Zombie reports whether the process has ended and waits for its parent
// (Z), or is dead (X, x).
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' || s.State == 'x' }

// Path is the file rest (such as "stat" or "fd") of process pid.
func Path(pid int, rest string) string {
	return Root + "/" + strconv.Itoa(pid) + "/" + rest
}

// ReadStat reads and parses /proc/PID/stat. A process that is gone is the
// error of the read (fs.ErrNotExist or ESRCH).
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(Path(pid, "stat"))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseStat decodes a /proc/PID/stat line. The command name (field 2) is
// in parentheses and may itself contain spaces and parentheses, so fields
// are counted from the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, ErrMalformed
	}
	// f[0] is field 3 (state); field n is f[n-3], up to the start time (22).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22-3+1 || len(f[0]) != 1 || !isLetter(f[0][0]) {
		return Stat{}, ErrMalformed
	}
	ppid, err1 := strconv.Atoi(f[4-3])
	pgrp, err2 := strconv.Atoi(f[5-3])
	sid, err3 := strconv.Atoi(f[6-3])
	start, err4 := strconv.ParseUint(f[22-3], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Stat{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return Stat{State: f[0][0], PPID: ppid, PGrp: pgrp, Session: sid, StartTime: start}, nil
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// ParseNSpid returns the pids of a process from /proc's PID namespace down
// to its own, from the NSpid line of /proc/PID/status: one pid for a
// process in /proc's namespace, [host pid, 1] for the init of a namespace
// made from it. Kernels before 4.1 have no NSpid line, and the answer is
// [0].
func ParseNSpid(status []byte) ([]int, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		var out []int
		for _, f := range strings.Fields(string(rest)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("%w: NSpid %q", ErrMalformed, rest)
			}
			out = append(out, n)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: empty NSpid", ErrMalformed)
		}
		return out, nil
	}
	return []int{0}, nil
}

// SocketInode reads the inode of a socket from the target of one of a
// process's /proc/PID/fd links, "socket:[12345]"; ok is false for a link
// to anything else.
func SocketInode(link string) (inode uint64, ok bool) {
	rest, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// tcpListen is the kernel's TCP_LISTEN state in /proc/net/tcp.
const tcpListen = "0A"

// Listener is a listening socket of a TCP table.
type Listener struct {
	Inode uint64
	Addr  netip.AddrPort // the local address
}

// ParseTCPListeners returns the listening sockets of a /proc/net/tcp or
// tcp6 table (a header line, then one socket a line). Lines that do not
// parse, and sockets without an inode (in a namespace no process holds),
// are left out.
func ParseTCPListeners(table []byte) []Listener {
	var out []Listener
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		if ap, ok := parseHexAddrPort(f[1]); ok {
			out = append(out, Listener{Inode: ino, Addr: ap})
		}
	}
	return out
}

// parseHexAddrPort decodes the kernel's "0100007F:1F90": the address as
// 32-bit words in host byte order, the port in plain hex.
func parseHexAddrPort(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(p) != 4 || len(a) != 8 && len(a) != 32 {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(port)), true
}
