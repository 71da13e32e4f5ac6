package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/runtime"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

const (
	// rootVar and idVar mark every workload's environment.
	rootVar = "SANDPLANE_ROOT"
	idVar   = "SANDPLANE_SANDBOX_ID"

	stdoutLog = "stdout.log"
	stderrLog = "stderr.log"

	// maxLogBytes caps what Logs returns of each stream: the newest bytes.
	maxLogBytes = 1 << 20
)

// Runtime runs workloads as detached host processes. The zero value is not
// usable; call New.
type Runtime struct {
	clk clock.Clock

	mu sync.Mutex
	// children are the processes this value spawned and reaps, keyed by pid
	// and start time so that a reused pid finds no stale record.
	children map[procKey]*child
}

var _ runtime.Runtime = (*Runtime)(nil)

type procKey struct {
	pid   int
	start uint64
}

type child struct {
	done chan struct{} // closed once exit is set
	exit runtime.Exit
}

// New returns a Runtime whose grace periods and polls run on clk.
func New(clk clock.Clock) *Runtime {
	if clk == nil {
		clk = clock.Real()
	}
	return &Runtime{clk: clk, children: make(map[procKey]*child)}
}

func (r *Runtime) Name() provider.Runtime { return provider.RuntimeNative }

// Preflight checks that spec's command resolves to an executable and that its
// directories exist.
func (r *Runtime) Preflight(ctx context.Context, spec runtime.Spec) error {
	_, _, err := resolve(spec)
	return err
}

// resolve returns the executable spec runs and the directory it runs in.
func resolve(spec runtime.Spec) (path, dir string, err error) {
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return "", "", provider.Errorf(provider.PreflightFailed, "no command to run: give the snapshot a command")
	}
	if spec.Dir == "" {
		return "", "", provider.Errorf(provider.PreflightFailed, "no sandbox directory")
	}
	if err := isDir(spec.Dir); err != nil {
		return "", "", classify(phasePreflight, "sandbox directory", err)
	}
	dir = spec.Dir
	if spec.WorkDir != "" {
		dir = spec.WorkDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(spec.Dir, dir)
		}
		if err := isDir(dir); err != nil {
			return "", "", classify(phasePreflight, "working directory", err)
		}
	}
	pathEnv, ok := spec.Env["PATH"]
	if !ok {
		pathEnv = os.Getenv("PATH")
	}
	path, err = lookPath(spec.Command[0], pathEnv, dir)
	if err != nil {
		return "", "", classify(phasePreflight, fmt.Sprintf("command %q", spec.Command[0]), err)
	}
	return path, dir, nil
}

func isDir(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "stat", Path: p, Err: syscall.ENOTDIR}
	}
	return nil
}

// lookPath finds file like exec.LookPath, but on pathEnv rather than the
// daemon's own PATH, and resolves a relative path against dir, where the
// workload will run.
func lookPath(file, pathEnv, dir string) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		err := executable(p)
		if errors.Is(err, fs.ErrNotExist) {
			err = exec.ErrNotFound
		}
		if err != nil {
			return "", &exec.Error{Name: file, Err: err}
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		// A relative entry would resolve against the daemon's working
		// directory, which means nothing to the workload (exec.ErrDot).
		if !filepath.IsAbs(d) {
			continue
		}
		if p := filepath.Join(d, file); executable(p) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	}
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "exec", Path: p, Err: err}
	}
	return nil
}

// environ is spec.Env plus the markers, which win over same-named entries so
// that Orphans can trust them.
func environ(spec runtime.Spec) ([]string, error) {
	env := make([]string, 0, len(spec.Env)+2)
	for k, v := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, provider.Errorf(provider.InvalidArgument, "environment variable name %q is not valid", k)
		}
		if strings.ContainsRune(v, 0) {
			// Values are secret: name the variable only.
			return nil, provider.Errorf(provider.InvalidArgument, "environment variable %s contains a NUL byte", k)
		}
		if k == rootVar || k == idVar {
			continue
		}
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return append(env, rootVar+"="+spec.Root, idVar+"="+spec.SandboxID), nil
}

func openLog(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, classify(phaseSpawn, "open "+filepath.Base(p), err)
	}
	return f, nil
}

// Start spawns spec's command detached, in a session of its own, with stdout
// and stderr appended to Dir's log files. ctx bounds only the spawn; the
// workload outlives it.
func (r *Runtime) Start(ctx context.Context, spec runtime.Spec) (runtime.Handle, error) {
	if err := ctx.Err(); err != nil {
		return runtime.Handle{}, err
	}
	path, dir, err := resolve(spec)
	if err != nil {
		return runtime.Handle{}, err
	}
	env, err := environ(spec)
	if err != nil {
		return runtime.Handle{}, err
	}
	stdout, err := openLog(filepath.Join(spec.Dir, stdoutLog))
	if err != nil {
		return runtime.Handle{}, err
	}
	defer stdout.Close()
	stderr, err := openLog(filepath.Join(spec.Dir, stderrLog))
	if err != nil {
		return runtime.Handle{}, err
	}
	defer stderr.Close()

	cmd := &exec.Cmd{
		Path:   path,
		Args:   spec.Command,
		Env:    env,
		Dir:    dir,
		Stdout: stdout, // *os.File: handed to the child as is, no copying goroutine
		Stderr: stderr,
		// A new session detaches the workload from the daemon's terminal
		// and makes its pid the process group Stop signals.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return runtime.Handle{}, classify(phaseSpawn, fmt.Sprintf("start %q", spec.Command[0]), err)
	}
	pid := cmd.Process.Pid
	// Until cmd.Wait reaps it, the child's /proc entry stays, even if it has
	// already exited, so its start time is always readable here.
	st, err := readStat(pid)
	if err != nil {
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = cmd.Wait()
		return runtime.Handle{}, classify(phaseSpawn, "read the new process's start time", err)
	}
	c := &child{done: make(chan struct{})}
	r.mu.Lock()
	r.children[procKey{pid, st.StartTime}] = c
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait() // the exit status is in ProcessState; the error only repeats it
		c.exit = exitOf(cmd.ProcessState)
		close(c.done)
	}()
	return runtime.Handle{Runtime: provider.RuntimeNative, PID: pid, StartTime: st.StartTime}, nil
}

// child returns the record of h if this value spawned it.
func (r *Runtime) child(h runtime.Handle) *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.children[procKey{h.PID, h.StartTime}]
}

// Remove forgets h's exit status once it has ended; a native workload holds
// nothing else.
func (r *Runtime) Remove(ctx context.Context, h runtime.Handle) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := procKey{h.PID, h.StartTime}
	if c, ok := r.children[k]; ok {
		select {
		case <-c.done:
			delete(r.children, k)
		default:
		}
	}
	return nil
}

// Logs returns the newest MiB of each of dir's log files. A missing file is
// an empty log.
func (r *Runtime) Logs(ctx context.Context, h runtime.Handle, dir string) (stdout, stderr []byte, err error) {
	if dir == "" {
		// Else the daemon's working directory would be read.
		return nil, nil, provider.Errorf(provider.InvalidArgument, "no sandbox directory to read logs from")
	}
	if stdout, err = tail(filepath.Join(dir, stdoutLog), maxLogBytes); err != nil {
		return nil, nil, err
	}
	if stderr, err = tail(filepath.Join(dir, stderrLog), maxLogBytes); err != nil {
		return nil, nil, err
	}
	return stdout, stderr, nil
}

func tail(p string, n int64) ([]byte, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, classify(phaseControl, "read "+filepath.Base(p), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, classify(phaseControl, "read "+filepath.Base(p), err)
	}
	b, err := io.ReadAll(io.NewSectionReader(f, max(fi.Size()-n, 0), n))
	if err != nil {
		return nil, classify(phaseControl, "read "+filepath.Base(p), err)
	}
	return b, nil
}
