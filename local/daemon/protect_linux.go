package daemon

import "golang.org/x/sys/unix"

// ProtectMemory marks the process non-dumpable: its /proc entries then
// belong to root, so other processes of the same user (sandbox workloads
// among them) can neither read its environment or memory nor ptrace it,
// and it writes no core dump. Children get their own dumpable flag back
// when they exec. Call it first, before any secret is read: the flag
// protects only from then on.
func ProtectMemory() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
