package baseimage

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/docker/docker/api/types/image"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Options say what to build and how to tell about it. The zero value builds
// the host's default.
type Options struct {
	// Spec is what to build; its zero fields are filled (Spec.Fill).
	Spec Spec
	// Progress, when set, is called with each step, never concurrently.
	Progress func(Progress)
	// Clock paces the wait for another build's lock; clock.Real() when nil.
	Clock clock.Clock
	// TempDir holds the root filesystem while it is built (it must allow
	// device nodes and executables) and the build locks; os.TempDir() when
	// empty.
	TempDir string

	// build makes and imports the image; tests replace it with a fake.
	build func(ctx context.Context, e Engine, spec Spec, hash, tmp string, r *reporter) error
}

// prepared is Options checked and filled.
type prepared struct {
	spec Spec
	hash string
	tmp  string
	clk  clock.Clock
	r    *reporter
	run  func(ctx context.Context, e Engine, spec Spec, hash, tmp string, r *reporter) error
}

func (o Options) prepare() (prepared, error) {
	p := prepared{spec: o.Spec.Fill(), tmp: o.TempDir, clk: o.Clock, r: newReporter(o.Progress), run: o.build}
	if err := p.spec.Validate(); err != nil {
		return prepared{}, err
	}
	p.hash = p.spec.Hash()
	if p.tmp == "" {
		p.tmp = os.TempDir()
	}
	if p.clk == nil {
		p.clk = clock.Real()
	}
	if p.run == nil {
		p.run = buildImage
	}
	return p, nil
}

// Ensure returns the tag of the base image opts describe, building it first
// when the engine has none with its hash. While it builds it holds a lock
// keyed by the hash, and a caller that waited for the lock uses what the
// holder built. invalid_argument (a bad Spec), preflight_failed (cannot
// build here: not root, no debootstrap, an engine of another platform),
// unavailable (no engine), internal (the build failed; the message quotes
// its output), or ctx's error.
func Ensure(ctx context.Context, e Engine, opts Options) (ref string, err error) {
	p, err := opts.prepare()
	if err != nil {
		return "", err
	}
	if ref, ok, err := Find(ctx, e, p.hash); err != nil || ok {
		if ok {
			p.r.report(Progress{Phase: PhaseCached, Detail: ref})
		}
		return ref, err
	}
	unlock, err := p.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if ref, ok, err := Find(ctx, e, p.hash); err != nil || ok {
		if ok {
			p.r.report(Progress{Phase: PhaseCached, Detail: ref + " (built meanwhile by another process)"})
		}
		return ref, err
	}
	return p.build(ctx, e)
}

// Build builds the base image opts describe even when the engine has one
// with its hash, which it replaces under the tag, and returns its tag. It
// holds the same lock as Ensure. The errors are Ensure's.
func Build(ctx context.Context, e Engine, opts Options) (ref string, err error) {
	p, err := opts.prepare()
	if err != nil {
		return "", err
	}
	unlock, err := p.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	return p.build(ctx, e)
}

func (p prepared) lock(ctx context.Context) (func(), error) {
	path := lockPath(p.tmp, p.hash)
	return lockFile(ctx, p.clk, path, func() {
		p.r.report(Progress{Phase: PhaseWaiting, Detail: "another process builds this image (lock " + path + ")"})
	})
}

func (p prepared) build(ctx context.Context, e Engine) (string, error) {
	if err := p.run(ctx, e, p.spec, p.hash, p.tmp, p.r); err != nil {
		return "", err
	}
	ref := Tag(p.hash)
	p.r.report(Progress{Phase: PhaseDone, Detail: ref})
	return ref, nil
}

// buildImage is the real build: preflight, a root filesystem in a temporary
// directory under tmp, its import, the directory's removal.
func buildImage(ctx context.Context, e Engine, spec Spec, hash, tmp string, r *reporter) error {
	if err := preflight(ctx, e, spec); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(tmp, "sandplane-base-")
	if err != nil {
		return provider.Errorf(provider.PreflightFailed, "make a directory for the root filesystem: %v: set TMPDIR to a directory with room for about 1 GiB", err)
	}
	defer removeRootfs(dir)
	if err := makeRootfs(ctx, spec, dir, r); err != nil {
		return err
	}
	return importRootfs(ctx, e, spec, hash, dir, r)
}

// preflight fails with preflight_failed, naming the fix, when this process
// cannot build spec for e.
func preflight(ctx context.Context, e Engine, spec Spec) error {
	if err := canBootstrap(); err != nil {
		return err
	}
	v, err := e.ServerVersion(ctx)
	if err != nil {
		return classify("ask the docker engine for its platform", err)
	}
	if v.Os != "linux" || DebianArch(v.Arch) != spec.Arch {
		return provider.Errorf(provider.PreflightFailed,
			"the docker engine runs %s/%s but the base image would be linux/%s: build it on a machine of the engine's platform, or name another image in the snapshot",
			v.Os, v.Arch, spec.Arch)
	}
	return nil
}

// importEvery is how many bytes of the import go by between two reports.
const importEvery = 64 << 20

// importRootfs streams dir as a tar into the engine's image import, as
// Tag(hash) labelled with hash. The engine tags the image only once the
// whole stream arrived, so an interrupted import leaves no image behind.
func importRootfs(ctx context.Context, e Engine, spec Spec, hash, dir string, r *reporter) error {
	pr, pw := io.Pipe()
	tarDone := make(chan error, 1)
	go func() {
		cw := &countingWriter{w: pw, every: importEvery, report: func(n int64) { r.report(Progress{Phase: PhaseImport, Bytes: n}) }}
		err := writeTar(cw, dir)
		if err == nil {
			r.report(Progress{Phase: PhaseImport, Bytes: cw.n, Detail: "root filesystem sent"})
		}
		pw.CloseWithError(err)
		tarDone <- err
	}()
	err := runImport(ctx, e, pr, spec, hash)
	// Should the engine stop reading early, this ends the writer's wait.
	pr.CloseWithError(io.ErrClosedPipe)
	if tarErr := <-tarDone; tarErr != nil && tarErr != io.ErrClosedPipe {
		return provider.Errorf(provider.Internal, "tar the root filesystem %s: %v", dir, tarErr)
	}
	return err
}

func runImport(ctx context.Context, e Engine, src io.Reader, spec Spec, hash string) error {
	changes := []string{
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV LANG=C.UTF-8",
		fmt.Sprintf("LABEL %s=%q %s=%q", LabelHash, hash, LabelSuite, spec.Suite),
		`CMD ["/bin/bash"]`,
	}
	tag := Tag(hash)
	resp, err := e.ImageImport(ctx, image.ImportSource{Source: src, SourceName: "-"}, tag, image.ImportOptions{Changes: changes})
	if err != nil {
		return classify("import the base image "+tag, err)
	}
	defer resp.Close()
	if err := readMessages(resp, func(string) {}); err != nil {
		return classify("import the base image "+tag, err)
	}
	return nil
}

// countingWriter counts what goes through it and reports every so often.
type countingWriter struct {
	w      io.Writer
	n      int64
	every  int64
	report func(n int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	before := c.n
	c.n += int64(n)
	if c.n/c.every != before/c.every {
		c.report(c.n)
	}
	return n, err
}
