//go:build unix

package baseimage

import (
	"errors"
	"os"
	"syscall"
)

// noFollow keeps a planted symlink from redirecting the lock file.
const noFollow = syscall.O_NOFOLLOW

// tryLock takes f's exclusive flock without waiting; false when another
// open file holds it, in this process or another.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
