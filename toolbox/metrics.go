package toolbox

import (
	"net/http"
	"runtime"
	"sync"
	"time"
)

// SystemMetrics is the answer of GET /system/metrics (toolbox releases
// after v0.190.0; the SDK's sandbox.getMetricsLatest): one current sample.
// Sizes are bytes.
type SystemMetrics struct {
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	DiskFree      uint64  `json:"diskFree"`
	DiskTotal     uint64  `json:"diskTotal"`
	DiskUsed      uint64  `json:"diskUsed"`
	MemCache      uint64  `json:"memCache"`
	MemTotal      uint64  `json:"memTotal"`
	MemUsed       uint64  `json:"memUsed"`
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
}

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
	m := SystemMetrics{
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
