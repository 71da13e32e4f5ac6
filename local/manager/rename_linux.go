package manager

import "golang.org/x/sys/unix"

// renameNoReplace renames src to dst unless dst exists (EEXIST). EINVAL
// when the filesystem cannot do that atomically.
func renameNoReplace(src, dst string) error {
	return unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
}

// renameExchange swaps the files at a and b, both of which must exist.
// EINVAL when the filesystem cannot.
func renameExchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
