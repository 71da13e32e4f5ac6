package dockertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/sandplane/sandplane/local/driver/docker"
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
	// Negotiate now, before tests share the client: its lazy negotiation
	// races when two goroutines make the first request at once.
	cli.NegotiateAPIVersion(context.Background())
	return cli
}

// NewClient returns a client configured from the environment, as the runtime
// configures its own. It does not contact the engine.
func NewClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// Ping reports whether the engine behind cli answers within a few seconds.
func Ping(ctx context.Context, cli *client.Client) error {
	ctx, cancel := clock.WithTimeout(ctx, clock.Real(), pingTimeout)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("docker engine at %s: %w", cli.DaemonHost(), err)
	}
	return nil
}

// BuildImage builds tag FROM scratch containing files (path inside the image
// to content; every file is executable) with entrypoint as its ENTRYPOINT,
// labelled with Label. It never pulls: scratch needs no base image.
func BuildImage(ctx context.Context, cli *client.Client, tag string, files map[string][]byte, entrypoint []string) error {
	return docker.BuildScratchImage(ctx, cli, tag, docker.ScratchImage{
		Files:      files,
		Entrypoint: entrypoint,
		Labels:     map[string]string{Label: "true"},
	})
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
// when there is none, or only a dynamically linked one.
func StaticBusybox() (data []byte, ok bool) { return docker.StaticBusybox() }
