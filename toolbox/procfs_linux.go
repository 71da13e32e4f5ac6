//go:build linux

package toolbox

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/sandplane/sandplane/internal/procfs"
)

// procStat is what the toolbox reads of /proc/<pid>/stat.
type procStat struct {
	pid int
	procfs.Stat
}

// readProcStat reads /proc/<pid>/stat (internal/procfs).
func readProcStat(pid int) (procStat, bool) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return procStat{}, false
	}
	return procStat{pid, st}, true
}

// allProcs lists every process this toolbox can see.
func allProcs() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procStat, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			out = append(out, st)
		}
	}
	return out
}

// killSession kills every process of the terminal session sid (a PTY's
// shell and whatever it started, background jobs in their own process
// groups included). Processes that left the session with setsid survive.
func killSession(sid int) {
	for _, p := range allProcs() {
		if p.Session == sid {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

// treeMember is a process of a session tree as read at one moment.
type treeMember struct {
	pid   int
	start uint64
}

// sessionTree lists what killSessionTree would kill now: leader, the
// processes in its session or process group, and those below it.
func sessionTree(leader int) []treeMember {
	procs := allProcs()
	below := descendantsIn(procs, leader)
	var out []treeMember
	for _, p := range procs {
		if !p.Zombie() && (p.pid == leader || p.Session == leader || p.PGrp == leader || below[p.pid]) {
			out = append(out, treeMember{p.pid, p.StartTime})
		}
	}
	return out
}

// signalMembers sends sig to each member that is still the process it was,
// not a later one that got its pid.
func signalMembers(ms []treeMember, sig syscall.Signal) {
	for _, m := range ms {
		if st, ok := readProcStat(m.pid); ok && st.StartTime == m.start && !st.Zombie() {
			syscall.Kill(m.pid, sig)
		}
	}
}

// maxKillRounds bounds killSessionTree's rescans. Each round kills what it
// finds; a process forked while a round ran is found by the next.
const maxKillRounds = 16

// killSessionTree kills leader, which leads a terminal session and a
// process group, and every process that is in that session or group or
// below leader in the process tree: background jobs in process groups of
// their own, and children that called setsid. The tree is read before
// anything is killed, since a child of a dead leader is no longer below
// it. A process that left the session and whose parent was gone already
// cannot be told from a stranger and survives.
func killSessionTree(leader int) {
	for range maxKillRounds {
		procs := allProcs()
		below := descendantsIn(procs, leader)
		killed := 0
		for _, p := range procs {
			if p.Zombie() {
				continue
			}
			if p.pid == leader || p.Session == leader || p.PGrp == leader || below[p.pid] {
				syscall.Kill(p.pid, syscall.SIGKILL)
				killed++
			}
		}
		if killed == 0 {
			return
		}
	}
	killGroup(leader)
}

// descendants returns the pids below root in the process tree.
func descendants(root int) map[int]bool {
	return descendantsIn(allProcs(), root)
}

func descendantsIn(procs []procStat, root int) map[int]bool {
	children := map[int][]int{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.pid)
	}
	out := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

// socketInodes returns the inodes of the sockets that pid holds open.
func socketInodes(pid int, into map[uint64]bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if n, ok := procfs.SocketInode(link); ok {
			into[n] = true
		}
	}
}

// listeningTCP maps the inode of every listening TCP socket (IPv4 and
// IPv6) to its local port.
func listeningTCP() map[uint64]int {
	out := map[uint64]int{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range procfs.ParseTCPListeners(b) {
			out[l.Inode] = int(l.Addr.Port())
		}
	}
	return out
}
