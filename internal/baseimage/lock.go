package baseimage

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// lockPoll is how often a build waiting for another one's lock tries again.
const lockPoll = time.Second

// lockPath is the file whose lock guards builds of the image with hash.
func lockPath(dir, hash string) string {
	return filepath.Join(dir, "sandplane-base-"+hash[:16]+".lock")
}

// lockFile takes the exclusive lock on path, which it creates when missing,
// trying again every lockPoll on clk until ctx ends; waiting is called once
// when the lock is held by someone else. The lock is released by the
// returned func, or by the process ending, so a crashed build never blocks
// the next. The file is opened read-only and never written: a user who
// cannot write a lock file another user made can still wait on it.
func lockFile(ctx context.Context, clk clock.Clock, path string, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|noFollow, 0o644)
	if err != nil {
		return nil, provider.Errorf(provider.PreflightFailed, "open the build lock %s: %v: remove it or set TMPDIR to another directory", path, err)
	}
	for told := false; ; told = true {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, provider.Errorf(provider.Internal, "lock %s: %v", path, err)
		}
		if ok {
			return func() { unlockFile(f); f.Close() }, nil
		}
		if !told {
			waiting()
		}
		if err := clock.Sleep(ctx, clk, lockPoll); err != nil {
			f.Close()
			return nil, err
		}
	}
}
