//go:build linux

package toolbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroupRoot is where the kernel shows this process's cgroups: in a
// container its own, on the host the whole machine's.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupStats is what the cgroup at a root says of the sandbox: its limits
// and what it uses. A cgroup is the sandbox's only when it bounds it
// (bounded): the host's root cgroup, where a native sandbox without one
// sits, has no limits and counts every process of the machine.
type cgroupStats struct {
	memLimit   uint64        // bytes; 0: none
	memCurrent uint64        // bytes, page cache included
	memFile    uint64        // page cache, bytes
	cpuQuota   float64       // CPUs; 0: none
	cpuUsage   time.Duration // CPU time used since the cgroup began
}

// bounded reports whether the cgroup limits the sandbox below a machine of
// memTotal bytes and cpus CPUs, so that its figures are the sandbox's.
func (c cgroupStats) bounded(memTotal uint64, cpus int) bool {
	return (c.memLimit > 0 && c.memLimit < memTotal) || (c.cpuQuota > 0 && c.cpuQuota < float64(cpus))
}

// readCgroup reads the cgroup at root: v2's unified files where
// cgroup.controllers is, else v1's memory, cpu and cpuacct controllers.
// What cannot be read is zero.
func readCgroup(root string) cgroupStats {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return readCgroupV2(root)
	}
	return readCgroupV1(root)
}

func readCgroupV2(root string) cgroupStats {
	var c cgroupStats
	c.memLimit, _ = readUint(filepath.Join(root, "memory.max")) // "max" is no limit
	c.memCurrent, _ = readUint(filepath.Join(root, "memory.current"))
	c.memFile = keyedFile(filepath.Join(root, "memory.stat"), 1)["file"]
	if b, err := os.ReadFile(filepath.Join(root, "cpu.max")); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			c.cpuQuota = quotaCPUs(f[0], f[1])
		}
	}
	c.cpuUsage = time.Duration(keyedFile(filepath.Join(root, "cpu.stat"), 1)["usage_usec"]) * time.Microsecond
	return c
}

func readCgroupV1(root string) cgroupStats {
	var c cgroupStats
	mem := filepath.Join(root, "memory")
	c.memLimit, _ = readUint(filepath.Join(mem, "memory.limit_in_bytes"))
	c.memCurrent, _ = readUint(filepath.Join(mem, "memory.usage_in_bytes"))
	c.memFile = keyedFile(filepath.Join(mem, "memory.stat"), 1)["total_cache"]
	quota, err1 := os.ReadFile(filepath.Join(root, "cpu", "cpu.cfs_quota_us"))
	period, err2 := os.ReadFile(filepath.Join(root, "cpu", "cpu.cfs_period_us"))
	if err1 == nil && err2 == nil {
		c.cpuQuota = quotaCPUs(strings.TrimSpace(string(quota)), strings.TrimSpace(string(period)))
	}
	usage, _ := readUint(filepath.Join(root, "cpuacct", "cpuacct.usage")) // nanoseconds
	c.cpuUsage = time.Duration(usage)
	return c
}

// quotaCPUs is a CFS quota over its period in CPUs; 0 for none ("max" in
// v2, -1 in v1) or what does not parse.
func quotaCPUs(quota, period string) float64 {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return float64(q) / float64(p)
}
