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
	"strings"
	"syscall"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

const procRoot = "/proc"

// procStat is the part of /proc/PID/stat the runtime needs.
type procStat struct {
	State     byte // R, S, D, Z, ...
	PGrp      int
	Session   int
	StartTime uint64 // clock ticks since boot
}

// Zombie reports whether the process has ended and waits for its parent.
func (s procStat) Zombie() bool { return s.State == 'Z' || s.State == 'X' || s.State == 'x' }

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

var errMalformedStat = errors.New("malformed /proc stat line")

// parseStat decodes a /proc/PID/stat line. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses, so fields are
// counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errMalformedStat
	}
	// f[0] is field 3; field n is f[n-3].
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22-3+1 || len(f[0]) != 1 || !isLetter(f[0][0]) {
		return procStat{}, errMalformedStat
	}
	pgrp, err1 := strconv.Atoi(f[5-3])
	sid, err2 := strconv.Atoi(f[6-3])
	start, err3 := strconv.ParseUint(f[22-3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("%w: %v", errMalformedStat, err)
	}
	return procStat{State: f[0][0], PGrp: pgrp, Session: sid, StartTime: start}, nil
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

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
	return parseNSpid(b)
}

func parseNSpid(status []byte) ([]int, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		var out []int
		for _, f := range strings.Fields(string(rest)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("%w: NSpid %q", errMalformedStat, rest)
			}
			out = append(out, n)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: empty NSpid", errMalformedStat)
		}
		return out, nil
	}
	return []int{0}, nil
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
