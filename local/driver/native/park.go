package native

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
)

// A parked init starts with one environment entry, parkingVar's, which
// holds room for the marks it shows once handed a workload
// (nsinit.Reserve), and shows ParkedEntry once it is parked. Neither is a
// mark, so Orphans never takes a parked init for a workload; it needs none,
// since it exits as soon as its control socket closes, that is, with this
// process.
const parkingVar = "SANDPLANE_PARKING"

// ParkedEntry begins /proc/PID/environ of an init parked for the next
// Start (see Warm), and nothing else does.
const ParkedEntry = "SANDPLANE_PARKED="

// maxParkedID is the longest sandbox id a parked init has room to show;
// a longer one is started cold. Ids are at most 128 bytes in the API.
const maxParkedID = 128

// parkedInit is an init started ahead of a Start, in its PID and mount
// namespaces with its /proc mounted, waiting for its command: a Start that
// takes it pays neither the clone nor the init's own start-up.
type parkedInit struct {
	root  string
	cmd   *exec.Cmd
	pidfd int
	start uint64
	// status is the read end of its status pipe; ctl this end of its
	// control socket.
	status *os.File
	ctl    *net.UnixConn
}

// errUndelivered: a parked init did not get its request, so nothing of the
// workload runs and a cold start may follow.
var errUndelivered = errors.New("the parked init did not take the request")

// Warm parks an init for spec's root, unless one is parked or being
// parked, or spec would not use one (see parkable), or parking is off (see
// Cool). It returns once the init is started, not once it is ready: a
// Start in between hands it the request all the same, which it reads when
// it is. A failure only means the next Start is a cold one.
func (r *Driver) Warm(spec driver.Spec) {
	if !r.parkable(spec) {
		return
	}
	r.mu.Lock()
	busy := r.cooled || r.warming || r.parked != nil && r.parked.root == spec.Root
	if !busy {
		r.warming = true
		r.parking.Add(1)
	}
	r.mu.Unlock()
	if busy {
		return
	}
	defer r.parking.Done()
	p, err := r.park(spec)
	var drop *parkedInit
	r.mu.Lock()
	switch {
	case err != nil:
	case r.cooled:
		drop = p
	default:
		drop, r.parked = r.parked, p
	}
	r.warming = false
	r.mu.Unlock()
	if drop != nil {
		drop.release()
	}
}

// Cool ends the parked init, if any, and one being parked, and stops Warm
// from parking another. Workloads run on.
func (r *Driver) Cool() {
	r.mu.Lock()
	p := r.parked
	r.parked, r.cooled = nil, true
	r.mu.Unlock()
	if p != nil {
		p.release()
	}
	r.parking.Wait() // a Warm under way releases what it parked
}

// parkable reports whether spec's workload can start under a parked init:
// one in this runtime's own containment, without isolation (whose init
// needs descriptors and flags of its own from its start), with binds only
// where the init has a mount namespace to make them in.
func (r *Driver) parkable(spec driver.Spec) bool {
	return r.containment == ContainPIDNamespace && r.isolationOf(spec) == IsolationNone &&
		r.checkBinds(spec) == nil && len(spec.SandboxID) <= maxParkedID
}

// park starts an init for spec's root that waits for its command on a
// control socket: with spec's command started ahead too when it runs a
// program WithParkable named.
func (r *Driver) park(spec driver.Spec) (*parkedInit, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer statusW.Close()
	cfg := nsinit.Config{Park: ParkedEntry}
	if len(spec.Command) > 0 && slices.Contains(r.parkPrograms, spec.Command[0]) {
		cfg.Path, cfg.Args = spec.Command[0], spec.Command
	}
	cmd := r.initCmd(cfg)
	cmd.Env = []string{nsinit.Reserve(parkingVar, marks(spec.Root, strings.Repeat("x", maxParkedID)))}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{statusW, theirs} // fds 3 and 4
	p := &parkedInit{root: spec.Root, cmd: cmd, pidfd: -1, status: statusR, ctl: conn.(*net.UnixConn)}
	if pidfdsWork() {
		cmd.SysProcAttr.PidFD = &p.pidfd
	}
	if err := cmd.Start(); err != nil {
		conn.Close()
		statusR.Close()
		return nil, err
	}
	st, err := readStat(cmd.Process.Pid)
	if err != nil {
		p.release()
		return nil, err
	}
	p.start = st.StartTime
	return p, nil
}

// marks are the entries that mark a workload of root's sandbox id.
func marks(root, id string) []string {
	return []string{rootVar + "=" + root, idVar + "=" + id}
}

// unpark takes the init parked for spec's root, if there is one and spec
// can use it.
func (r *Driver) unpark(spec driver.Spec) *parkedInit {
	if !r.parkable(spec) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parked
	if p == nil || p.root != spec.Root {
		return nil
	}
	r.parked = nil
	return p
}

// dispatch hands p the workload's request and tracks it as Start's cold
// path tracks a new init. errUndelivered means p is gone and nothing runs,
// as does ctx's error; an init gone before its request also turns parking
// off, since its platform may not let it park (see nsinit's -park).
func (r *Driver) dispatch(ctx context.Context, p *parkedInit, spec driver.Spec, path, dir string, env []string, stdout, stderr *os.File) (driver.Handle, error) {
	// The init enters dir before its binds, as a cold one starts in it;
	// the daemon's root may be relative to the daemon's own directory.
	cwd, err := filepath.Abs(dir)
	if err != nil {
		p.release()
		return driver.Handle{}, classify(phaseSpawn, fmt.Sprintf("start %q", spec.Command[0]), err)
	}
	req := nsinit.Request{
		Config: initConfig(spec, path),
		Env:    env,
		Show:   marks(spec.Root, spec.SandboxID),
		Stdout: stdout, Stderr: stderr, Cwd: cwd,
	}
	// An init that does not read must not hold the Start past ctx.
	ctl := p.ctl
	stop := context.AfterFunc(ctx, func() { ctl.Close() })
	err = req.Send(ctl)
	stop()
	ctl.Close()
	p.ctl = nil
	if err != nil {
		p.release()
		if err := ctx.Err(); err != nil {
			return driver.Handle{}, err
		}
		r.mu.Lock()
		r.cooled = true
		r.mu.Unlock()
		return driver.Handle{}, errUndelivered
	}
	status := p.status
	p.status = nil
	return r.track(ctx, p.cmd, p.pidfd, p.start, status, "")
}

// release ends p and reaps it in the background. Nothing of a workload runs
// under it: it forks only once it has read a whole request.
func (p *parkedInit) release() {
	if p.ctl != nil {
		p.ctl.Close()
	}
	if p.status != nil {
		p.status.Close()
	}
	// Its pid cannot name another process until it is reaped.
	_ = p.cmd.Process.Kill()
	go reapNow(p.cmd, p.pidfd)
}
