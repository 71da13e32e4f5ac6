package toolbox

import (
	"net/http"
	"sync"
	"time"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// Scopes of the figures GET /system/metrics answers, in its
// X-Sandplane-Metrics-Scope header: the sandbox's own (its cgroup bounds
// it), or the whole machine's (a native sandbox without a cgroup of its
// own, whose figures include every process of the host).
const (
	scopeSandbox = "sandbox"
	scopeMachine = "machine"
	scopeHeader  = "X-Sandplane-Metrics-Scope"
)

// sample is one reading of the figures metrics reports.
type sample struct {
	scope                       string
	cpus                        int
	memTotal, memUsed, memCache uint64
	// cpuBusy and cpuAll are cumulative CPU time busy and available, in
	// any one unit: their changes between two samples give the use.
	cpuBusy, cpuAll float64
}

// cpuMeter turns cumulative CPU times into a use since the previous sample
// (the first against the toolbox's start), so that one request needs no
// wait between two readings.
type cpuMeter struct {
	mu   sync.Mutex
	last sample
}

// usedPct is the share of the CPU time s's scope had that was spent busy
// since the last sample, in percent.
func (m *cpuMeter) usedPct(s sample) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var pct float64
	if m.last.scope == s.scope && s.cpuAll > m.last.cpuAll && s.cpuBusy >= m.last.cpuBusy {
		pct = min(100, 100*(s.cpuBusy-m.last.cpuBusy)/(s.cpuAll-m.last.cpuAll))
	}
	m.last = s
	return pct
}

func (s *server) handleSystemMetrics(w http.ResponseWriter, r *http.Request) {
	now := s.opts.Clock.Now().UTC()
	sm := readSample(now)
	m := wire.SystemMetrics{
		CPUCount:      sm.cpus,
		CPUUsedPct:    s.cpu.usedPct(sm),
		MemTotal:      sm.memTotal,
		MemUsed:       sm.memUsed,
		MemCache:      sm.memCache,
		Timestamp:     now.Format(time.RFC3339Nano),
		TimestampUnix: now.Unix(),
	}
	m.DiskTotal, m.DiskFree, m.DiskUsed = diskUsage(s.opts.HomeDir)
	w.Header().Set(scopeHeader, sm.scope)
	writeJSON(w, http.StatusOK, m)
}
