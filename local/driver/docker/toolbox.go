package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"log/slog"
	"os"
	goruntime "runtime"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandplane/sandplane/internal/baseimage"
	"github.com/sandplane/sandplane/provider"
)

// labelToolboxBinary marks a toolbox image sandplane built itself with the
// sha256 of the binary inside, so that a newer binary replaces it and an
// image the user built under the same tag is never touched.
const labelToolboxBinary = "io.sandplane.toolbox.binary"

// toolboxHome is where the toolbox starts, and HOME: the working directory
// of a Daytona sandbox.
const toolboxHome = "/home/daytona"

// UseToolboxImage makes tag the image of the default snapshot: the first
// create that needs it builds it with EnsureToolboxImage, not this call, so
// that a daemon starts at once with or without an engine, and one that only
// runs native sandboxes never puts an image on the engine. server, when
// not empty, is the path of sandplane-toolbox of this build, already
// checked (toolboxcmd.Workload), which the image then runs.
func (d *Driver) UseToolboxImage(tag, server string, log *slog.Logger) {
	d.SetImageSource(tag, func(ctx context.Context) error { return d.EnsureToolboxImage(ctx, tag, server, log) })
}

// EnsureToolboxImage makes tag, the default snapshot's image on the docker
// runtime, present and current: when the engine lacks it, or holds one that
// an older sandplane built, it builds it from the running binary (entrypoint
// `sandplane toolbox` on 0.0.0.0:$PORT, or server, sandplane-toolbox of
// the same build, when given and the base is not scratch). Its base is
// sandplane's Debian image (internal/baseimage: bash, python3, node, git,
// curl, the language servers; built with debootstrap once per engine, minutes the first time,
// with progress in the log, or ahead of time by `sandplane image build`).
// Where that cannot be built (not root, no debootstrap), it falls back to a
// FROM scratch image with a static busybox as /bin/sh, and says so. An image
// under tag that sandplane did not build is left alone. It needs no registry.
//
// unavailable: no engine answers. preflight_failed: the image cannot be built
// here (a dynamically linked binary, an engine of another platform), logged
// as a warning naming the fix. internal: the base image's build failed.
func (d *Driver) EnsureToolboxImage(ctx context.Context, tag, server string, log *slog.Logger) error {
	self, err := os.Executable()
	if err != nil {
		return provider.Errorf(provider.PreflightFailed, "find the running sandplane binary: %v", err)
	}
	return d.ensureToolboxImageFrom(ctx, tag, self, server, log)
}

// ensureToolboxImageFrom is EnsureToolboxImage with the binary at self.
func (d *Driver) ensureToolboxImageFrom(ctx context.Context, tag, self, server string, log *slog.Logger) error {
	labels, err := d.ImageLabels(ctx, tag)
	switch {
	case err == nil && labels[labelToolboxBinary] == "":
		log.Debug("docker toolbox image was not built by sandplane; using it as it is", "image", tag)
		return nil
	case err != nil && !provider.IsNotFound(err):
		return err
	}
	digest, err := fileDigest(self)
	if err != nil {
		return provider.Errorf(provider.PreflightFailed, "read the running sandplane binary: %v", err)
	}
	if d.toolboxBase == ScratchBase {
		return d.buildScratchToolbox(ctx, tag, self, digest, labels, log)
	}
	base, err := d.toolboxBaseImage(ctx, log)
	switch {
	case provider.Code(err) == provider.PreflightFailed && d.toolboxBase == "":
		log.Warn("cannot build the Debian base of the docker toolbox image; falling back to busybox", "err", provider.Message(err))
		return d.buildScratchToolbox(ctx, tag, self, digest, labels, log)
	case err != nil:
		return err
	}
	if server != "" {
		// Only here: the Debian base has the C library that a
		// sandplane-toolbox built with cgo needs, which a scratch image
		// lacks, and the scratch image is the fallback of machines that
		// cannot build that base anyway.
		sum, err := fileDigest(server)
		if err != nil {
			return provider.Errorf(provider.PreflightFailed, "read %s: %v", server, err)
		}
		digest += "+server:" + sum
	}
	digest += "+" + base // a new base image is a reason to rebuild
	if labels[labelToolboxBinary] == digest {
		return nil
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		return provider.Errorf(provider.PreflightFailed, "read the running sandplane binary: %v", err)
	}
	var serverBin []byte
	if server != "" {
		if serverBin, err = os.ReadFile(server); err != nil {
			return provider.Errorf(provider.PreflightFailed, "read %s: %v", server, err)
		}
	}
	return baseimage.LayerToolbox(ctx, d.api(ctx), baseimage.Toolbox{
		Base: base, Binary: bin, Server: serverBin, Tag: tag,
		Labels: map[string]string{labelToolboxBinary: digest},
	})
}

// toolboxBaseImage returns the image the toolbox is layered on: the one
// WithToolboxBase named, which must be on the engine, or sandplane's Debian
// image, built when missing.
func (d *Driver) toolboxBaseImage(ctx context.Context, log *slog.Logger) (string, error) {
	if d.toolboxBase != "" {
		if _, err := d.api(ctx).ImageInspect(ctx, d.toolboxBase); err != nil {
			if cerrdefs.IsNotFound(err) {
				return "", provider.Errorf(provider.PreflightFailed, "the toolbox's base image %s is not on the docker engine: docker pull %s, or leave the base unset for sandplane's own", d.toolboxBase, d.toolboxBase)
			}
			return "", d.classify("inspect image "+d.toolboxBase, err)
		}
		return d.toolboxBase, nil
	}
	return baseimage.Ensure(ctx, d.api(ctx), baseimage.Options{Clock: d.clk, Progress: func(p baseimage.Progress) {
		log.Info("docker default image (built once per engine): " + p.String())
	}})
}

// buildScratchToolbox builds tag FROM scratch out of the binary at self and a
// static busybox as /bin/sh when the host has one: the fallback where the
// Debian base cannot be built.
func (d *Driver) buildScratchToolbox(ctx context.Context, tag, self, digest string, labels map[string]string, log *slog.Logger) error {
	sh, hasShell := StaticBusybox()
	if hasShell {
		// A busybox installed since the last build is a reason to rebuild.
		digest += "+busybox"
	}
	if labels[labelToolboxBinary] == digest {
		return nil
	}
	if err := d.canRunInScratch(ctx, self); err != nil {
		log.Warn("cannot build the docker toolbox image", "image", tag, "err", provider.Message(err))
		return err
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		return provider.Errorf(provider.PreflightFailed, "read the running sandplane binary: %v", err)
	}
	img := ScratchImage{
		Files:      map[string][]byte{"sandplane": bin},
		Dirs:       map[string]fs.FileMode{"tmp": fs.ModeSticky | 0o777, toolboxHome[1:]: 0o755},
		Entrypoint: []string{"/sandplane", "toolbox", "--host", "0.0.0.0"},
		Env:        map[string]string{"HOME": toolboxHome},
		WorkDir:    toolboxHome,
		Labels:     map[string]string{labelToolboxBinary: digest},
	}
	shell := "with busybox as /bin/sh"
	if hasShell {
		img.Files["bin/sh"] = sh
	} else {
		shell = "without a shell: process/execute fails inside docker sandboxes until a static busybox is on PATH (apt-get install busybox-static) and sandplane serve restarts"
		log.Warn("building the docker toolbox image " + shell)
	}
	log.Info("building the docker toolbox image from this binary", "image", tag)
	if err := d.BuildImage(ctx, tag, img); err != nil {
		log.Warn("building the docker toolbox image failed", "image", tag, "err", err)
		return err
	}
	log.Info("built the docker toolbox image "+shell, "image", tag)
	return nil
}

// canRunInScratch fails unless the binary at self runs in a FROM scratch
// image on d's engine.
func (d *Driver) canRunInScratch(ctx context.Context, self string) error {
	static, err := StaticExecutable(self)
	if err != nil {
		return provider.Errorf(provider.PreflightFailed, "inspect the running sandplane binary %s: %v", self, err)
	}
	if !static {
		return provider.Errorf(provider.PreflightFailed,
			"the running sandplane binary %s is dynamically linked, so it cannot run in a FROM scratch image: build it static with make build (CGO_ENABLED=0), or build the image yourself", self)
	}
	goos, goarch, err := d.Platform(ctx)
	if err != nil {
		return err
	}
	if goos != goruntime.GOOS || goarch != goruntime.GOARCH {
		return provider.Errorf(provider.PreflightFailed,
			"the docker engine runs %s/%s but this sandplane binary is %s/%s: build the image yourself (GOOS=%s GOARCH=%s make build)",
			goos, goarch, goruntime.GOOS, goruntime.GOARCH, goos, goarch)
	}
	return nil
}

func fileDigest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
