//go:build !linux

package manager

import "golang.org/x/sys/unix"

// renameNoReplace reports that this system has no atomic rename without
// replace; publish then checks before it renames.
func renameNoReplace(src, dst string) error { return unix.ENOSYS }
