package toolboxcmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ProgramName is the small program that the default workload prefers: the
// toolbox alone (cmd/sandplane-toolbox), which listens in a few
// milliseconds where `sandplane toolbox` first initialises every package
// of the sandplane binary.
const ProgramName = "sandplane-toolbox"

// Workload is the command of the default workload of the sandplane binary
// self (the daemon's default snapshot, the simulator's native sandboxes):
// ProgramName beside self when it is there and fit to run, else self's own
// toolbox command. why says why one that is there was refused: it must be
// a regular executable owned by this user or root that only its owner may
// change, so that no other user can plant the program every sandbox runs.
func Workload(self string) (command []string, why error) {
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
	return []string{path}, nil
}
