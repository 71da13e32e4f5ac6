package backend

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sandplane/sandplane/local/driver"
)

// The capabilities of the runtime backend beyond Backend, by runtime: the
// native one maps volumes onto host directories; the docker one (with
// RuntimeConfig.Docker) adds snapshot images, engine volumes,
// network settings, links and resize (docker.go).

// nativeBackend is the runtime backend on native processes.
type nativeBackend struct{ *runtimeBackend }

var _ VolumeBackend = nativeBackend{}

// withCapabilities wraps b in the type whose methods say what its runtime
// can do beyond running workloads.
func (b *runtimeBackend) withCapabilities() Backend {
	if b.cfg.Docker != nil {
		return newDockerBackend(b)
	}
	if b.native() {
		return nativeBackend{b}
	}
	return b
}

// prepare adds to spec what the workload asks beyond the runtime's
// defaults, before the runtime starts it. home is the native sandbox's
// home directory.
func (b *runtimeBackend) prepare(ctx context.Context, spec *driver.Spec, w Workload, home string) error {
	if b.native() {
		return b.linkNativeVolumes(w, home)
	}
	if b.ext != nil {
		return b.ext.prepare(ctx, spec, w)
	}
	return nil
}

// entrypoint is what w's toolbox runs as its entrypoint session: the
// snapshot's own, else its image's (docker), else DefaultEntrypoint.
func (b *runtimeBackend) entrypoint(ctx context.Context, w Workload) ([]string, error) {
	if len(w.Entrypoint) > 0 {
		return w.Entrypoint, nil
	}
	if b.ext != nil && w.Image != "" {
		ep, err := b.ext.imageEntrypoint(ctx, w.Image)
		if err != nil || len(ep) > 0 {
			return ep, err
		}
	}
	return DefaultEntrypoint, nil
}

// started applies, once the toolbox answers, what can only be set on a
// running workload (docker networks and limits).
func (b *runtimeBackend) started(ctx context.Context, w Workload, h driver.Handle) error {
	if b.ext != nil {
		return b.ext.started(ctx, w, h)
	}
	return nil
}

// removed releases what a sandbox's workload had beyond its container or
// process (docker: the network of its links).
func (b *runtimeBackend) removed(ctx context.Context, sandboxID string) {
	if b.ext != nil {
		b.ext.removed(ctx, sandboxID)
	}
}

// volumeDir is where the native backend keeps a volume's files.
func (b *runtimeBackend) volumeDir(volumeID string) string {
	return filepath.Join(b.cfg.Root, "volumes", volumeID)
}

func (n nativeBackend) CreateVolume(_ context.Context, volumeID string) error {
	if err := os.MkdirAll(n.volumeDir(volumeID), 0o700); err != nil {
		return fmt.Errorf("create the volume's directory: %w", err)
	}
	return nil
}

func (n nativeBackend) RemoveVolume(_ context.Context, volumeID string) error {
	return os.RemoveAll(n.volumeDir(volumeID))
}

// NativeHome is the Daytona home that a native sandbox's own home
// directory stands for in mount paths.
const NativeHome = "/home/daytona"

func (n nativeBackend) VolumeMountNote() string {
	if n.bindsHome() {
		return "native sandboxes see host paths but their home at " + NativeHome + ": a volume mounted at " + NativeHome + "/X is there, and one at any other /P is $HOME/P (a link to the volume's directory)"
	}
	return "native sandboxes see host paths: a volume mounted at " + NativeHome + "/X is $HOME/X of the sandbox, and one at any other /P is $HOME/P (a link to the volume's directory)"
}

// nativeMountPath is where mountPath shows up in a native sandbox whose
// home directory is home: under the home, as VolumeMountNote says.
func nativeMountPath(home, mountPath string) string {
	rel := strings.TrimPrefix(mountPath, NativeHome+"/")
	if rel == mountPath {
		rel = strings.TrimPrefix(mountPath, "/")
	}
	return filepath.Join(home, filepath.FromSlash(path.Clean(rel)))
}

// linkNativeVolumes makes each mount a symbolic link in the sandbox's home
// to the volume's directory (or its subpath), so that sandboxes mounting
// one volume share its files and the files outlive them.
func (b *runtimeBackend) linkNativeVolumes(w Workload, home string) error {
	for _, m := range w.Volumes {
		target := b.volumeDir(m.VolumeID)
		if m.Subpath != "" {
			target = filepath.Join(target, filepath.FromSlash(path.Clean(m.Subpath)))
		}
		if err := os.MkdirAll(target, 0o700); err != nil {
			return fmt.Errorf("volume %s: %w", m.VolumeID, err)
		}
		link := nativeMountPath(home, m.MountPath)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		if fi, err := os.Lstat(link); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			return fmt.Errorf("volume %s: %s exists in the sandbox and is not a mount", m.VolumeID, m.MountPath)
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
			return fmt.Errorf("volume %s: %w", m.VolumeID, err)
		}
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("volume %s: mount at %s: %w", m.VolumeID, m.MountPath, err)
		}
	}
	return nil
}
