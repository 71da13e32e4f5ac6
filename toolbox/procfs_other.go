//go:build !linux

package toolbox

import (
	"os"
	"syscall"
)

// killSession kills the session leader; without /proc the rest of the
// session cannot be found.
func killSession(sid int) {
	if p, err := os.FindProcess(sid); err == nil {
		p.Kill()
	}
}

// killSessionTree kills the leader and its process group; without /proc
// the rest of its session cannot be found.
func killSessionTree(leader int) {
	killGroup(leader)
	killSession(leader)
}

// treeMember is a session's leader: without /proc the rest of the
// session cannot be found.
type treeMember struct{ pid int }

func sessionTree(leader int) []treeMember { return []treeMember{{leader}} }

func signalMembers(ms []treeMember, sig syscall.Signal) {
	for _, m := range ms {
		if p, err := os.FindProcess(m.pid); err == nil {
			p.Signal(sig)
		}
	}
}

// descendants is unknown without /proc.
func descendants(int) map[int]bool { return nil }

// listeningTCP is unknown without /proc.
func listeningTCP() map[uint64]int { return nil }

func socketInodes(int, map[uint64]bool) {}
