package manager

import "golang.org/x/sys/unix"

// renameNoReplace renames src to dst unless dst exists (EEXIST). EINVAL
// when the filesystem cannot do that atomically.
func renameNoReplace(src, dst string) error {
	return unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
}
