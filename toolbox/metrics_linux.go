//go:build linux

package toolbox

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readCPUTimes sums the first line of /proc/stat: busy and all jiffies.
func readCPUTimes() (busy, all uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range fields[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		all += n
		// idle (3) and iowait (4) are not busy.
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, all, true
}

// cgroupCPUs is the CPU quota of this process's cgroup (v2), rounded up;
// 0 when none is set.
func cgroupCPUs() int {
	b, err := os.ReadFile("/sys/fs/cgroup/cpu.max")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0
	}
	quota, err1 := strconv.ParseUint(f[0], 10, 64)
	period, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || period == 0 {
		return 0
	}
	return int((quota + period - 1) / period)
}

// readMemory reads the memory of the sandbox's cgroup (v2) when it has a
// limit, else the machine's: total, used (without reclaimable page cache)
// and page cache, in bytes.
func readMemory() (total, used, cache uint64) {
	info := keyedFile("/proc/meminfo", 1024)
	total, cache = info["MemTotal"], info["Cached"]
	if avail, ok := info["MemAvailable"]; ok && avail <= total {
		used = total - avail
	}
	limit, err := readUint("/sys/fs/cgroup/memory.max")
	if err != nil || limit == 0 || limit >= total {
		return total, used, cache
	}
	current, err := readUint("/sys/fs/cgroup/memory.current")
	if err != nil {
		return total, used, cache
	}
	file := keyedFile("/sys/fs/cgroup/memory.stat", 1)["file"]
	return limit, current - min(current, file), file
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
