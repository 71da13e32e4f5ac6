package nsinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Bind shows the host directory Source at Target inside a workload.
type Bind struct {
	Source, Target string
}

// fdPath names what descriptor fd refers to, through this process's /proc
// (the init's own, mounted before the binds): a path that stays valid when
// a tmpfs later covers the place the descriptor was opened at.
func fdPath(fd int, name ...string) string {
	return filepath.Join(append([]string{"/proc/self/fd", strconv.Itoa(fd)}, name...)...)
}

// bindAt binds src at target in the init's private mount namespace. A
// missing target is made in a copy of its parent (shadow), never on the
// host. Only the last element may be missing.
func bindAt(src, target string) error {
	srcFD, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	defer unix.Close(srcFD)
	fi, err := os.Stat(target)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("bind at %s: not a directory", target)
	case errors.Is(err, fs.ErrNotExist):
		if err := shadow(filepath.Dir(target)); err != nil {
			return fmt.Errorf("bind at %s: %w", target, err)
		}
		if err := os.Mkdir(target, 0o755); err != nil {
			return fmt.Errorf("bind at %s: %w", target, err)
		}
	case err != nil:
		return fmt.Errorf("bind at %s: %w", target, err)
	}
	if err := unix.Mount(fdPath(srcFD), target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", src, target, err)
	}
	return nil
}

// shadow covers dir with a tmpfs that holds what dir held: each entry is
// bound back from the directory underneath (reached through a descriptor
// opened before the tmpfs covered it), symbolic links are copied. New
// entries then go to the tmpfs, seen by this mount namespace only.
func shadow(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	dirFD, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dirFD)
	mode := fmt.Sprintf("mode=%o", fi.Mode().Perm())
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, mode); err != nil {
		return fmt.Errorf("cover %s with a tmpfs: %w", dir, err)
	}
	for _, e := range entries {
		if err := restore(dirFD, dir, e); err != nil {
			return fmt.Errorf("keep %s in its copy: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	return nil
}

// restore puts entry e of the covered directory (dirFD) back at dir/e.
func restore(dirFD int, dir string, e fs.DirEntry) error {
	under, at := fdPath(dirFD, e.Name()), filepath.Join(dir, e.Name())
	switch {
	case e.Type()&fs.ModeSymlink != 0:
		link, err := os.Readlink(under)
		if err != nil {
			return err
		}
		return os.Symlink(link, at)
	case e.IsDir():
		if err := os.Mkdir(at, 0o755); err != nil {
			return err
		}
	default:
		f, err := os.OpenFile(at, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	return unix.Mount(under, at, "", unix.MS_BIND|unix.MS_REC, "")
}
