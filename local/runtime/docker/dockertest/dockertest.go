package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/sandplane/sandplane/provider/clock"
)

// Label marks every image BuildImage makes, so that leftovers of an
// interrupted test run can be found with
// `docker images --filter label=io.sandplane.dockertest`.
const Label = "io.sandplane.dockertest"

// NoEngineMessage is why a test was skipped when no engine answers.
const NoEngineMessage = "no Docker engine answers: install docker.io and start dockerd (make test does this in CI)"

// NoBusyboxMessage is why a test that needs a shell in the image was skipped.
const NoBusyboxMessage = "no statically linked busybox on this machine: install busybox-static (apt-get install -y busybox-static) to run the tests that need a shell"

// pingTimeout bounds how long Engine waits for an answer before skipping.
const pingTimeout = 5 * time.Second

// Engine returns a client of the engine that DOCKER_HOST names (the default
// socket when unset), negotiating the API version. It skips t when the engine
// does not answer, and closes the client when t ends.
func Engine(t testing.TB) *client.Client {
	t.Helper()
	cli, err := NewClient()
	if err != nil {
		t.Skipf("%s (%v)", NoEngineMessage, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	if err := Ping(context.Background(), cli); err != nil {
		t.Skipf("%s (%v)", NoEngineMessage, err)
	}
	return cli
}

// NewClient returns a client configured from the environment, as the runtime
// configures its own. It does not contact the engine.
func NewClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// Ping reports whether the engine behind cli answers within a few seconds.
func Ping(ctx context.Context, cli *client.Client) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := clock.Real().AfterFunc(pingTimeout, cancel)
	defer t.Stop()
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("docker engine at %s: %w", cli.DaemonHost(), err)
	}
	return nil
}

// BuildImage builds tag FROM scratch containing files (path inside the image
// to content; every file is executable) with entrypoint as its ENTRYPOINT.
// It never pulls: scratch needs no base image.
func BuildImage(ctx context.Context, cli *client.Client, tag string, files map[string][]byte, entrypoint []string) error {
	if len(entrypoint) == 0 {
		return fmt.Errorf("build image %s: an entrypoint is required", tag)
	}
	buildCtx, err := contextTar(files, entrypoint)
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), build.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{Label: "true"},
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, &out, 0, false, nil); err != nil {
		return fmt.Errorf("build image %s: %w\n%s", tag, err, out.String())
	}
	return nil
}

// contextTar is the build context: a Dockerfile and the files under rootfs/.
func contextTar(files map[string][]byte, entrypoint []string) ([]byte, error) {
	ep, err := json.Marshal(entrypoint)
	if err != nil {
		return nil, err
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY rootfs/ /\nENTRYPOINT %s\n", ep)

	names := make([]string, 0, len(files))
	for name := range files {
		clean := path.Clean("/" + name)
		if clean == "/" || clean != "/"+strings.TrimPrefix(name, "/") {
			return nil, fmt.Errorf("file name %q must be a clean path inside the image", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the context byte-identical between runs, so the
	// engine's build cache can reuse layers.
	mtime := time.Unix(0, 0)
	write := func(hdr *tar.Header, data []byte) error {
		hdr.ModTime = mtime
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := write(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), Typeflag: tar.TypeReg}, []byte(dockerfile)); err != nil {
		return nil, err
	}
	// Parent directories go first, so the engine's extractor never guesses
	// their mode.
	dirs := map[string]bool{}
	for _, name := range names {
		for d := path.Dir(strings.TrimPrefix(name, "/")); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	sortedDirs := make([]string, 0, len(dirs))
	for d := range dirs {
		sortedDirs = append(sortedDirs, d)
	}
	sort.Strings(sortedDirs)
	for _, d := range sortedDirs {
		if err := write(&tar.Header{Name: "rootfs/" + d + "/", Mode: 0o755, Typeflag: tar.TypeDir}, nil); err != nil {
			return nil, err
		}
	}
	for _, name := range names {
		data := files[name]
		hdr := &tar.Header{Name: "rootfs/" + strings.TrimPrefix(name, "/"), Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if err := write(hdr, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// RemoveImage removes tag and the untagged layers only it used. A missing
// image is not an error.
func RemoveImage(ctx context.Context, cli *client.Client, tag string) error {
	_, err := cli.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", tag, err)
	}
	return nil
}

// BuildStaticGo compiles the Go package pkg (an import path, or a directory
// relative to the current one) with CGO disabled, for the engine's OS and
// architecture, and returns the binary. The result runs in a FROM scratch
// image.
func BuildStaticGo(ctx context.Context, cli *client.Client, pkg string) ([]byte, error) {
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask the engine for its platform: %w", err)
	}
	dir, err := os.MkdirTemp("", "dockertest-go-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+v.Os, "GOARCH="+v.Arch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return os.ReadFile(out)
}

// StaticBusybox returns a statically linked busybox installed on this
// machine, which can serve as /bin/sh in a FROM scratch image. ok is false
// when there is none, or only a dynamically linked one (it would not run
// without the host's libc).
func StaticBusybox() (data []byte, ok bool) {
	p, err := exec.LookPath("busybox")
	if err != nil {
		return nil, false
	}
	f, err := elf.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, false
		}
	}
	data, err = os.ReadFile(p)
	return data, err == nil
}
