//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandplane/sandplane/escape"
)

// maxBomb bounds a fork bomb the probe runs: it runs one only under a
// pids limit at most this large, the sandbox's own.
const maxBomb = 4096

// pidsLimit is the pids.max of the probe's own cgroup, 0 when it has none
// (or none it can read).
func pidsLimit() (int, string) {
	own := ownCgroup()
	if own == "" {
		return 0, "no cgroup v2 path"
	}
	b, err := os.ReadFile(filepath.Join(own, "pids.max"))
	if err != nil {
		return 0, own + "/pids.max: " + shortErr(err)
	}
	v := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, own + "/pids.max: " + v
	}
	return n, own + "/pids.max: " + v
}

// tryForkBomb starts processes until the kernel refuses one, under a pids
// limit of the sandbox's own only: without one it runs nothing and says
// so, since an unbounded bomb would take the machine down with it.
func tryForkBomb(c *config) escape.Result {
	limit, ev := pidsLimit()
	if !c.Bomb {
		return result(true, []string{ev, "the host sees no pids limit of the sandbox's own: not run"})
	}
	if limit == 0 || limit > maxBomb {
		return result(true, []string{ev, "no pids limit of the sandbox's own: not run"})
	}
	self, err := os.Executable()
	if err != nil {
		return result(true, []string{ev, shortErr(err)})
	}
	var started []*exec.Cmd
	defer func() {
		for _, c := range started {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for range limit + 16 {
		c := exec.Command(self, "stay", "bomb")
		if err := c.Start(); err != nil {
			refused := errors.Is(err, syscall.EAGAIN)
			return result(!refused, []string{ev, fmt.Sprintf("refused after %d processes: %s", len(started), shortErr(err))})
		}
		started = append(started, c)
	}
	return result(true, []string{ev, fmt.Sprintf("%d processes, past the limit", len(started))})
}

// maxFill bounds a disk filler: it fills only a place of at most this
// much free space, the sandbox's own.
const maxFill = 1 << 30

// freeBytes is the space left to an unprivileged writer at dir.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// tryDiskFill reports the free space of its writable places (the test
// compares it with the host's) and fills the work dir until the write is
// refused, where the host saw a quota of the sandbox's own and the place
// is small: never a disk the host shares.
func tryDiskFill(c *config) escape.Result {
	var ev []string
	escaped := false
	for _, dir := range []string{c.WorkDir, os.TempDir()} {
		free, err := freeBytes(dir)
		if err != nil {
			ev = append(ev, dir+": "+shortErr(err))
			continue
		}
		ev = append(ev, fmt.Sprintf("free:%s=%d", dir, free))
		if !c.Fill || free > maxFill {
			escaped = true
			ev = append(ev, dir+": no quota of the sandbox's own: not filled")
			continue
		}
		ev = append(ev, fill(dir))
	}
	return result(escaped, ev)
}

// fill writes to dir until the write fails, then removes what it wrote.
func fill(dir string) string {
	p := filepath.Join(dir, "escape-fill")
	f, err := os.Create(p)
	if err != nil {
		return "create: " + shortErr(err)
	}
	defer os.Remove(p)
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for n <= maxFill {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return fmt.Sprintf("%s: refused after %d bytes: %s", dir, n, shortErr(err))
		}
	}
	return fmt.Sprintf("%s: wrote %d bytes unrefused", dir, n)
}
