package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider/clock"
)

// InitProgramName is the small program that the runtime prefers as every
// workload's init when it sits beside this process's executable: it starts
// in about a millisecond, where re-executing a large program as its own
// init pays that program's whole start-up (the runtime and every package's
// initialisation) once more per sandbox.
const InitProgramName = "sandplane-init"

// initProgram is the executable an init runs.
type initProgram struct {
	// path is what exec runs: /proc/self/exe, or /proc/self/fd/N of a
	// descriptor held open for the life of this process, so that an init
	// is always the program that was checked, even if its file is replaced.
	path string
	// file names it in messages.
	file string
}

// selfInit is this process's own executable re-executed as an init (see
// nsinit.Main).
var selfInit = initProgram{path: "/proc/self/exe", file: "this program"}

// openInit checks that the file at path is an init this build can drive and
// holds it open. The check runs it once, asking for its protocol (see
// nsinit.Protocol), so a program left from another version is refused
// rather than misreading the flags it is given.
func openInit(path string) (initProgram, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return initProgram{}, err
	}
	p := initProgram{path: "/proc/self/fd/" + strconv.Itoa(fd), file: path}
	if err := checkInit(fd, p); err != nil {
		unix.Close(fd)
		return initProgram{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// checkInit refuses anything but a regular executable owned by this
// process's user or root that only its owner may change (so no other user
// can plant or swap the program a daemon runs as every sandbox's init), and
// that answers with this build's protocol.
func checkInit(fd int, p initProgram) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errors.New("not a regular file")
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("owned by uid %d, neither this user nor root", st.Uid)
	case st.Mode&0o022 != 0:
		return errors.New("writable by users other than its owner")
	}
	// Once per process, before any clock is handed in: the real one.
	ctx, cancel := clock.WithTimeout(context.Background(), clock.Real(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.path, nsinit.ProtocolFlag)
	cmd.Args[0] = nsinit.Name
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("ask its protocol: %w", err)
	}
	if got := string(bytes.TrimSpace(out)); got != strconv.Itoa(nsinit.Protocol) {
		return fmt.Errorf("speaks init protocol %q, this build %d: rebuild both (make build)", got, nsinit.Protocol)
	}
	return nil
}

// defaultInit is InitProgramName beside this process's executable when it
// passes openInit, and selfInit otherwise, with why when one was there but
// refused. Found once per process.
var defaultInit = sync.OnceValues(func() (initProgram, error) {
	exe, err := os.Executable()
	if err != nil {
		return selfInit, nil
	}
	// A running program whose file was replaced reads "path (deleted)".
	path := filepath.Join(filepath.Dir(strings.TrimSuffix(exe, " (deleted)")), InitProgramName)
	if _, err := os.Lstat(path); err != nil {
		return selfInit, nil // none installed: nothing to report
	}
	p, err := openInit(path)
	if err != nil {
		return selfInit, err
	}
	return p, nil
})

// WithInitProgram makes the runtime start inits from the program at path
// rather than look beside its executable; one that fails the check leaves
// the runtime on its own executable, and InitFallback says why.
func WithInitProgram(path string) Option {
	return func(r *Driver) {
		p, err := openInit(path)
		if err != nil {
			p = selfInit
		}
		r.init, r.initErr, r.initSet = p, err, true
	}
}

// InitProgram names the program this runtime's inits run.
func (r *Driver) InitProgram() string { return r.init.file }

// InitFallback says why the runtime re-executes its own program as every
// init although a faster init program was there or asked for; nil when it
// does not, or when none was there.
func (r *Driver) InitFallback() error { return r.initErr }
