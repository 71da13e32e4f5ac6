package native

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
)

// Isolation modes (driver.Spec.Isolation).
const (
	IsolationNone  = "none"
	IsolationBwrap = "bwrap"
)

// The directories of an isolated sandbox, inside Spec.Dir.
const (
	// homeDir is $HOME and the default working directory, at the same path
	// inside as outside.
	homeDir = "home"
	// tmpDir is the sandbox's /tmp.
	tmpDir = "tmp"
	// runDir holds the forwarder's socket; inside it is innerRun.
	runDir = "run"
)

// Paths inside an isolated sandbox.
const (
	innerRun  = "/run/sandplane"
	innerInit = "/run/" + nsinit.Name
	fwdSocket = "fwd.sock"
	// dialSocket reaches any port of the sandbox's loopback (DialPort).
	dialSocket = "dial.sock"
)

// Descriptors of an isolated workload's outer init, after the status pipe:
// this binary, for the inner init, then the listener of each port, the
// workload's own first.
const (
	exeFD    = nsinit.StatusFD + 1
	listenFD = exeFD + 1
)

// isolationOf is spec's isolation, or the runtime's default.
func (r *Driver) isolationOf(spec driver.Spec) string {
	switch {
	case spec.Isolation != "":
		return spec.Isolation
	case r.isolation != "":
		return r.isolation
	}
	return IsolationNone
}

// preflightIsolation checks that spec's isolation is known and can work here:
// for bwrap, that this daemon has PID namespaces, that bwrap is installed,
// and that it can create its namespaces. preflight_failed, naming the fix.
func (r *Driver) preflightIsolation(ctx context.Context, spec driver.Spec, path string) error {
	if err := r.checkIsolation(spec); err != nil || r.isolationOf(spec) == IsolationNone {
		return err
	}
	if r.bwrapOK.Load() {
		return nil
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return provider.Errorf(provider.PreflightFailed,
			"isolation bwrap needs bubblewrap, which is not installed: apt-get install bubblewrap (or set isolation: none)")
	}
	// The smallest sandbox that needs every namespace a workload's does.
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/",
		"--proc", "/proc", "--dev", "/dev", "--", bwrap, "--version")
	cmd.Env, cmd.Stderr = []string{}, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return provider.Errorf(provider.PreflightFailed, "bubblewrap cannot create its namespaces here (%v: %s): %s",
			err, strings.TrimSpace(stderr.String()), usernsFix())
	}
	r.bwrapOK.Store(true)
	return nil
}

// checkIsolation is what Preflight and Start both check of spec's isolation,
// short of running bwrap.
func (r *Driver) checkIsolation(spec driver.Spec) error {
	switch iso := r.isolationOf(spec); iso {
	case IsolationNone:
		return nil
	case IsolationBwrap:
	default:
		return provider.Errorf(provider.PreflightFailed, "isolation %q is not known: use %q or %q", iso, IsolationNone, IsolationBwrap)
	}
	if r.containment != ContainPIDNamespace {
		return provider.Errorf(provider.PreflightFailed,
			"isolation bwrap needs PID namespaces, which this daemon cannot create (%v): set isolation: none", r.fallback)
	}
	for _, m := range spec.Mappings() {
		if !validPort(m.Host) || !validPort(m.Sandbox) {
			return provider.Errorf(provider.PreflightFailed, "isolation bwrap forwards the sandbox's ports, and port %d (to %d inside) is not one", m.Host, m.Sandbox)
		}
	}
	return nil
}

func validPort(p int) bool { return p > 0 && p <= 65535 }

// usernsFix names the setting that keeps unprivileged user namespaces off.
func usernsFix() string {
	for _, s := range []struct{ file, off, fix string }{
		{"/proc/sys/kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"},
		{"/proc/sys/user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=10000"},
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
			"sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give bwrap an AppArmor profile that allows userns"},
	} {
		if b, err := os.ReadFile(s.file); err == nil && strings.TrimSpace(string(b)) == s.off {
			return s.fix
		}
	}
	return "allow unprivileged user namespaces (a container runtime's seccomp profile may forbid them), or set isolation: none"
}

// planBwrap prepares an isolated spawn: the outer init's config, the
// descriptors it inherits after the status pipe (this binary, for the inner
// init, and a listener on each host port), and the forwarder's socket of
// the workload's own port. The outer init forwards each host port into the
// sandbox, to its sandbox port there; its main command is bwrap, whose
// command is the inner init, PID 1 of bwrap's own PID namespace.
func (r *Driver) planBwrap(spec driver.Spec, path, dir string) (nsinit.Config, []*os.File, string, error) {
	var files []*os.File
	fail := func(err error) (nsinit.Config, []*os.File, string, error) {
		for _, f := range files {
			f.Close()
		}
		return nsinit.Config{}, nil, "", err
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fail(provider.Errorf(provider.PreflightFailed,
			"isolation bwrap needs bubblewrap, which is not installed: apt-get install bubblewrap (or set isolation: none)"))
	}
	for _, d := range []string{homeDir, tmpDir, runDir} {
		if err := os.MkdirAll(filepath.Join(spec.Dir, d), 0o700); err != nil {
			return fail(classify(phaseSpawn, "make the sandbox's "+d+" directory", err))
		}
	}
	exeFd, err := unix.Open(r.init.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(classify(phaseSpawn, "open this program for the sandbox's init", err))
	}
	files = append(files, os.NewFile(uintptr(exeFd), "exe"))

	inner := nsinit.Config{NoSignals: true, Path: path, Args: spec.Command} // the outer init signals the whole tree
	outer := nsinit.Config{Relay: true, KeepFDs: []int{exeFD}, Path: bwrap}
	for i, m := range spec.Mappings() {
		// Bound here, so that the port is the workload's before Start
		// returns and a taken port fails the spawn rather than the init.
		ln, err := listenFile(netip.AddrPortFrom(spec.HostAddr(), uint16(m.Host)))
		if err != nil {
			return fail(err)
		}
		files = append(files, ln)
		sock := fwdSocket
		if i > 0 {
			sock = fmt.Sprintf("fwd-%d.sock", m.Sandbox)
		}
		inner.Serves = append(inner.Serves, nsinit.Serve{
			Socket: innerRun + "/" + sock,
			Target: net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Sandbox)),
		})
		outer.Forwards = append(outer.Forwards, nsinit.Forward{
			ListenFD: listenFD + i,
			Socket:   filepath.Join(spec.Dir, runDir, sock),
		})
	}
	// Only the daemon's user reaches the socket from the host (the
	// sandbox's directory is 0700), and inside it leads nowhere the
	// workload could not connect to itself.
	inner.Serves = append(inner.Serves, nsinit.Serve{
		Socket: innerRun + "/" + dialSocket,
		Target: net.JoinHostPort("127.0.0.1", nsinit.AnyPort),
	})
	args := append([]string{"bwrap"}, bwrapArgs(spec, path, dir)...)
	outer.Args = append(append(args, "--", innerInit), inner.Flags()...)
	return outer, files, outer.Forwards[0].Socket, nil
}

// listenFile binds addr (the sandbox's own loopback address, spec.HostIP,
// and a host port) and returns the listener as a file to hand on. The
// workload itself, in a network namespace of its own, can listen on none of
// the host's addresses: 127.0.0.1 and [::1], where browsers send the
// cookies of every preview, stay out of its reach.
func listenFile(addr netip.AddrPort) (*os.File, error) {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
	if err != nil {
		return nil, classify(phaseSpawn, fmt.Sprintf("listen on %s", addr), err)
	}
	f, err := ln.File()
	ln.Close() // f is a duplicate: the socket stays bound
	if err != nil {
		return nil, classify(phaseSpawn, "hand the port's listener on", err)
	}
	return f, nil
}

// SharesHostNetwork reports whether spec's workload runs on the host's
// network: it does unless it is isolated.
func (r *Driver) SharesHostNetwork(spec driver.Spec) bool {
	return r.isolationOf(spec) == IsolationNone
}

// procReadOnly are the parts of /proc that change the machine, not the
// sandbox: read-only inside it.
var procReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"}

// bwrapArgs lays out an isolated sandbox's file system and namespaces.
// Order matters: a later mount covers an earlier one.
func bwrapArgs(spec driver.Spec, path, dir string) []string {
	home := filepath.Join(spec.Dir, homeDir)
	a := []string{
		// Every namespace; a user namespace even for root, so that the
		// capabilities bwrap leaves are the namespace's, not the host's.
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--as-pid-1", // the inner init reaps and reports, not bwrap
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	}
	// The sandbox's uid 0 is the host's root when the daemon runs as root
	// (one uid mapped onto itself), and the kernel checks only the owner
	// bits of a sysctl: a writable /proc/sys would let it set
	// kernel.core_pattern, which the kernel runs as the host's root. The
	// kernel's knobs in /proc are bound read-only over themselves, in the
	// sandbox's own /proc, as container runtimes do.
	for _, p := range procReadOnly {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, "--bind", filepath.Join(spec.Dir, tmpDir), "/tmp")
	hidden := []string{"/tmp"}
	hide := func(p string) {
		if p == "" || !filepath.IsAbs(p) || under(p, hidden) {
			return
		}
		// Lstat: /var/run is mostly a symlink to /run, hidden with it.
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			a = append(a, "--tmpfs", p)
			hidden = append(hidden, p)
		}
	}
	// /run holds the host's sockets (Docker's, D-Bus's): a socket on a
	// read-only mount still accepts connections.
	hide("/run")
	hide("/var/run")
	for _, p := range homes() {
		hide(p)
	}
	hide(spec.Root) // every sandbox's files, and the daemon's
	a = append(a,
		"--bind", home, home,
		"--bind", filepath.Join(spec.Dir, runDir), innerRun,
		"--ro-bind-fd", strconv.Itoa(exeFD), innerInit,
	)
	for _, b := range spec.Binds {
		a = append(a, "--bind", b.Source, b.Target)
	}
	// The command stays reachable where it lies even if that is hidden
	// (the daemon's own binary under a home directory, say).
	if under(path, hidden) && !under(path, []string{home}) {
		a = append(a, "--ro-bind", path, path)
	}
	if len(spec.Binds) > 0 {
		// The workload's own view: its directory and HOME (spec.Env) are
		// where the binds show them.
		if filepath.IsAbs(spec.WorkDir) {
			dir = spec.WorkDir
		}
		a = append(a, "--chdir", dir, "--setenv", "TMPDIR", "/tmp")
	} else {
		a = append(a,
			"--chdir", dir,
			"--setenv", "HOME", home,
			"--setenv", "TMPDIR", "/tmp",
		)
	}
	if os.Geteuid() == 0 {
		// Root in the sandbox's user namespace keeps no capability there.
		a = append(a, "--cap-drop", "ALL")
	}
	return a
}

// homes are the home directories an isolated sandbox must not see: the
// daemon user's, root's, and everyone's under /home.
func homes() []string {
	out := []string{"/home", "/root"}
	if h, err := os.UserHomeDir(); err == nil && h != "/" {
		out = append(out, h)
	}
	return out
}

// under reports whether p is one of dirs or inside one.
func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if rel, err := filepath.Rel(d, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}
