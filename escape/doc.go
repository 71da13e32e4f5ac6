// Package escape is the containment suite run from inside a sandbox: a
// probe program (escape/probe) runs in one sandbox of a real `sandplane
// serve` and tries every way out that Entries lists (the daemon's API, the
// simulator, a neighbour sandbox's toolbox, preview, files and processes,
// the Docker socket, /proc, mounts, cgroups, kernel interfaces, setuid
// binaries, resource exhaustion, a process left behind), while the test
// drives from the host what needs the host (the toolbox's file API, a
// delete). Every attempt must fail with nothing gained on the runtimes an
// entry names; on native sandboxes without isolation the entries that
// escape are listed (Entry.Native), and the test asserts exactly that list,
// so that docs/security.md, which the test also checks, cannot drift from
// what the machine does.
//
// The probe's own verdict is not trusted: each result carries what the
// attempt could read, and the test, which knows the secrets it planted
// (the daemon's token, the neighbour's env value and a file it wrote, a
// canary of the host user, the simulator's keys), judges the entry from
// that as well.
package escape
