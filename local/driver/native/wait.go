package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

const (
	// pollEvery paces the wait for an adopted process when pidfds are
	// unavailable (kernels before 5.3, some seccomp profiles).
	pollEvery = 100 * time.Millisecond
	// killWait bounds the wait for a SIGKILLed process to disappear. Only a
	// process stuck in the kernel (D state) takes longer.
	killWait = 10 * time.Second
)

func exitOf(ps *os.ProcessState) driver.Exit {
	if ps == nil {
		return goneExit()
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return driver.Exit{Reason: "killed: signal " + signalName(ws.Signal())}
	}
	if ps.Exited() {
		code := ps.ExitCode()
		return driver.Exit{Reason: fmt.Sprintf("exited: code %d", code), Code: &code}
	}
	return goneExit()
}

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return strconv.Itoa(int(s))
}

// goneExit is all that can be said of a process this value did not spawn.
func goneExit() driver.Exit { return driver.Exit{Reason: "process gone"} }

// Status reports whether h's process runs. For a process this value spawned
// the exit is the real one; for an adopted one it is "process gone".
func (r *Driver) Status(ctx context.Context, h driver.Handle) (driver.Status, error) {
	c := r.child(h)
	if c != nil {
		select {
		case <-c.done:
			return driver.Status{Exit: c.exit}, nil
		default:
		}
	}
	up, err := alive(h)
	if err != nil {
		return driver.Status{}, err
	}
	if up {
		return driver.Status{Running: true}, nil
	}
	if c != nil {
		// Our child has ended (it is a zombie) but the reaper has not
		// recorded how yet. It is about to.
		select {
		case <-c.done:
			return driver.Status{Exit: c.exit}, nil
		case <-ctx.Done():
			return driver.Status{}, ctx.Err()
		}
	}
	return driver.Status{Exit: goneExit()}, nil
}

// Wait blocks until h's process ends or ctx does.
func (r *Driver) Wait(ctx context.Context, h driver.Handle) (driver.Exit, error) {
	if c := r.child(h); c != nil {
		select {
		case <-c.done:
			return c.exit, nil
		case <-ctx.Done():
			return driver.Exit{}, ctx.Err()
		}
	}
	if h.PID <= 0 {
		return goneExit(), nil
	}
	fd, err := unix.PidfdOpen(h.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return goneExit(), nil
	}
	if err != nil {
		return r.pollGone(ctx, h)
	}
	// The pidfd names whoever holds the pid now. Checking the start time
	// after opening it proves it names h's process.
	done, err := ended(h)
	if err != nil || done {
		unix.Close(fd)
		if err != nil {
			return driver.Exit{}, err
		}
		return goneExit(), nil
	}
	if err := waitReadable(ctx, fd); err != nil {
		if ctx.Err() != nil {
			return driver.Exit{}, ctx.Err()
		}
		return r.pollGone(ctx, h)
	}
	return goneExit(), nil
}

// waitReadable waits, through the runtime's poller, until fd is readable (a
// pidfd is once its process ends) or ctx ends. It takes ownership of fd.
func waitReadable(ctx context.Context, fd int) error {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	// A non-blocking fd given to os.NewFile joins the netpoller, so the
	// wait parks a goroutine, not a thread, and Close interrupts it.
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		f.Close()
		close(closed)
	})
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			// A zero timeout: this only asks, the netpoller does the waiting.
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			pollErr = err
			return err != nil || n > 0
		}
	})
	if stop() {
		f.Close()
	} else {
		<-closed
		if err != nil {
			return ctx.Err() // the close that interrupted the wait
		}
	}
	return errors.Join(err, pollErr)
}

// pollGone checks h on the clock until its process is gone.
func (r *Driver) pollGone(ctx context.Context, h driver.Handle) (driver.Exit, error) {
	t := r.clk.NewTicker(pollEvery)
	defer t.Stop()
	for {
		done, err := ended(h)
		if err != nil {
			return driver.Exit{}, err
		}
		if done {
			return goneExit(), nil
		}
		select {
		case <-ctx.Done():
			return driver.Exit{}, ctx.Err()
		case <-t.C():
		}
	}
}

// waitGone reports whether h's process ends within d on the clock.
func (r *Driver) waitGone(ctx context.Context, h driver.Handle, d time.Duration) (bool, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := r.Wait(wctx, h)
		ended <- err
	}()
	t := r.clk.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-ended:
		return err == nil, err
	case <-t.C():
		return false, nil
	}
}

// Stop ends h's workload: SIGTERM, up to grace on the clock, then SIGKILL.
// A workload under an init gets them through the init, which forwards the
// SIGTERM to every process of its namespace; the kernel ends them all when
// the init ends. A workload in a process group gets them as a group. A
// process that is gone, or whose pid now names another process, is left
// alone and is not an error.
func (r *Driver) Stop(ctx context.Context, h driver.Handle, grace time.Duration) error {
	up, err := alive(h)
	if err != nil {
		return err
	}
	if !up {
		// Exited, but perhaps still ending: wait until it has, so that
		// what Stop promises holds when it returns.
		if done, err := ended(h); err != nil || done {
			return err
		}
		return r.awaitKill(ctx, h)
	}
	init, err := isInit(h.PID)
	if gone(err) {
		return nil
	}
	if err != nil {
		return classify(phaseInspect, fmt.Sprintf("inspect process %d", h.PID), err)
	}
	if init {
		return r.stopInit(ctx, h, grace)
	}
	return r.stopGroup(ctx, h, grace)
}

func (r *Driver) stopInit(ctx context.Context, h driver.Handle, grace time.Duration) error {
	if err := signalProcess(h, unix.SIGTERM); err != nil {
		return err
	}
	ended, err := r.waitGone(ctx, h, grace)
	if err != nil || ended {
		// The init is gone, so its namespace is empty: the kernel kills
		// what is left of it before the init counts as ended.
		return err
	}
	if err := signalProcess(h, unix.SIGKILL); err != nil {
		return err
	}
	return r.awaitKill(ctx, h)
}

// awaitKill waits for a SIGKILLed workload to disappear.
func (r *Driver) awaitKill(ctx context.Context, h driver.Handle) error {
	ended, err := r.waitGone(ctx, h, killWait)
	if err != nil {
		return err
	}
	if !ended {
		return provider.Errorf(provider.Internal, "process %d still runs %v after SIGKILL: retry the stop", h.PID, killWait)
	}
	return nil
}

// signalProcess sends sig to h's process alone, through a pidfd checked
// against h's start time, so that a pid reused since cannot receive it. A
// process that is gone is not an error.
func signalProcess(h driver.Handle, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(h.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		// No pidfds (kernels before 5.3): the caller's liveness check
		// moments ago is the best there is.
		err = unix.Kill(h.PID, sig)
	} else {
		defer unix.Close(fd)
		var up bool
		if up, err = alive(h); err != nil || !up {
			return err
		}
		err = unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	if err == nil || errors.Is(err, unix.ESRCH) {
		return nil
	}
	return classify(phaseControl, fmt.Sprintf("send %s to process %d", signalName(sig), h.PID), err)
}

// stopGroup is Stop for a workload that leads its own process group.
func (r *Driver) stopGroup(ctx context.Context, h driver.Handle, grace time.Duration) error {
	// pgid == pid: Start made the workload a session leader.
	if err := signalGroup(h.PID, unix.SIGTERM); err != nil {
		return err
	}
	ended, err := r.waitGone(ctx, h, grace)
	if err != nil {
		return err
	}
	// SIGKILL the group even when its leader ended in time, so members that
	// ignored SIGTERM do not outlive the sandbox. This cannot reach a
	// stranger: the kernel does not reuse a pid while it names a live
	// process group, and the leader was verified alive moments ago.
	if err := signalGroup(h.PID, unix.SIGKILL); err != nil {
		return err
	}
	if ended {
		return nil
	}
	return r.awaitKill(ctx, h)
}

// signalGroup signals process group pgid. A group that is already empty is
// not an error.
func signalGroup(pgid int, sig unix.Signal) error {
	err := unix.Kill(-pgid, sig)
	if err == nil || errors.Is(err, unix.ESRCH) {
		return nil
	}
	return classify(phaseControl, fmt.Sprintf("send %s to process group %d", signalName(sig), pgid), err)
}
