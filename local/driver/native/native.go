package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
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

	// probeDial bounds one readiness dial of a workload's port.
	probeDial = time.Second
)

// Driver runs workloads as detached host processes. The zero value is not
// usable; call New.
type Driver struct {
	clk clock.Clock
	// containment is how this value contains workloads (ContainPIDNamespace
	// or ContainProcessGroup); fallback says why it is not the former.
	containment string
	fallback    error
	// userNS adds a user namespace to the PID namespace: an unprivileged
	// daemon may create a PID namespace only inside one.
	userNS bool
	// ownProc gives each init a mount namespace with a /proc of its own.
	ownProc bool
	// isolation applies to specs that name none; isolationFallback says
	// why SettleIsolation made it none.
	isolation         string
	isolationFallback error
	// bwrapOK is set once bubblewrap has proven it can isolate here.
	bwrapOK atomic.Bool
	// init is the program every init runs; initErr why it is not the one
	// that was there or asked for (see InitFallback); initSet: an option
	// chose it.
	init    initProgram
	initErr error
	initSet bool
	// parentDeath ends each workload when this process dies.
	parentDeath bool
	// parkPrograms are the programs a parked init starts ahead (WithParkable).
	parkPrograms []string

	mu sync.Mutex
	// children are the processes this value spawned and reaps, keyed by pid
	// and start time so that a reused pid finds no stale record.
	children map[procKey]*child
	// parked is the init waiting for the next Start (see Warm); warming is
	// set while one is being started, which parking counts; cooled turns
	// parking off.
	parked  *parkedInit
	warming bool
	cooled  bool
	parking sync.WaitGroup
}

var (
	_ driver.Driver      = (*Driver)(nil)
	_ driver.Prober      = (*Driver)(nil)
	_ driver.Containment = (*Driver)(nil)
	_ driver.HostNetwork = (*Driver)(nil)
	_ driver.PortDialer  = (*Driver)(nil)
	_ driver.Warmer      = (*Driver)(nil)
)

type procKey struct {
	pid   int
	start uint64
}

type child struct {
	done chan struct{} // closed once exit is set
	exit driver.Exit
	// forward is the unix socket behind the port of an isolated workload,
	// where Probe asks whether the workload serves.
	forward string
}

// Option configures New.
type Option func(*Driver)

// WithContainment makes the runtime use mode rather than the best this
// platform offers: ContainProcessGroup does without namespaces.
func WithContainment(mode string) Option {
	return func(r *Driver) {
		if mode == ContainProcessGroup {
			r.containment, r.fallback = mode, errors.New("process groups were asked for")
		}
	}
}

// WithIsolation sets the isolation of specs that name none (IsolationNone
// or IsolationBwrap); Preflight refuses an unknown one.
func WithIsolation(isolation string) Option {
	return func(r *Driver) { r.isolation = isolation }
}

// WithParentDeath ends every workload when this process dies, SIGKILL
// included: for a runtime whose sandboxes must not outlive it (the
// simulator's, which keeps no registry to find them by again), unlike the
// daemon's, whose sandboxes the next daemon adopts. The kernel kills the
// init, and with it the PID namespace, when the thread that spawned it
// ends; the Go runtime ends a thread only with a goroutine that locked it,
// which no spawn does.
func WithParentDeath() Option {
	return func(r *Driver) { r.parentDeath = true }
}

// WithParkable names programs, by absolute path, that call
// nsinit.AwaitSandbox first thing in main; an empty path names none. When
// Warm's spec runs one, the init it parks starts that program too, ahead
// of any sandbox, and a Start of the same command takes it as it is:
// neither its exec nor its own start-up weighs on the Start. Name only
// programs trusted as the init is: one runs before it is any sandbox's,
// and every parked workload holds no mark and no value of a sandbox until
// it is handed one.
func WithParkable(paths ...string) Option {
	return func(r *Driver) {
		for _, p := range paths {
			if p != "" {
				r.parkPrograms = append(r.parkPrograms, p)
			}
		}
	}
}

// WithClock runs the driver's grace periods and polls on clk rather than
// the real clock; nil keeps the real one.
func WithClock(clk clock.Clock) Option {
	return func(r *Driver) {
		if clk != nil {
			r.clk = clk
		}
	}
}

// New returns a Driver. It contains workloads in PID namespaces when this
// platform and binary allow (see Containment), and in process groups
// otherwise.
func New(opts ...Option) *Driver {
	r := &Driver{clk: clock.Real(), children: make(map[procKey]*child), userNS: os.Geteuid() != 0}
	for _, o := range opts {
		o(r)
	}
	if !r.initSet {
		r.init, r.initErr = defaultInit()
	}
	if r.containment == "" {
		p := probeNamespaces(r.userNS)
		r.containment, r.fallback, r.ownProc = ContainPIDNamespace, p.err, p.ownProc
		if r.fallback != nil {
			r.containment = ContainProcessGroup
		}
	}
	return r
}

// Containment is ContainPIDNamespace or ContainProcessGroup.
func (r *Driver) Containment() string { return r.containment }

// ContainmentFallback says why Containment is not ContainPIDNamespace; nil
// when it is.
func (r *Driver) ContainmentFallback() error { return r.fallback }

func (r *Driver) Name() provider.Runtime { return provider.RuntimeNative }

// Preflight checks that spec's command resolves to an executable, that its
// directories exist, and that its isolation can work here.
func (r *Driver) Preflight(ctx context.Context, spec driver.Spec) error {
	path, _, err := r.resolve(spec)
	if err != nil {
		return err
	}
	if err := r.checkBinds(spec); err != nil {
		return err
	}
	return r.preflightIsolation(ctx, spec, path)
}

// checkBinds refuses binds that spec's workload would not get.
func (r *Driver) checkBinds(spec driver.Spec) error {
	if len(spec.Binds) == 0 || r.isolationOf(spec) == IsolationBwrap || (r.containment == ContainPIDNamespace && r.ownProc) {
		return nil
	}
	return provider.Errorf(provider.PreflightFailed,
		"this platform gives workloads no mount namespace of their own, so %s cannot be shown at %s: run without binds",
		spec.Binds[0].Source, spec.Binds[0].Target)
}

// resolve returns the executable spec runs and the directory it runs in: the
// working directory, else the sandbox's (its home, isolated), against which a
// relative working directory resolves too.
func (r *Driver) resolve(spec driver.Spec) (path, dir string, err error) {
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
	if r.isolationOf(spec) == IsolationBwrap {
		dir = filepath.Join(spec.Dir, homeDir)
	}
	if spec.WorkDir != "" {
		base := dir
		dir = hostPath(spec.WorkDir, spec.Binds)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(base, dir)
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

// hostPath is where p, a path as the workload sees it, lies on the host:
// under the Source of the bind whose Target holds it, else p itself.
func hostPath(p string, binds []driver.Bind) string {
	for _, b := range binds {
		if rel, err := filepath.Rel(b.Target, p); err == nil && filepath.IsAbs(p) && rel != ".." && !strings.HasPrefix(rel, "../") {
			return filepath.Join(b.Source, rel)
		}
	}
	return p
}

// CanBind reports whether workloads get a mount namespace of their own, in
// which Spec.Binds are made: under PID-namespace containment where the init
// can mount (or with bwrap isolation, which binds them itself).
func (r *Driver) CanBind() bool {
	return r.checkBinds(driver.Spec{Binds: []driver.Bind{{}}}) == nil
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
func environ(spec driver.Spec) ([]string, error) {
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
	return append(env, marks(spec.Root, spec.SandboxID)...), nil
}

func openLog(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, classify(phaseSpawn, "open "+filepath.Base(p), err)
	}
	return f, nil
}

// child returns the record of h if this value spawned it.
func (r *Driver) child(h driver.Handle) *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.children[procKey{h.PID, h.StartTime}]
}

// Remove ends h's workload at once if it still runs (as Stop with no grace
// would) and forgets its exit status. A native workload holds nothing else.
func (r *Driver) Remove(ctx context.Context, h driver.Handle) error {
	if err := r.Stop(ctx, h, 0); err != nil {
		return err
	}
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

// Probe reports whether h's workload serves on addr. An isolated workload is
// asked through its forwarder's socket, since the forwarder accepts on the
// port for it; any other is dialled. ctx's error only.
func (r *Driver) Probe(ctx context.Context, h driver.Handle, addr netip.AddrPort) (bool, error) {
	// A full accept queue drops SYNs and a connect retries them for
	// minutes: one second is an answer.
	dctx, cancel := clock.WithTimeout(ctx, r.clk, probeDial)
	defer cancel()
	if c := r.child(h); c != nil && c.forward != "" {
		return nsinit.Probe(dctx, c.forward), ctx.Err()
	}
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", addr.String())
	if err != nil {
		return false, ctx.Err()
	}
	conn.Close()
	return true, nil
}

// Logs returns the newest MiB of each of dir's log files. A missing file is
// an empty log.
func (r *Driver) Logs(ctx context.Context, h driver.Handle, dir string) (stdout, stderr []byte, err error) {
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
