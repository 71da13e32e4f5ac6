package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/sandplane/sandplane/provider"
)

// buildTimeout bounds one run of an image source, so that a create waiting
// for the image cannot wait forever on a stuck engine. It is long because the
// default image's first build downloads a Debian system (several minutes on
// a slow mirror; `sandplane image build` does it ahead of time).
const buildTimeout = 20 * time.Minute

// ScratchImage is an image made FROM scratch out of files the caller
// supplies: one layer and its configuration, no base image, so making it
// never pulls.
type ScratchImage struct {
	// Files maps a path inside the image to its content. Every file is
	// executable; parent directories are made 0755.
	Files map[string][]byte
	// Dirs are directories to make besides the parents of Files, with
	// their mode (fs.ModeSticky|0o777 for a /tmp).
	Dirs map[string]fs.FileMode
	// Entrypoint is the image's ENTRYPOINT. Required.
	Entrypoint []string
	// Env, WorkDir and Labels become the image's ENV, WORKDIR and LABEL.
	// Names and values may not contain quotes, backslashes, '$' or line
	// breaks.
	Env     map[string]string
	WorkDir string
	Labels  map[string]string
}

// BuildScratchImage makes img on the engine behind cli and tags it tag. It
// imports the files as one layer instead of running a build, so the engine
// never holds half an image: an interrupted call leaves nothing behind.
func BuildScratchImage(ctx context.Context, cli *client.Client, tag string, img ScratchImage) error {
	changes, err := img.changes()
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	layer, err := img.layer()
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	resp, err := cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(layer), SourceName: "-"}, tag, image.ImportOptions{Changes: changes})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Close()
	var out bytes.Buffer
	if err := jsonmessage.DisplayJSONMessagesStream(resp, &out, 0, false, nil); err != nil {
		return fmt.Errorf("build image %s: %w\n%s", tag, err, out.String())
	}
	return nil
}

// layer is the image's filesystem as a tar stream.
func (img ScratchImage) layer() ([]byte, error) {
	dirs := map[string]int64{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
	}
	for name, mode := range img.Dirs {
		clean, err := imagePath(name)
		if err != nil {
			return nil, err
		}
		m := int64(mode.Perm())
		if mode&fs.ModeSticky != 0 {
			m |= 0o1000
		}
		dirs[clean] = m
	}
	for d := range dirs {
		addParents(d)
	}
	files := make(map[string][]byte, len(img.Files))
	for name, data := range img.Files {
		clean, err := imagePath(name)
		if err != nil {
			return nil, err
		}
		if _, dup := files[clean]; dup {
			return nil, fmt.Errorf("file %q is named twice", clean)
		}
		files[clean] = data
		addParents(clean)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the layer byte-identical between runs, so the
	// engine stores it once.
	mtime := time.Unix(0, 0)
	write := func(hdr *tar.Header, data []byte) error {
		hdr.ModTime = mtime
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	// Parents sort before their children, so the engine's extractor never
	// has to guess a directory's mode.
	for _, d := range sortedKeys(dirs) {
		if err := write(&tar.Header{Name: d + "/", Mode: dirs[d], Typeflag: tar.TypeDir}, nil); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(files) {
		data := files[name]
		if err := write(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// changes are the image's configuration, as Dockerfile instructions.
func (img ScratchImage) changes() ([]string, error) {
	if len(img.Entrypoint) == 0 {
		return nil, fmt.Errorf("an entrypoint is required")
	}
	ep, err := json.Marshal(img.Entrypoint)
	if err != nil {
		return nil, err
	}
	var changes []string
	pairs := func(instr string, m map[string]string) error {
		for _, k := range sortedKeys(m) {
			v := m[k]
			if k == "" || strings.ContainsAny(k, "= \t") || !plainValue(k) || !plainValue(v) {
				return fmt.Errorf("%s %q: names and values may not contain '=', blanks, quotes, backslashes, '$' or line breaks", instr, k)
			}
			changes = append(changes, fmt.Sprintf("%s %s=\"%s\"", instr, k, v))
		}
		return nil
	}
	if err := pairs("ENV", img.Env); err != nil {
		return nil, err
	}
	if err := pairs("LABEL", img.Labels); err != nil {
		return nil, err
	}
	if img.WorkDir != "" {
		if !path.IsAbs(img.WorkDir) || !plainValue(img.WorkDir) || strings.ContainsAny(img.WorkDir, " \t") {
			return nil, fmt.Errorf("workdir %q must be an absolute path without blanks, quotes, backslashes or '$'", img.WorkDir)
		}
		changes = append(changes, "WORKDIR "+img.WorkDir)
	}
	return append(changes, "ENTRYPOINT "+string(ep)), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// plainValue reports whether s needs no escaping in a Dockerfile.
func plainValue(s string) bool { return !strings.ContainsAny(s, "\"'\\$\r\n") }

// imagePath cleans name, a path inside the image, to the form tar wants
// (relative, no dots).
func imagePath(name string) (string, error) {
	clean := path.Clean("/" + name)
	if clean == "/" || clean != "/"+strings.TrimPrefix(name, "/") {
		return "", fmt.Errorf("path %q must be a clean path inside the image", name)
	}
	return strings.TrimPrefix(clean, "/"), nil
}

// StaticExecutable reports whether the ELF file at p runs without a dynamic
// loader, so that it also runs in a FROM scratch image.
func StaticExecutable(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// StaticBusybox returns the statically linked busybox on PATH, which can
// serve as /bin/sh in a FROM scratch image. ok is false when there is none
// or only a dynamically linked one (it would not run without the host's
// libc).
func StaticBusybox() (data []byte, ok bool) {
	p, err := exec.LookPath("busybox")
	if err != nil {
		return nil, false
	}
	if static, err := StaticExecutable(p); err != nil || !static {
		return nil, false
	}
	data, err = os.ReadFile(p)
	return data, err == nil
}

// BuildImage builds img as tag on the runtime's engine. The image tag named
// before, if any, is removed unless a container still uses it.
// unavailable, internal.
func (r *Driver) BuildImage(ctx context.Context, tag string, img ScratchImage) error {
	old, err := r.api(ctx).ImageInspect(ctx, tag)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.classify("inspect image "+tag, err)
	}
	if err := BuildScratchImage(ctx, r.api(ctx), tag, img); err != nil {
		return r.classify("build", err)
	}
	if old.ID != "" {
		// Best effort: a container of an older sandbox may still use it, and
		// then the engine refuses, which is what we want.
		_, _ = r.api(ctx).ImageRemove(ctx, old.ID, image.RemoveOptions{PruneChildren: true})
	}
	return nil
}

// ImageLabels returns the labels of image ref. not_found, unavailable.
func (r *Driver) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	img, err := r.api(ctx).ImageInspect(ctx, ref)
	if err != nil {
		return nil, r.classify("inspect image "+ref, err)
	}
	labels := map[string]string{}
	if img.Config != nil {
		for k, v := range img.Config.Labels {
			labels[k] = v
		}
	}
	return labels, nil
}

// Platform returns the engine's operating system and architecture, as
// GOOS and GOARCH name them. unavailable.
func (r *Driver) Platform(ctx context.Context) (goos, goarch string, err error) {
	v, err := r.api(ctx).ServerVersion(ctx)
	if err != nil {
		return "", "", r.classify("ask the engine for its platform", err)
	}
	return v.Os, v.Arch, nil
}

// ImageSource makes an image the engine lacks, or refreshes one it made
// before. It must be safe to run again once it has succeeded.
type ImageSource func(ctx context.Context) error

type imageSource struct {
	sync ImageSource
	// lock is held while sync runs, so that concurrent creates build once.
	lock chan struct{}
	// ran is set once a run ended (not by a cancelled caller): from then on
	// a present image is used without asking the source again.
	ran atomic.Bool
}

// SetImageSource registers src for image ref. Preflight of ref runs it
// before the first create that uses ref, so that it can make a missing image
// or refresh a stale one, and again whenever ref is missing; otherwise the
// image on the engine is used as it is. SyncImage runs it on demand. At most
// one run per ref is in flight; the others wait for it.
func (r *Driver) SetImageSource(ref string, src ImageSource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sources == nil {
		r.sources = map[string]*imageSource{}
	}
	r.sources[ref] = &imageSource{sync: src, lock: make(chan struct{}, 1)}
}

func (r *Driver) source(ref string) *imageSource {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sources[ref]
}

// SyncImage runs ref's image source, waiting for a run already in flight
// first. not_found when ref has no source; otherwise what the source
// returns, or ctx's error.
func (r *Driver) SyncImage(ctx context.Context, ref string) error {
	s := r.source(ref)
	if s == nil {
		return provider.Errorf(provider.NotFound, "image %q has no source", ref)
	}
	return r.runSource(ctx, ref, s, false)
}

// runSource runs s, the source of ref. When ifNeeded, it does not if, once
// the lock is held, s has run and ref is present: a create that waited for
// another's build uses its result.
func (r *Driver) runSource(ctx context.Context, ref string, s *imageSource, ifNeeded bool) error {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.lock }()
	if ifNeeded && s.ran.Load() {
		_, err := r.api(ctx).ImageInspect(ctx, ref)
		if err == nil {
			return nil
		}
		if !cerrdefs.IsNotFound(err) {
			return r.classify("inspect image "+ref, err)
		}
	}
	sctx, cancel := r.withTimeout(ctx, buildTimeout)
	defer cancel()
	err := s.sync(sctx)
	if ctx.Err() == nil {
		s.ran.Store(true)
	}
	return err
}

// ensureImage fails unless image ref is on the engine, running its source
// first when SetImageSource says so. preflight_failed naming the image,
// unavailable.
func (r *Driver) ensureImage(ctx context.Context, ref string) error {
	s := r.source(ref)
	_, err := r.api(ctx).ImageInspect(ctx, ref)
	switch {
	case err != nil && !cerrdefs.IsNotFound(err):
		return as(provider.PreflightFailed, r.classify("inspect image "+ref, err))
	case s == nil && err != nil:
		return r.missingImage(ref, err)
	case s == nil || err == nil && s.ran.Load():
		return nil
	}
	buildErr := r.runSource(ctx, ref, s, true)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_, err = r.api(ctx).ImageInspect(ctx, ref)
	switch {
	case err == nil:
		// A source that failed to refresh a present image leaves it usable.
		return nil
	case !cerrdefs.IsNotFound(err):
		return as(provider.PreflightFailed, r.classify("inspect image "+ref, err))
	case buildErr == nil:
		return r.missingImage(ref, err)
	case provider.Code(buildErr) == provider.Unavailable:
		return buildErr
	}
	return provider.Errorf(provider.PreflightFailed, "image %q is not on the docker engine at %s and sandplane could not build it: %s",
		ref, r.host(), provider.Message(buildErr))
}
