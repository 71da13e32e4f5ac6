package toolbox

import (
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// cpuMeter turns the kernel's cumulative CPU times into a use since the
// previous sample (the first against the toolbox's start), so that one
// request needs no wait between two readings.
type cpuMeter struct {
	mu         sync.Mutex
	busy, all  uint64
	haveSample bool
}

// usedPct is the share of CPU time spent busy since the last call, in
// percent of every CPU of the machine.
func (m *cpuMeter) usedPct() float64 {
	busy, all, ok := readCPUTimes()
	if !ok {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var pct float64
	if m.haveSample && all > m.all {
		pct = 100 * float64(busy-min(busy, m.busy)) / float64(all-m.all)
	}
	m.busy, m.all, m.haveSample = busy, all, true
	return pct
}

func (s *server) handleSystemMetrics(w http.ResponseWriter, r *http.Request) {
	now := s.opts.Clock.Now().UTC()
	m := wire.SystemMetrics{
		CPUCount:      cpuCount(),
		CPUUsedPct:    s.cpu.usedPct(),
		Timestamp:     now.Format(time.RFC3339Nano),
		TimestampUnix: now.Unix(),
	}
	m.MemTotal, m.MemUsed, m.MemCache = readMemory()
	m.DiskTotal, m.DiskFree, m.DiskUsed = diskUsage(s.opts.HomeDir)
	writeJSON(w, http.StatusOK, m)
}

// cpuCount is the CPUs this sandbox may use: its cgroup's quota, rounded
// up, where one is set, else every CPU the process may run on.
func cpuCount() int {
	if n := cgroupCPUs(); n > 0 && n < runtime.NumCPU() {
		return n
	}
	return runtime.NumCPU()
}
