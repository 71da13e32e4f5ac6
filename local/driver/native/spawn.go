package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// How workloads are contained; see driver.Containment.
const (
	// ContainPIDNamespace: each workload under an init of its own, PID 1 of
	// a new PID namespace. Its end ends every process of the workload.
	ContainPIDNamespace = "pid-namespace"
	// ContainProcessGroup: each workload leads a session and process group
	// of its own; Stop signals the group, which setsid escapes.
	ContainProcessGroup = "process-group"
)

// launch is one spawn being prepared: the command, and what it needs open
// only until it has started.
type launch struct {
	cmd *exec.Cmd
	// status is the read end of the init's status pipe; nil for a workload
	// in a process group, which reports its exit by its wait status.
	status *os.File
	// forward is the unix socket behind the port of an isolated workload.
	forward string
	// parentEnds are the child's descriptors (the write end of the status
	// pipe, a listener), closed here once the child holds them.
	parentEnds []io.Closer
}

func (l *launch) closeParentEnds() {
	for _, c := range l.parentEnds {
		c.Close()
	}
	l.parentEnds = nil
}

// release closes whatever l still holds.
func (l *launch) release() {
	l.closeParentEnds()
	if l.status != nil {
		l.status.Close()
		l.status = nil
	}
}

// Start spawns spec's command detached, in a session of its own, with stdout
// and stderr appended to Dir's log files, under an init of its own in a new
// PID namespace unless the runtime falls back to process groups: the init
// Warm parked, when there is one for spec, else a new one. It returns once
// the command runs, or fails with create_failed if its init has not said so
// within 30 s (startTimeout). ctx bounds only the spawn; the workload
// outlives it.
func (r *Driver) Start(ctx context.Context, spec driver.Spec) (driver.Handle, error) {
	if err := ctx.Err(); err != nil {
		return driver.Handle{}, err
	}
	path, dir, err := r.resolve(spec)
	if err != nil {
		return driver.Handle{}, err
	}
	env, err := environ(spec)
	if err != nil {
		return driver.Handle{}, err
	}
	var logs [2]*os.File
	for i, name := range []string{stdoutLog, stderrLog} {
		if logs[i], err = openLog(filepath.Join(spec.Dir, name)); err != nil {
			return driver.Handle{}, err
		}
		defer logs[i].Close()
	}
	for attempt := 1; ; attempt++ {
		from, _ := logs[1].Seek(0, io.SeekEnd)
		h, err := r.startLogging(ctx, spec, path, dir, env, logs)
		if provider.Code(err) != provider.CreateFailed {
			return h, err
		}
		err = withStderr(err, logs[1].Name(), from)
		if attempt == mountRaceAttempts || !mountRaced(err) || ctx.Err() != nil {
			return h, err
		}
	}
}

// mountRaced reports whether a start failed because bubblewrap met the host's
// mount table changing under its recursive read-only bind of / (a submount
// gone between its listing and its remount: bubblewrap issue #650), which
// happens whenever Docker adds or removes a container's mounts at that
// moment. Nothing of the workload ran, so the start is tried again.
func mountRaced(err error) bool {
	return strings.Contains(provider.Message(err), "Unable to apply mount flags: remount")
}

// mountRaceAttempts bounds the starts a changing mount table may cost.
const mountRaceAttempts = 3

// startLogging is Start once the logs are open: on a parked init if one
// takes the request, else on a new one.
func (r *Driver) startLogging(ctx context.Context, spec driver.Spec, path, dir string, env []string, logs [2]*os.File) (driver.Handle, error) {
	if p := r.unpark(spec); p != nil {
		h, err := r.dispatch(ctx, p, spec, path, dir, env, logs[0], logs[1])
		if !errors.Is(err, errUndelivered) {
			return h, err
		}
	}
	l, err := r.prepare(spec, path, dir, env)
	if err != nil {
		return driver.Handle{}, err
	}
	defer l.release()
	// *os.File: handed to the child as is, no copying goroutine.
	l.cmd.Stdout, l.cmd.Stderr = logs[0], logs[1]
	return r.spawn(ctx, l, spec.Command[0])
}

// withStderr adds to a failed start what the workload's stderr log got
// from offset from on (its last maxStartStderr bytes): the reason an init
// or bwrap gives for ending before the command ran is written there, and
// the one who reads the error should not have to go and look.
func withStderr(err error, log string, from int64) error {
	f, oerr := os.Open(log)
	if oerr != nil {
		return err
	}
	defer f.Close()
	if end, serr := f.Seek(0, io.SeekEnd); serr == nil && end-from > maxStartStderr {
		from = end - maxStartStderr
	}
	b, rerr := io.ReadAll(io.NewSectionReader(f, from, maxStartStderr))
	text := strings.TrimSpace(string(b))
	if rerr != nil || text == "" {
		return err
	}
	return &provider.Error{Code: provider.CreateFailed, Err: err,
		Message: fmt.Sprintf("%s; its stderr: %q", provider.Message(err), text)}
}

// maxStartStderr bounds the stderr a failed start quotes.
const maxStartStderr = 512

// prepare builds the command that runs the workload in the runtime's
// containment and spec's isolation.
func (r *Driver) prepare(spec driver.Spec, path, dir string, env []string) (*launch, error) {
	if err := r.checkIsolation(spec); err != nil {
		return nil, err
	}
	isolation := r.isolationOf(spec)
	if err := r.checkBinds(spec); err != nil {
		return nil, err
	}
	if r.containment == ContainProcessGroup {
		return &launch{cmd: &exec.Cmd{
			Path: path, Args: spec.Command, Env: env, Dir: dir,
			// A new session detaches the workload from the daemon's
			// terminal and makes its pid the process group Stop signals.
			SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: r.deathSignal()},
		}}, nil
	}
	l := &launch{}
	cfg := initConfig(spec, path)
	var extra []*os.File
	if isolation == IsolationBwrap {
		var err error
		if cfg, extra, l.forward, err = r.planBwrap(spec, path, dir); err != nil {
			return nil, err
		}
		for _, f := range extra {
			l.parentEnds = append(l.parentEnds, f)
		}
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		l.release()
		return nil, classify(phaseSpawn, "make the init's status pipe", err)
	}
	l.status = statusR
	l.parentEnds = append(l.parentEnds, statusW)
	l.cmd = r.initCmd(cfg)
	l.cmd.Env, l.cmd.Dir = env, dir
	// fd 3 is the status pipe; the isolation's descriptors follow.
	l.cmd.ExtraFiles = append([]*os.File{statusW}, extra...)
	return l, nil
}

// initConfig is what the init of spec's workload runs without isolation;
// its working directory, unless the config names one, is the init's own.
func initConfig(spec driver.Spec, path string) nsinit.Config {
	cfg := nsinit.Config{Path: path, Args: spec.Command}
	for _, b := range spec.Binds {
		cfg.Binds = append(cfg.Binds, nsinit.Bind{Source: b.Source, Target: b.Target})
	}
	if len(spec.Binds) > 0 && filepath.IsAbs(spec.WorkDir) {
		// The resolved dir is its place on the host; the init enters the
		// bound one.
		cfg.Dir = spec.WorkDir
	}
	return cfg
}

// initCmd runs an init with cfg as PID 1 of a new PID namespace (in a new
// user namespace too when the daemon is not root, mapping the daemon's uid
// and gid onto themselves so that the workload keeps its user and files),
// and, when this platform allows, in a mount namespace with its own /proc.
func (r *Driver) initCmd(cfg nsinit.Config) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: r.deathSignal()}
	if r.ownProc {
		cfg.MountProc = true
		attr.Cloneflags |= syscall.CLONE_NEWNS
	}
	if r.userNS {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		if r.ownProc {
			// Only to mount /proc; the init drops it before it forks.
			attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
		}
	}
	return &exec.Cmd{
		// Never a path that names a file: the init is the program that
		// was checked (or this process's own), even if a file was
		// replaced since.
		Path:        r.init.path,
		Args:        append([]string{nsinit.Name}, cfg.Flags()...),
		SysProcAttr: attr,
	}
}

// deathSignal is what the kernel sends a workload's first process when
// this one dies: SIGKILL with WithParentDeath, else nothing.
func (r *Driver) deathSignal() syscall.Signal {
	if r.parentDeath {
		return syscall.SIGKILL
	}
	return 0
}

// spawn starts l, waits until the workload runs, and records it as a child
// of this value.
func (r *Driver) spawn(ctx context.Context, l *launch, name string) (driver.Handle, error) {
	cmd := l.cmd
	// A pidfd of the child, made by the clone itself, lets the reaper wait
	// in the poller: cmd.Wait alone would hold an OS thread per workload,
	// blocked in waitid, for as long as the workload runs.
	pidfd := -1
	if pidfdsWork() {
		cmd.SysProcAttr.PidFD = &pidfd
	}
	if err := cmd.Start(); err != nil {
		return driver.Handle{}, classify(phaseSpawn, fmt.Sprintf("start %q", name), err)
	}
	l.closeParentEnds()
	pid := cmd.Process.Pid
	// Until cmd.Wait reaps it, the child's /proc entry stays, even if it has
	// already exited, so its start time is always readable here.
	st, err := readStat(pid)
	if err != nil {
		_ = unix.Kill(-pid, unix.SIGKILL)
		reapNow(cmd, pidfd)
		return driver.Handle{}, classify(phaseSpawn, "read the new process's start time", err)
	}
	return r.track(ctx, cmd, pidfd, st.StartTime, l.takeStatus(), l.forward)
}

// takeStatus hands over l's status pipe, which l then no longer closes.
func (l *launch) takeStatus() *os.File {
	s := l.status
	l.status = nil
	return s
}

// track records cmd's process, which started at start, as a child of this
// value and reaps it in the background. With a status pipe (an init's) it
// first waits until the init reports that the command runs; on error the
// init has been killed and reaped.
func (r *Driver) track(ctx context.Context, cmd *exec.Cmd, pidfd int, start uint64, status *os.File, forward string) (driver.Handle, error) {
	pid := cmd.Process.Pid
	final := func() nsinit.Status { return nsinit.Status{} }
	if status != nil {
		// A create's ctx has no deadline: this bounds an init stuck before
		// it starts the command (an exec hung on a dead mount, say).
		actx, cancel := clock.WithTimeout(ctx, r.clk, startTimeout)
		var err error
		final, err = awaitStart(actx, status, pid)
		timedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			reapNow(cmd, pidfd)
			if timedOut {
				err = provider.Errorf(provider.CreateFailed, "the sandbox's init did not start the command within %s, so it was killed: retry, and look for what the command's start waits on (a hung mount, a full disk)", startTimeout)
			}
			return driver.Handle{}, err
		}
	}
	c := &child{done: make(chan struct{}), forward: forward}
	r.mu.Lock()
	r.children[procKey{pid, start}] = c
	r.mu.Unlock()
	go r.reap(cmd, pidfd, final, c)
	return driver.Handle{Runtime: provider.RuntimeNative, PID: pid, StartTime: start}, nil
}

// startTimeout bounds how long an init may take to report that its command
// runs, which takes it milliseconds (a parked workload that does not take
// its hand-off costs nsinit's 5 s, then a new process, within it).
const startTimeout = 30 * time.Second

// reapNow reaps cmd's process, which has ended or been killed, and closes
// its pidfd (-1: none).
func reapNow(cmd *exec.Cmd, pidfd int) {
	if pidfd >= 0 {
		unix.Close(pidfd)
	}
	_ = cmd.Wait()
}

// reap waits for cmd's process to end, reaps it and records how it ended
// in c. With a pidfd it waits parked in the poller until the pidfd turns
// readable, which it does once the whole process has exited, so that
// cmd.Wait (waitid on Go's own pidfd) returns at once with the exact
// status; without one cmd.Wait blocks a thread until then. The status
// pipe's reader (final) is parked in the poller too.
func (r *Driver) reap(cmd *exec.Cmd, pidfd int, final func() nsinit.Status, c *child) {
	s := final()
	if pidfd >= 0 {
		// Takes pidfd. An error only means cmd.Wait does the waiting.
		_ = waitReadable(context.Background(), pidfd)
	}
	_ = cmd.Wait() // the exit status is in ProcessState; the error only repeats it
	c.exit = exitOfInit(s, cmd.ProcessState)
	close(c.done)
}

// pidfdsWork reports whether this kernel makes pidfds (Linux 5.3 and
// later, where no seccomp profile forbids them): clone(CLONE_PIDFD) would
// fail the spawn where they do not.
var pidfdsWork = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// awaitStart reads the init's status pipe until the init reports that the
// command runs, then goes on reading in the background: final blocks until
// the pipe closes and returns how the command ended, if the init said so. An
// init that cannot start the command, or ctx's end, is an error, and the
// init has been told to end (SIGKILL: nothing of the workload runs yet).
func awaitStart(ctx context.Context, status *os.File, pid int) (final func() nsinit.Status, err error) {
	started := make(chan nsinit.Status, 1)
	ended := make(chan nsinit.Status, 1)
	go func() {
		defer status.Close()
		ended <- nsinit.ReadStatus(status, func(s nsinit.Status) { started <- s }, "the init ended before it started the command")
	}()
	var once sync.Once
	var s nsinit.Status
	final = func() nsinit.Status {
		once.Do(func() { s = <-ended })
		return s
	}
	select {
	case st := <-started:
		if st.Err == "" {
			return final, nil
		}
		// The init exits after an error report; it is reaped by the caller.
		return nil, provider.Errorf(provider.CreateFailed, "start the workload: %s", st.Err)
	case <-ctx.Done():
		_ = unix.Kill(pid, unix.SIGKILL)
		return nil, ctx.Err()
	}
}

// exitOfInit says how a workload under an init ended: as the init reported,
// else as the init itself ended (SIGKILL, typically, from Stop).
func exitOfInit(s nsinit.Status, ps *os.ProcessState) driver.Exit {
	switch {
	case s.Exited:
		code := s.Code
		return driver.Exit{Reason: fmt.Sprintf("exited: code %d", code), Code: &code}
	case s.Signal != 0:
		return driver.Exit{Reason: "killed: signal " + signalName(s.Signal)}
	}
	return exitOf(ps)
}

// platform is what this process can give a workload, probed once: the
// platform does not change while it runs.
type platform struct {
	// err says why there are no PID namespaces; nil when there are.
	err error
	// ownProc: the init can mount a /proc of its own.
	ownProc bool
}

var probes [2]struct {
	once sync.Once
	platform
}

// probeNamespaces learns whether this process can start an init in a new PID
// namespace (with a user namespace when userNS), and whether the init can
// mount its own /proc there.
func probeNamespaces(userNS bool) platform {
	i := 0
	if userNS {
		i = 1
	}
	p := &probes[i]
	p.once.Do(func() {
		if !nsinit.Enabled() {
			p.err = errors.New("this program does not call nsinit.Main, so it cannot be its own init")
			return
		}
		try := func(ownProc bool) error {
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			defer r.Close()
			cmd := (&Driver{userNS: userNS, ownProc: ownProc, init: selfInit}).initCmd(nsinit.Config{Probe: true})
			cmd.Env, cmd.ExtraFiles = []string{}, []*os.File{w}
			err = cmd.Run()
			w.Close()
			if err != nil {
				var report strings.Builder
				nsinit.ReadStatus(r, func(s nsinit.Status) { report.WriteString(s.Err) }, "")
				return fmt.Errorf("start an init in a new PID namespace: %w %s", err, report.String())
			}
			return nil
		}
		if p.ownProc = try(true) == nil; !p.ownProc {
			p.err = try(false)
		}
	})
	return p.platform
}
