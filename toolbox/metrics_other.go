//go:build !linux

package toolbox

// Without /proc and cgroups the toolbox reports the CPU count only.

func readCPUTimes() (busy, all uint64, ok bool)       { return 0, 0, false }
func cgroupCPUs() int                                 { return 0 }
func readMemory() (total, used, cache uint64)         { return 0, 0, 0 }
func diskUsage(dir string) (total, free, used uint64) { return 0, 0, 0 }
