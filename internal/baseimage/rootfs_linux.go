package baseimage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandplane/sandplane/provider"
)

// sbinPath is PATH for debootstrap and the chroot: a non-root user's PATH
// often lacks the sbin directories where debootstrap and useradd live.
const sbinPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// proxyVars are the host variables debootstrap's downloads may need. No
// other variable of the host reaches the build, so none ends up in a
// package script's log.
var proxyVars = []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}

// canBootstrap fails with preflight_failed unless this process can run
// debootstrap: it must be root, since debootstrap makes device nodes, sets
// owners and chroots into the new tree (fakeroot and fakechroot would need
// debootstrap's fakechroot variant, whose tree is not minbase).
func canBootstrap() error {
	if os.Geteuid() != 0 {
		return provider.Errorf(provider.PreflightFailed,
			"building the default base image needs root (debootstrap makes device nodes and runs package scripts in a chroot): run `sudo sandplane image build` once, or name another image in the snapshot")
	}
	if _, err := debootstrapPath(); err != nil {
		return provider.Errorf(provider.PreflightFailed,
			"building the default base image needs debootstrap, which is not installed: apt-get install -y debootstrap, or name another image in the snapshot")
	}
	return nil
}

func debootstrapPath() (string, error) {
	if p, err := exec.LookPath("debootstrap"); err == nil {
		return p, nil
	}
	return exec.LookPath("/usr/sbin/debootstrap")
}

// makeRootfs bootstraps spec's suite into dir, installs spec.Packages
// there with apt and runs spec.Setup. internal with the end of the failing
// step's output, or ctx's error.
//
// The packages are apt's job, not debootstrap's --include: debootstrap's
// resolver takes no virtual packages or alternatives, and npm's
// dependencies need both.
func makeRootfs(ctx context.Context, spec Spec, dir string, r *reporter) error {
	deb, err := debootstrapPath()
	if err != nil {
		return canBootstrap()
	}
	log := &buildLog{r: r}
	r.report(Progress{Phase: PhaseBootstrap, Detail: "debootstrap " + spec.Suite + " from " + spec.Mirror})
	cmd := exec.Command(deb, "--variant="+variant, "--arch="+spec.Arch, "--components=main", spec.Suite, dir, spec.Mirror)
	if err := run(ctx, cmd, log.line); err != nil {
		return stepFailed(ctx, "debootstrap "+spec.Suite+" from "+spec.Mirror, err, log.errorTail())
	}
	log.finishPhase()
	if len(spec.Packages) > 0 {
		r.report(Progress{Phase: PhaseBootstrap, Detail: "apt-get install " + strings.Join(spec.Packages, " ")})
		if err := inChroot(ctx, dir, installScript(spec.Packages), log); err != nil {
			return stepFailed(ctx, "installing the packages", err, log.errorTail())
		}
		log.finishPhase()
	}
	if err := copyLocalCAs(localCADir, filepath.Join(dir, localCADir)); err != nil {
		return provider.Errorf(provider.Internal, "copy the host's local CA certificates into the image: %v", err)
	}
	r.report(Progress{Phase: PhaseSetup, Detail: "the setup script"})
	setup := &buildLog{r: &reporter{}}
	if err := inChroot(ctx, dir, spec.Setup, setup); err != nil {
		return stepFailed(ctx, "the setup script", err, setup.errorTail())
	}
	return nil
}

// installScript installs pkgs with apt, without their recommendations, and
// keeps package scripts from starting services meanwhile.
func installScript(pkgs []string) string {
	return `set -eu
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
apt-get update
apt-get install -y --no-install-recommends ` + strings.Join(pkgs, " ") + `
rm -f /usr/sbin/policy-rc.d
`
}

// inChroot runs script with /bin/sh chrooted into dir, with /proc mounted
// there for package scripts that read it.
func inChroot(ctx context.Context, dir, script string, log *buildLog) error {
	proc := filepath.Join(dir, "proc")
	if err := syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc in the root filesystem: %w", err)
	}
	defer func() { _ = syscall.Unmount(proc, syscall.MNT_DETACH) }()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	return run(ctx, cmd, log.line, func(a *syscall.SysProcAttr) { a.Chroot = dir })
}

// run runs cmd with a minimal environment, handing each line of its output
// to line, in a process group of its own that ctx's end kills whole (a
// killed debootstrap would leave dpkg running).
func run(ctx context.Context, cmd *exec.Cmd, line func(string), attrs ...func(*syscall.SysProcAttr)) error {
	cmd.Env = []string{"PATH=" + sbinPath, "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "HOME=/root"}
	for _, k := range proxyVars {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, a := range attrs {
		a(cmd.SysProcAttr)
	}
	out := &lineWriter{line: line}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	stop()
	out.flush()
	return err
}

// stepFailed is the error of a build step that failed with err: ctx's error
// when ctx ended, else internal quoting the step's last output.
func stepFailed(ctx context.Context, step string, err error, tail string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return provider.Errorf(provider.Internal, "building the base image: %s failed: %v; its last output:\n%s", step, err, tail)
}

// removeRootfs deletes dir after unmounting whatever a killed debootstrap
// left mounted in it (/proc, /sys): removing through a mount would reach
// the host's files.
func removeRootfs(dir string) {
	mounts := mountsUnder(dir)
	// Innermost first.
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if len(mountsUnder(dir)) > 0 {
		return // better a leftover directory than a removed host file
	}
	_ = os.RemoveAll(dir)
}

// mountsUnder lists the mount points below dir, from /proc/self/mountinfo.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	prefix := filepath.Clean(dir) + "/"
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a blank).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// localCADir is where Debian keeps the certificate authorities an
// administrator added (update-ca-certificates reads it).
const localCADir = "/usr/local/share/ca-certificates"

// copyLocalCAs copies the certificates under src (the host's local CAs) to
// dst in the image, so that the image trusts what the host trusts: a machine
// behind a TLS-inspecting proxy reaches package registries during the setup
// script, and its sandboxes reach them later, as its other programs do. A
// host without local CAs copies nothing. The setup script runs
// update-ca-certificates.
func copyLocalCAs(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == src {
			return nil
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".crt") {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
