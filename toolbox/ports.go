package toolbox

import (
	"net/http"
	"os"
	"slices"
	"strconv"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// sandboxPorts lists the TCP ports that the sandbox's processes listen on:
// the processes below the toolbox in the process tree. The toolbox's own
// listener is not one of them; neither are the host's other services when
// the sandbox shares the host's network.
func sandboxPorts() []int {
	inodes := map[uint64]bool{}
	for pid := range descendants(os.Getpid()) {
		socketInodes(pid, inodes)
	}
	seen := map[int]bool{}
	for inode, port := range listeningTCP() {
		if inodes[inode] {
			seen[port] = true
		}
	}
	ports := make([]int, 0, len(seen))
	for p := range seen {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports
}

func (s *server) handleGetPorts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.PortList{Ports: sandboxPorts()})
}

func (s *server) handlePortInUse(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		s.fail(w, r, errorf(http.StatusBadRequest, "invalid port %q: want a number from 1 to 65535", r.PathValue("port")))
		return
	}
	writeJSON(w, http.StatusOK, wire.IsPortInUseResponse{IsInUse: slices.Contains(sandboxPorts(), port)})
}
