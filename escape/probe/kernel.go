//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/escape"
)

// result is an outcome with its evidence.
func result(escaped bool, ev []string) escape.Result {
	out := escape.Blocked
	if escaped {
		out = escape.Escaped
	}
	return escape.Result{Outcome: out, Evidence: strings.Join(ev, "; ")}
}

// neighbourPIDs are the neighbour's processes: those the test names and
// those /proc shows with its marker.
func neighbourPIDs(c *config) []int {
	pids := append([]int(nil), c.Neighbour.PIDs...)
	for pid, env := range procFiles("environ") {
		if sandboxOf(env) == c.Neighbour.ID {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isNeighbour reports whether pid, as the probe sees it, is the
// neighbour's: it carries its marker, or it is not the probe's own
// sandbox's.
func isNeighbour(c *config, pid int) bool {
	env, err := readSmall("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return true // reached, but it is not ours to read: count it
	}
	id := sandboxOf(env)
	return id == c.Neighbour.ID || id != os.Getenv("SANDPLANE_SANDBOX_ID")
}

// tryPtrace signals (signal 0, which does nothing) and attaches to every
// neighbour process, detaching at once.
func tryPtrace(c *config) escape.Result {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ev []string
	escaped := false
	for _, pid := range neighbourPIDs(c) {
		sig := syscall.Kill(pid, 0)
		att := syscall.PtraceAttach(pid)
		if att == nil {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WALL, nil)
			_ = syscall.PtraceDetach(pid)
		}
		ev = append(ev, fmt.Sprintf("%d: signal %s, attach %s", pid, shortErr(sig), shortErr(att)))
		if (sig == nil || att == nil) && isNeighbour(c, pid) {
			escaped = true
		}
	}
	return result(escaped, ev)
}

// tryMount mounts a tmpfs, a proc and a bind of its own work dir over a
// directory of its own sandbox, unmounting whatever it managed. Never a
// recursive bind: unmounting one of a shared tree propagates to the
// mounts it copied, the host's among them.
func tryMount(c *config) escape.Result {
	dir := filepath.Join(c.WorkDir, "escape-mnt")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return result(false, []string{"mkdir: " + shortErr(err)})
	}
	defer os.Remove(dir)
	var ev []string
	escaped := false
	for _, m := range []struct {
		src, fstype string
		flags       uintptr
	}{{"tmpfs", "tmpfs", 0}, {"proc", "proc", 0}, {c.WorkDir, "bind", syscall.MS_BIND}} {
		fstype := m.fstype
		if m.flags&syscall.MS_BIND != 0 {
			fstype = ""
		}
		err := syscall.Mount(m.src, dir, fstype, m.flags, "")
		ev = append(ev, fmt.Sprintf("mount %s %s: %s", m.fstype, m.src, shortErr(err)))
		if err == nil {
			escaped = true
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	}
	return result(escaped, ev)
}

// partitions are the block devices /proc/partitions lists.
func partitions() (names []string, devs []uint64) {
	f, err := os.Open("/proc/partitions")
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) != 4 {
			continue
		}
		major, err1 := strconv.Atoi(fl[0])
		minor, err2 := strconv.Atoi(fl[1])
		if err1 == nil && err2 == nil {
			names = append(names, fl[3])
			devs = append(devs, unix.Mkdev(uint32(major), uint32(minor)))
		}
	}
	return names, devs
}

// tryBlockDevices reads the first sector of the host's disks through /dev
// and through device nodes it makes itself.
func tryBlockDevices(c *config) escape.Result {
	var ev []string
	escaped := false
	readable := func(p string) bool {
		f, err := os.Open(p)
		if err != nil {
			ev = append(ev, p+": "+shortErr(err))
			return false
		}
		defer f.Close()
		n, err := f.Read(make([]byte, 512))
		ev = append(ev, fmt.Sprintf("%s: read %d bytes (%s)", p, n, shortErr(err)))
		return n > 0
	}
	names, devs := partitions()
	for i, name := range names {
		if i >= 4 {
			break
		}
		if readable("/dev/" + name) {
			escaped = true
		}
		node := filepath.Join(c.WorkDir, "escape-blk")
		if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(devs[i])); err != nil {
			ev = append(ev, "mknod "+name+": "+shortErr(err))
			continue
		}
		if readable(node) {
			escaped = true
		}
		_ = os.Remove(node)
	}
	if len(names) == 0 {
		ev = append(ev, "/proc/partitions lists no device")
	}
	return result(escaped, ev)
}

// Magic numbers of the cgroup file systems (statfs f_type).
const (
	cgroupMagic  = 0x27e0eb
	cgroup2Magic = 0x63677270
)

// isCgroupFS reports whether dir is a directory of a cgroup file system,
// and not, say, the tmpfs a cgroup v1 machine mounts its hierarchies on.
func isCgroupFS(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	return st.Type == cgroupMagic || st.Type == cgroup2Magic
}

// cgroupDirs are the probe's own cgroup directories as the sandbox sees
// them, one per hierarchy (cgroup v2, or each v1 controller): under the
// path /proc/self/cgroup names, or, in a cgroup namespace or a container
// that mounts its own cgroup at the top, the hierarchy's top.
func cgroupDirs() []string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if !seen[d] && isCgroupFS(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		var tops []string
		switch ctrl := strings.TrimPrefix(f[1], "name="); {
		case f[0] == "0" && f[1] == "":
			tops = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
		default:
			tops = []string{filepath.Join("/sys/fs/cgroup", ctrl)}
		}
		for _, top := range tops {
			if d := filepath.Join(top, f[2]); isCgroupFS(d) {
				add(d)
			} else {
				add(top)
			}
		}
	}
	return out
}

// ownCgroup is the probe's cgroup v2 directory, or its v1 pids
// controller's, as this sandbox sees it.
func ownCgroup() string {
	for _, d := range cgroupDirs() {
		if _, err := os.Stat(filepath.Join(d, "pids.max")); err == nil {
			return d
		}
	}
	return ""
}

// hierarchyTop is the top of the cgroup hierarchy dir is in.
func hierarchyTop(dir string) string {
	for dir != "/" && isCgroupFS(filepath.Dir(dir)) {
		dir = filepath.Dir(dir)
	}
	return dir
}

// openForWrite opens p for writing and closes it without writing a byte:
// the open is the proof, and nothing changes.
func openForWrite(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	return err
}

// tryCgroupWrite makes a cgroup in each of its hierarchies and opens for
// writing the files that move processes into a parent, raise its limits,
// or (cgroup v1) name a program the host runs as root.
func tryCgroupWrite(*config) escape.Result {
	var ev []string
	escaped := false
	dirs := cgroupDirs()
	if len(dirs) == 0 {
		ev = append(ev, "no cgroup file system visible")
	}
	for _, dir := range dirs {
		d := filepath.Join(dir, fmt.Sprintf("escape-probe-%d", os.Getpid()))
		if err := os.Mkdir(d, 0o755); err != nil {
			ev = append(ev, "mkdir "+d+": "+shortErr(err))
		} else {
			escaped = true
			ev = append(ev, "mkdir "+d+": ok")
			_ = os.Remove(d)
		}
		top := hierarchyTop(dir)
		for _, p := range []string{filepath.Join(dir, "pids.max"), filepath.Join(dir, "memory.max"), filepath.Join(dir, "memory.limit_in_bytes"),
			filepath.Join(dir, "notify_on_release"), filepath.Join(top, "release_agent")} {
			if _, err := os.Stat(p); err != nil {
				continue
			}
			err := openForWrite(p)
			ev = append(ev, "open "+p+" for writing: "+shortErr(err))
			if err == nil {
				escaped = true
			}
		}
		for _, name := range []string{"cgroup.procs", "tasks"} {
			p := filepath.Join(filepath.Dir(dir), name)
			if !isCgroupFS(filepath.Dir(dir)) {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				continue
			}
			err := openForWrite(p)
			ev = append(ev, "open "+p+" for writing: "+shortErr(err))
			if err == nil {
				escaped = true
			}
		}
	}
	return result(escaped, ev)
}

// tryProcSysWrite opens for writing the kernel settings that run a
// program as the host's root (core_pattern, modprobe) or act on the whole
// machine (sysrq-trigger).
func tryProcSysWrite(*config) escape.Result {
	var ev []string
	escaped := false
	for _, p := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches"} {
		err := openForWrite(p)
		ev = append(ev, "open "+p+" for writing: "+shortErr(err))
		if err == nil {
			escaped = true
		}
	}
	return result(escaped, ev)
}

// tryKernelModule asks the kernel to load /dev/null as a module: the
// capability check comes first, so EPERM means refused and anything else
// means the probe may load modules (nothing is loaded: /dev/null is no
// module).
func tryKernelModule(*config) escape.Result {
	f, err := os.Open("/dev/null")
	if err != nil {
		return result(false, []string{"/dev/null: " + shortErr(err)})
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	// ENOSYS: a kernel that loads no modules at all.
	refused := errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS)
	return result(!refused, []string{"finit_module: " + shortErr(err)})
}

// tryRawSocket opens a packet socket, which forges frames onto whatever
// network the sandbox sits on.
func tryRawSocket(*config) escape.Result {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err == nil {
		unix.Close(fd)
	}
	return result(err == nil, []string{"socket(AF_PACKET, SOCK_RAW): " + shortErr(err)})
}

// htons is v in network byte order.
func htons(v uint16) uint16 { return v<<8 | v>>8 }
