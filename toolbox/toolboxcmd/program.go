package toolboxcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// ProgramName is the small program that the default workload prefers: the
// toolbox alone (cmd/sandplane-toolbox), which listens in a few
// milliseconds where `sandplane toolbox` first initialises every package
// of the sandplane binary.
const ProgramName = "sandplane-toolbox"

// Workload is the command of the default workload of the sandplane binary
// self, of version (the daemon's default snapshot, the simulator's native
// sandboxes): ProgramName beside self when it is there and fit to run,
// else self's own toolbox command. why says why one that is there was
// refused: it must be a regular executable owned by this user or root that
// only its owner may change, so that no other user can plant the program
// every sandbox runs, and of the same version, so that an older one left
// beside a newer sandplane does not serve an older API.
func Workload(self, version string) (command []string, why error) {
	fallback := []string{self, "toolbox"}
	path := filepath.Join(filepath.Dir(self), ProgramName)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fallback, nil // not installed (go install): nothing to say
	}
	if err != nil {
		return fallback, err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return fallback, fmt.Errorf("%s is not an executable file", path)
	case st != nil && st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return fallback, fmt.Errorf("%s is owned by uid %d, neither this user nor root", path, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fallback, fmt.Errorf("%s is writable by users other than its owner", path)
	}
	if got, err := versionOf(path); err != nil || got != version {
		return fallback, fmt.Errorf("%s is version %q (%v), this sandplane %q: install both from one build (make build)", path, got, err, version)
	}
	return []string{path}, nil
}

// versionOf asks the program at path its version (--version). It runs once
// per daemon, before any clock is handed in: the real one bounds it.
func versionOf(path string) (string, error) {
	ctx, cancel := clock.WithTimeout(context.Background(), clock.Real(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), ProgramName+" version ")
	if err == nil && !ok {
		err = errors.New("no version in its answer")
	}
	return v, err
}
