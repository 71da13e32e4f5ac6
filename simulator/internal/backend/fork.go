package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
)

// forkRepo holds the images docker forks start from: each a commit of the
// source's container, removed with the fork.
const forkRepo = "sandplane-sim/fork"

// forkFrom gives a fork's workload, on its first start, a copy of its
// source's files (Workload.ForkOf): the native home directory, or, on
// docker, the source's container committed as the image the fork runs.
// Later starts keep the fork's own files.
func (b *runtimeBackend) forkFrom(ctx context.Context, w Workload, wl *workload) error {
	if w.ForkOf == "" {
		return nil
	}
	if b.ext != nil {
		return b.ext.fork(ctx, w.ForkOf, w.SandboxID)
	}
	home := filepath.Join(wl.dir, "home")
	if _, err := os.Lstat(home); err == nil {
		return nil // copied at an earlier start
	}
	b.mu.Lock()
	src := b.workloads[w.ForkOf]
	b.mu.Unlock()
	if src == nil {
		return fmt.Errorf("the fork's source %s has no files to copy: it was deleted before the fork started", w.ForkOf)
	}
	if err := os.MkdirAll(wl.dir, 0o700); err != nil {
		return fmt.Errorf("create the sandbox directory: %w", err)
	}
	// Copied beside, then renamed: a copy cut short is never taken for
	// the fork's home at its next start.
	tmp, err := os.MkdirTemp(wl.dir, ".fork-")
	if err != nil {
		return fmt.Errorf("copy the source's files: %w", err)
	}
	defer os.RemoveAll(tmp) // after the rename, a no-op
	if err := copyTree(filepath.Join(src.dir, "home"), tmp); err != nil {
		return fmt.Errorf("copy the files of sandbox %s: %w", w.ForkOf, err)
	}
	return os.Rename(tmp, home)
}

// copyTree copies the directory from into the existing directory to:
// directories, regular files and symbolic links (a volume's mount stays a
// link to the same volume), with their permission bits. Sockets, pipes
// and devices, which a running sandbox's processes own, are left out. A
// file that vanishes while it is copied (a running source) is skipped.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil || rel == "." {
			return err
		}
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return copyEntry(p, dst, info)
	})
}

// copyEntry copies one entry of copyTree.
func copyEntry(src, dst string, info fs.FileInfo) error {
	switch mode := info.Mode(); {
	case mode.IsDir():
		return os.Mkdir(dst, mode.Perm()|0o700)
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case mode.IsRegular():
		return copyFile(src, dst, mode.Perm())
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fork commits the container of srcID, running or stopped, as the image
// that the container of dstID is made from, once: the commit pauses a
// running source for its length, so that its files are copied as they
// stood, and lets it run on.
func (e *dockerExt) fork(ctx context.Context, srcID, dstID string) error {
	if e.forkImage(dstID) != "" {
		return nil
	}
	ref := forkRepo + ":" + e.tagOf(dstID)
	_, err := e.cli.ContainerCommit(ctx, e.containerName(srcID), container.CommitOptions{
		Reference: ref,
		Pause:     true,
		Config:    &container.Config{Labels: map[string]string{LabelSim: "fork"}},
	})
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("the fork's source %s has no container to copy: it was deleted before the fork started", srcID)
	}
	if err != nil {
		return fmt.Errorf("commit the container of sandbox %s: %w", srcID, err)
	}
	e.mu.Lock()
	e.forks[dstID] = ref
	e.images[ref] = true
	e.mu.Unlock()
	return nil
}

// forkImage is the image a fork's container is made from, "" for a
// sandbox that is no fork.
func (e *dockerExt) forkImage(sandboxID string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.forks[sandboxID]
}

// dropFork removes the image a removed fork was made from: its container,
// which held it, is gone.
func (e *dockerExt) dropFork(ctx context.Context, sandboxID string) {
	ref := e.forkImage(sandboxID)
	if ref == "" {
		return
	}
	_, err := e.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		e.b.cfg.Logger.Warn("remove the image a fork was made from", "image", ref, "err", err)
		return
	}
	e.mu.Lock()
	delete(e.forks, sandboxID)
	delete(e.images, ref)
	e.mu.Unlock()
}
