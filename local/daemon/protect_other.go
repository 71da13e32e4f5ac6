//go:build !linux

package daemon

// ProtectMemory has nothing to do where /proc does not expose a process's
// environment to its user's other processes.
func ProtectMemory() error { return nil }
