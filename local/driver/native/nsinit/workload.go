package nsinit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/provider/clock"
)

// WorkloadVar names the one environment entry a parked workload starts
// with: a placeholder as long as the init's own (see Reserve), which holds
// no mark, so that no scan for a sandbox's processes takes it for one.
const WorkloadVar = "SANDPLANE_PARKED_WORKLOAD"

// WorkloadFD is the descriptor a parked workload is handed its sandbox on:
// one end of a unix stream socket whose other end its init holds.
const WorkloadFD = 3

// AwaitSandbox lets a parked init start this program ahead of its sandbox
// (Config.Park with a command). Call it first thing in main: in a program
// started otherwise it returns at once. Started parked, with WorkloadVar
// its whole environment, it waits on WorkloadFD for the hand-off of its
// sandbox (a Request without Config: Cwd, Show, Env, with stdout and
// stderr), then makes that sandbox its own before it returns: its stdout
// and stderr, Show over its own environment as the kernel keeps it (what
// /proc/PID/environ shows), Env as the environment it reads and hands on,
// and Cwd as its working directory. It acknowledges with one byte, and the
// init reports the command started. If the socket closes first (the
// sandbox went to another command, or the init ended), it exits 0; if the
// hand-off fails, it exits 125 after saying why on the stderr it was given,
// if any, and the init starts the command anew.
//
// Until then it holds nothing of any sandbox, so it may only do what does
// not depend on one: package initialisation, and nothing that reads the
// environment.
func AwaitSandbox() {
	env := os.Environ()
	if len(env) != 1 || !strings.HasPrefix(env[0], WorkloadVar+"=") {
		return
	}
	err := awaitSandbox()
	if errors.Is(err, errNoRequest) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: parked: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(exitSetup)
	}
}

func awaitSandbox() error {
	ctl := os.NewFile(WorkloadFD, "sandbox")
	defer ctl.Close()
	// Opened before the wait, as a parked init does: the hand-off then
	// costs one write.
	area, err := openEnvironArea()
	if err != nil {
		return fmt.Errorf("find its environment: %w", err)
	}
	defer area.close()
	warmSignals()
	payload, err := readMessage(ctl)
	if err != nil {
		return err
	}
	r, rest, err := decodeHeader(payload)
	if err == nil && len(rest) > 0 {
		err = errors.New("hand-off: more than a directory, marks and an environment")
	}
	if err != nil {
		return err
	}
	if err := area.show(r.Show); err != nil {
		return fmt.Errorf("show the marks: %w", err)
	}
	os.Clearenv()
	for _, e := range r.Env {
		k, v, _ := strings.Cut(e, "=")
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set $%s: %w", k, err) // the name only: values may be secret
		}
	}
	if err := os.Chdir(r.Cwd); err != nil {
		return fmt.Errorf("enter the sandbox's directory: %w", err)
	}
	_, err = ctl.Write([]byte{1})
	return err
}

// warmSignals starts the Go runtime's signal thread, which a program's
// first signal.Notify starts (a third of a millisecond here), while the
// program is parked rather than once it is handed its sandbox. SIGURG,
// which the runtime catches for itself whatever a program asks, so that
// nothing else changes.
func warmSignals() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGURG)
	signal.Stop(c)
}

// parkedWorkload is the command a parked init started ahead of its request.
type parkedWorkload struct {
	pid  int
	path string
	args []string
	conn *net.UnixConn
}

// startParked starts path as a parked workload with room bytes of
// environment, or returns nil if it cannot. It runs with the init's
// stdio and directory until its hand-off.
func startParked(path string, args []string, room int) *parkedWorkload {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fds[1])
	ours := os.NewFile(uintptr(fds[0]), "workload")
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil
	}
	files := []uintptr{0, 1, 2, uintptr(fds[1])} // the socket at WorkloadFD
	pid, err := forkExec(path, args, "", []string{pad(WorkloadVar, room)}, files)
	if err != nil {
		conn.Close()
		return nil
	}
	return &parkedWorkload{pid: pid, path: path, args: args, conn: conn.(*net.UnixConn)}
}

// startCommand starts the init's main command with files as its
// descriptors: the parked workload when it can be that command (see
// canRun) and takes its hand-off; else a new process, once the parked one,
// if any, is ended.
func (p *initProc) startCommand(files []uintptr) (int, error) {
	if w := p.workload; w != nil {
		p.workload = nil
		if w.canRun(p.cfg, p.env, files) && w.handOff(p.handoff()) == nil {
			return w.pid, nil
		}
		w.end()
	}
	return forkExec(p.cfg.Path, p.cfg.Args, p.cfg.Dir, p.env, files)
}

// canRun reports whether w can be cfg's command with env and files: the
// same program with the same arguments, no descriptor beyond stdio, and no
// Go runtime setting (setsGoRuntime).
func (w *parkedWorkload) canRun(cfg Config, env []string, files []uintptr) bool {
	return len(files) == 3 && w.path == cfg.Path && slices.Equal(w.args, cfg.Args) && !setsGoRuntime(env)
}

// goRuntimeVars are what a Go program's runtime reads as it starts, and so
// before a parked workload is handed its environment.
var goRuntimeVars = []string{"GOGC=", "GOMEMLIMIT=", "GOMAXPROCS=", "GOTRACEBACK=", "GODEBUG="}

// setsGoRuntime reports whether env sets one of goRuntimeVars: the command
// is then started anew, so that they take effect.
func setsGoRuntime(env []string) bool {
	return slices.ContainsFunc(env, func(e string) bool {
		return slices.ContainsFunc(goRuntimeVars, func(v string) bool { return strings.HasPrefix(e, v) })
	})
}

// handoff is what the main command would have been started with.
func (p *initProc) handoff() Request {
	dir := p.cfg.Dir
	if dir == "" {
		dir = p.cwd
	}
	return Request{Cwd: dir, Show: p.show, Env: p.env, Stdout: os.Stdout, Stderr: os.Stderr}
}

// handOffTimeout bounds how long a parked workload may take to acknowledge
// its hand-off, which costs it microseconds: one that does not answer
// (stopped, say) is ended and the command started anew, rather than
// holding its start, which nothing else bounds.
const handOffTimeout = 5 * time.Second

// handOff hands w its sandbox and waits for its acknowledgement. An error
// means w did not take it in time, and is to be ended: it runs nothing of
// the sandbox's.
func (w *parkedWorkload) handOff(r Request) error {
	defer w.conn.Close()
	payload, err := encodeFields(r.header())
	if err != nil {
		return err
	}
	if err := w.conn.SetDeadline(clock.Real().Now().Add(handOffTimeout)); err != nil {
		return err
	}
	if err := send(w.conn, payload, r.Stdout, r.Stderr); err != nil {
		return err
	}
	var ack [1]byte
	_, err = io.ReadFull(w.conn, ack[:])
	return err
}

// end kills w and returns once it has ended (the init's reaper then
// collects it), so that the command started in its place never runs beside
// it: SIGKILL takes effect when the kernel next schedules it, not when
// kill returns.
func (w *parkedWorkload) end() {
	w.conn.Close()
	fd, err := unix.PidfdOpen(w.pid, 0)
	if err != nil {
		_ = unix.Kill(w.pid, unix.SIGKILL) // already ended, or a kernel before pidfds
		return
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		return
	}
	// A pidfd reads ready once the whole process has exited.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
	}
}
