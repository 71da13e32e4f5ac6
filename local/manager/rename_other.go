//go:build !linux

package manager

import "golang.org/x/sys/unix"

// renameNoReplace reports that this system has no atomic rename without
// replace; publish then checks before it renames.
func renameNoReplace(src, dst string) error { return unix.ENOSYS }

// renameExchange reports that this system cannot swap two files
// atomically; the caller renames instead.
func renameExchange(a, b string) error { return unix.ENOSYS }
