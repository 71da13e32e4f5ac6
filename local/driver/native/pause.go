package native

import (
	"context"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// pausePasses bounds how often Pause scans the workload for processes that
// are not stopped yet: each pass stops what the last one saw, and a
// process forked before its parent stopped shows up in the next.
const pausePasses = 50

// Pause freezes h's workload: every process of it gets SIGSTOP, which no
// process can catch or ignore, and keeps its memory. Pause returns once
// every one of them is stopped, so that nothing of the workload runs after
// it; a paused workload is paused again without harm. A workload that is
// not running is FailedPrecondition. Stop ends a paused workload (SIGKILL
// reaches a stopped process); a graceful stop wants Resume first, since a
// stopped process sees SIGTERM only once it runs again.
func (r *Driver) Pause(ctx context.Context, h driver.Handle) error {
	if err := r.requireAlive(h); err != nil {
		return err
	}
	t := r.clk.NewTicker(pollEvery)
	defer t.Stop()
	for range pausePasses {
		running, err := r.signalMembers(h, unix.SIGSTOP, func(st procStat) bool { return !stopped(st) })
		if err != nil || running == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
	return provider.Errorf(provider.Internal, "processes of workload %d were still running after %d rounds of SIGSTOP: retry the pause", h.PID, pausePasses)
}

// Resume lets a paused workload run on, from where each process stopped:
// SIGCONT to every process of it. Resuming a running workload does
// nothing; a workload that is not running is FailedPrecondition.
func (r *Driver) Resume(_ context.Context, h driver.Handle) error {
	if err := r.requireAlive(h); err != nil {
		return err
	}
	_, err := r.signalMembers(h, unix.SIGCONT, stopped)
	return err
}

// requireAlive is FailedPrecondition unless h's process runs.
func (r *Driver) requireAlive(h driver.Handle) error {
	up, err := alive(h)
	if err != nil {
		return err
	}
	if !up {
		return provider.Errorf(provider.FailedPrecondition, "workload %d is not running", h.PID)
	}
	return nil
}

// stopped reports whether a process is stopped by a signal (T) or under a
// tracer (t).
func stopped(st procStat) bool { return st.State == 'T' || st.State == 't' }

// signalMembers sends sig to each process of h's workload that want
// selects, and returns how many it selected.
func (r *Driver) signalMembers(h driver.Handle, sig unix.Signal, want func(procStat) bool) (int, error) {
	procs, err := processTable()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range members(procs, h.PID) {
		if !want(procs[pid]) {
			continue
		}
		n++
		// signalProcess checks the start time through a pidfd, so a
		// process that ended since the scan, and a pid reused since, get
		// nothing.
		member := driver.Handle{Runtime: provider.RuntimeNative, PID: pid, StartTime: procs[pid].StartTime}
		if err := signalProcess(member, sig); err != nil {
			return n, err
		}
	}
	return n, nil
}

// processTable reads the stat of every process in /proc, skipping those
// that end while it reads.
func processTable() (map[int]procStat, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, classify(phaseInspect, "list processes", err)
	}
	procs := make(map[int]procStat, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && !st.Zombie() {
			procs[pid] = st
		}
	}
	return procs, nil
}

// members returns root and every process that descends from it or shares
// its session: for a workload under an init, its whole PID namespace (the
// init reaps every orphan of it, so all of them descend from it); for one in
// a process group, the session Start made it lead, orphans included.
func members(procs map[int]procStat, root int) []int {
	if _, ok := procs[root]; !ok {
		return nil
	}
	children := map[int][]int{}
	for pid, st := range procs {
		children[st.PPID] = append(children[st.PPID], pid)
	}
	seen := map[int]bool{root: true}
	out, queue := []int{root}, []int{root}
	add := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			out = append(out, pid)
			queue = append(queue, pid)
		}
	}
	for pid, st := range procs {
		if st.Session == root {
			add(pid)
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			add(c)
		}
	}
	return out
}
