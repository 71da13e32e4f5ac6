package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"

	"github.com/sandplane/sandplane/internal/procfs"
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

const procRoot = procfs.Root

// procStat is the part of /proc/PID/stat the runtime needs.
type procStat = procfs.Stat

func readStat(pid int) (procStat, error) { return procfs.ReadStat(pid) }

// gone reports whether err from reading /proc means the process is gone.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// StartTime is when process pid started, in clock ticks since boot: with
// the pid, what tells a process from a later one given the same pid. A
// process that has ended is fs.ErrNotExist.
func StartTime(pid int) (uint64, error) {
	st, err := readStat(pid)
	switch {
	case gone(err):
		return 0, fs.ErrNotExist
	case err != nil:
		return 0, err
	case st.Zombie():
		return 0, fs.ErrNotExist
	}
	return st.StartTime, nil
}

// alive reports whether h's process runs: its pid exists, still names the
// process h was made for (same start time), and has not ended.
func alive(h driver.Handle) (bool, error) {
	if h.PID <= 0 {
		return false, nil
	}
	st, err := readStat(h.PID)
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, classify(phaseInspect, fmt.Sprintf("inspect process %d", h.PID), err)
	}
	return st.StartTime == h.StartTime && !st.Zombie(), nil
}

// nsPIDs returns the pids of process pid from /proc's PID namespace down to
// its own (the NSpid line of /proc/PID/status): one pid for a process in
// /proc's namespace, [host pid, 1] for the init of a namespace made from it.
// Kernels before 4.1 have no NSpid line, and no answer but one pid.
func nsPIDs(pid int) ([]int, error) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	return procfs.ParseNSpid(b)
}

// isInit reports whether pid is PID 1 of a PID namespace made from ours:
// the init of a contained workload.
func isInit(pid int) (bool, error) {
	ns, err := nsPIDs(pid)
	if err != nil {
		return false, err
	}
	return len(ns) == 2 && ns[1] == 1, nil
}

// ended reports whether h's process has ended for good: its pid is gone or
// names another process, or it is a zombie whose every thread has exited.
// Until then a zombie leader is still ending: a multithreaded init shows a
// zombie leader while its other threads exit, and only the last of them
// empties its namespace.
func ended(h driver.Handle) (bool, error) {
	if h.PID <= 0 {
		return true, nil
	}
	st, err := readStat(h.PID)
	if gone(err) {
		return true, nil
	}
	if err != nil {
		return false, classify(phaseInspect, fmt.Sprintf("inspect process %d", h.PID), err)
	}
	if st.StartTime != h.StartTime {
		return true, nil
	}
	if !st.Zombie() {
		return false, nil
	}
	tasks, err := os.ReadDir(procRoot + "/" + strconv.Itoa(h.PID) + "/task")
	if gone(err) {
		return true, nil
	}
	if err != nil {
		return false, classify(phaseInspect, fmt.Sprintf("inspect process %d", h.PID), err)
	}
	return len(tasks) <= 1, nil
}

// hasVar reports whether environ (NUL-separated, as in /proc/PID/environ)
// holds exactly the entry kv.
func hasVar(environ []byte, kv string) bool {
	for e := range bytes.SplitSeq(environ, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

// Orphans scans /proc for workload roots marked with root that are not in
// known. A root is the init of a PID namespace made from ours, or, for a
// workload in a process group, a session leader in our namespace. Their
// descendants carry the marker too, but end with them: a process that called
// setsid inside a workload's namespace is not a root of its own.
func (r *Driver) Orphans(ctx context.Context, root string, known []driver.Handle) ([]driver.Handle, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, classify(phaseInspect, "list processes", err)
	}
	type key struct {
		pid   int
		start uint64
	}
	skip := make(map[key]bool, len(known))
	for _, h := range known {
		skip[key{h.PID, h.StartTime}] = true
	}
	marker := rootVar + "=" + root
	self := os.Getpid()
	var out []driver.Handle
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		// Processes vanish and other users' environments are unreadable
		// while we scan; neither can be ours to clean up.
		env, err := os.ReadFile(procRoot + "/" + e.Name() + "/environ")
		if err != nil || !hasVar(env, marker) {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.Zombie() || skip[key{pid, st.StartTime}] {
			continue
		}
		ns, err := nsPIDs(pid)
		if err != nil {
			continue
		}
		init := len(ns) == 2 && ns[1] == 1
		leader := len(ns) == 1 && st.Session == pid
		if init || leader {
			out = append(out, driver.Handle{Runtime: provider.RuntimeNative, PID: pid, StartTime: st.StartTime})
		}
	}
	slices.SortFunc(out, func(a, b driver.Handle) int { return a.PID - b.PID })
	return out, nil
}
