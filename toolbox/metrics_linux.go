//go:build linux

package toolbox

import (
	"bufio"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// readSample reads the sandbox's figures at now: its cgroup's where the
// cgroup bounds it (a container, or a native sandbox in a cgroup of its
// own), else the machine's, and says which.
func readSample(now time.Time) sample {
	m := machineSample()
	cg := readCgroup(cgroupRoot)
	if !cg.bounded(m.memTotal, m.cpus) {
		return m
	}
	s := sample{scope: scopeSandbox, cpus: m.cpus, memTotal: m.memTotal, memUsed: m.memUsed, memCache: m.memCache}
	if cg.memLimit > 0 && cg.memLimit < m.memTotal {
		s.memTotal, s.memUsed, s.memCache = cg.memLimit, cg.memCurrent-min(cg.memCurrent, cg.memFile), cg.memFile
	}
	share := float64(m.cpus)
	if cg.cpuQuota > 0 && cg.cpuQuota < share {
		share = cg.cpuQuota
		s.cpus = int(math.Ceil(share))
	}
	// Busy CPU time against the time the sandbox's share of CPUs had.
	s.cpuBusy, s.cpuAll = cg.cpuUsage.Seconds(), share*float64(now.UnixNano())/1e9
	return s
}

// machineSample is the whole machine: /proc/stat's first line (busy and
// all jiffies) and /proc/meminfo (used without reclaimable page cache).
func machineSample() sample {
	s := sample{scope: scopeMachine, cpus: runtime.NumCPU()}
	s.cpuBusy, s.cpuAll = procStatTimes()
	info := keyedFile("/proc/meminfo", 1024)
	s.memTotal, s.memCache = info["MemTotal"], info["Cached"]
	if avail, ok := info["MemAvailable"]; ok && avail <= s.memTotal {
		s.memUsed = s.memTotal - avail
	}
	return s
}

// procStatTimes sums the first line of /proc/stat: busy and all jiffies;
// zeros when it cannot be read.
func procStatTimes() (busy, all float64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0
	}
	for i, v := range fields[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0
		}
		all += float64(n)
		// idle (3) and iowait (4) are not busy.
		if i != 3 && i != 4 {
			busy += float64(n)
		}
	}
	return busy, all
}

// keyedFile parses "Name: value [kB]" or "name value" lines, values times
// unit.
func keyedFile(p string, unit uint64) map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile(p)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[strings.TrimSuffix(f[0], ":")] = n * unit
		}
	}
	return out
}

func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// diskUsage is the file system holding dir: total, free to the user, used.
func diskUsage(dir string) (total, free, used uint64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, 0
	}
	bs := uint64(st.Bsize)
	return st.Blocks * bs, st.Bavail * bs, (st.Blocks - st.Bfree) * bs
}
