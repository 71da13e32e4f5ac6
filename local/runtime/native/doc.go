// Package native runs a sandbox's workload as a host process (Linux only).
//
// Each workload is spawned in its own session and process group, so it
// outlives the daemon and ignores signals sent to the daemon's terminal. Two
// environment markers, SANDPLANE_ROOT and SANDPLANE_SANDBOX_ID, let a
// restarted daemon find workloads it spawned but never recorded (Orphans).
// A Handle pairs the pid with the process start time from /proc, so a reused
// pid is never mistaken for the workload and never signalled.
//
// The Runtime value that spawned a process reaps it and reports its real exit
// status. Any other value (a restarted daemon) adopts the handle: it can watch
// and stop the process, through a pidfd, but can only report "process gone"
// once it ends.
package native
