package docker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/baseimage"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
)

func randomTag(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "sandplane-image-test:" + hex.EncodeToString(b)
}

func testLogger() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// copyToTemp copies the file at src into a fresh temporary file.
func copyToTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sandplane")
	require.NoError(t, os.WriteFile(p, data, 0o755))
	return p
}

// TestToolboxImage covers the FROM scratch toolbox image, the fallback where
// the Debian base cannot be built.
func TestToolboxImage(t *testing.T) {
	cli := dockertest.Engine(t)
	d, err := docker.New(docker.WithToolboxBase(docker.ScratchBase))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	imageID := func(tag string) string {
		t.Helper()
		img, err := cli.ImageInspect(ctx, tag)
		require.NoError(t, err)
		return img.ID
	}
	tempTag := func(t *testing.T) string {
		tag := randomTag(t)
		t.Cleanup(func() { assert.NoError(t, dockertest.RemoveImage(context.Background(), cli, tag)) })
		return tag
	}

	t.Run("a dynamically linked binary is refused, naming the fix", func(t *testing.T) {
		ls, err := exec.LookPath("ls")
		require.NoError(t, err)
		if static, err := docker.StaticExecutable(ls); err != nil || static {
			t.Skip("no dynamically linked ls here to stand in for a cgo build")
		}
		tag := tempTag(t)
		log, logged := testLogger()
		err = docker.EnsureToolboxImageFrom(ctx, d, tag, ls, "", log)
		require.Error(t, err)
		assert.Equal(t, provider.PreflightFailed, provider.Code(err))
		assert.Contains(t, err.Error(), "make build")
		assert.Contains(t, err.Error(), "CGO_ENABLED=0")
		assert.Contains(t, logged.String(), "level=WARN")
		_, err = d.ImageLabels(ctx, tag)
		assert.Equal(t, provider.NotFound, provider.Code(err), "nothing built")
	})

	t.Run("builds a missing image and rebuilds it for another binary", func(t *testing.T) {
		bb, ok := docker.StaticBusybox()
		if !ok {
			t.Skip(dockertest.NoBusyboxMessage)
		}
		// Any static binary will do: the image is inspected, not run.
		self := copyToTemp(t, bb)
		tag := tempTag(t)
		log, logged := testLogger()
		require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, self, "", log))
		assert.Contains(t, logged.String(), "built the docker toolbox image with busybox")
		first := imageID(tag)
		labels, err := d.ImageLabels(ctx, tag)
		require.NoError(t, err)
		digest, err := docker.FileDigest(self)
		require.NoError(t, err)
		assert.Equal(t, digest+"+busybox", labels[docker.LabelToolboxBinary])

		img, err := cli.ImageInspect(ctx, tag)
		require.NoError(t, err)
		assert.Equal(t, []string{"/sandplane", "toolbox", "--host", "0.0.0.0"}, []string(img.Config.Entrypoint))
		assert.Equal(t, docker.ToolboxHome, img.Config.WorkingDir)
		assert.Contains(t, img.Config.Env, "HOME="+docker.ToolboxHome)

		require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, self, "", log))
		assert.Equal(t, first, imageID(tag), "a current image is kept")

		require.NoError(t, os.WriteFile(self, append(bb, 0), 0o755))
		require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, self, "", log))
		assert.NotEqual(t, first, imageID(tag), "a new binary, a new image")
		_, err = cli.ImageInspect(ctx, first)
		assert.Error(t, err, "the stale image is removed")
	})

	t.Run("an image sandplane did not build is left alone", func(t *testing.T) {
		tag := tempTag(t)
		require.NoError(t, docker.BuildScratchImage(ctx, cli, tag, docker.ScratchImage{
			Files:      map[string][]byte{"own": []byte("x")},
			Entrypoint: []string{"/own"},
		}))
		before := imageID(tag)
		log, logged := testLogger()
		require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, filepath.Join(t.TempDir(), "never-read"), "", log))
		assert.Equal(t, before, imageID(tag))
		assert.NotContains(t, logged.String(), "level=WARN")
	})
}

func TestToolboxImageWithoutEngine(t *testing.T) {
	d, err := docker.New(docker.WithHost("unix://" + filepath.Join(t.TempDir(), "no-docker.sock")))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	log, _ := testLogger()
	err = d.EnsureToolboxImage(context.Background(), "sandplane/toolbox:local", "", log)
	assert.Equal(t, provider.Unavailable, provider.Code(err))
	assert.Contains(t, err.Error(), "start dockerd or set DOCKER_HOST")
}

// TestToolboxImageOnTheDebianBase: by default the toolbox is layered on
// sandplane's Debian image (built once per engine: .ci/run builds it ahead of
// the tests), so a sandbox has bash, python3, node and git, and a dynamically
// linked binary is fine there.
func TestToolboxImageOnTheDebianBase(t *testing.T) {
	cli := dockertest.Engine(t)
	d, err := docker.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	t.Cleanup(cancel)
	self, err := os.Executable() // the test binary: any binary of this platform
	require.NoError(t, err)
	tag := randomTag(t)
	t.Cleanup(func() { assert.NoError(t, dockertest.RemoveImage(context.Background(), cli, tag)) })
	log, logged := testLogger()
	require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, self, "", log), "%s", logged)

	labels, err := d.ImageLabels(ctx, tag)
	require.NoError(t, err)
	digest, err := docker.FileDigest(self)
	require.NoError(t, err)
	assert.Contains(t, labels[docker.LabelToolboxBinary], digest+"+sandplane/base:", "the label names the binary and its base")
	img, err := cli.ImageInspect(ctx, tag)
	require.NoError(t, err)
	assert.Equal(t, docker.ToolboxHome, img.Config.WorkingDir)
	before := img.ID

	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--entrypoint", "/bin/bash", tag, "-c",
		"[[ 1 == 1 ]] && command -v python3 node git curl pylsp typescript-language-server ts-node >/dev/null && id daytona >/dev/null && echo ok").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "ok\n", string(out))

	require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, self, "", log))
	img, err = cli.ImageInspect(ctx, tag)
	require.NoError(t, err)
	assert.Equal(t, before, img.ID, "a current image is kept")

	t.Run("with sandplane-toolbox the image runs it", func(t *testing.T) {
		server := copyToTemp(t, []byte("\x7fELF any file: the image is inspected, not run"))
		tag := randomTag(t)
		t.Cleanup(func() { assert.NoError(t, dockertest.RemoveImage(context.Background(), cli, tag)) })
		require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, self, server, log), "%s", logged)
		img, err := cli.ImageInspect(ctx, tag)
		require.NoError(t, err)
		assert.Equal(t, baseimage.ServerEntrypoint, []string(img.Config.Entrypoint))
		labels, err := d.ImageLabels(ctx, tag)
		require.NoError(t, err)
		assert.Contains(t, labels[docker.LabelToolboxBinary], digest+"+server:", "the label names both binaries")
		first := img.ID

		require.NoError(t, os.WriteFile(server, []byte("\x7fELF another build"), 0o755))
		require.NoError(t, docker.EnsureToolboxImageFrom(ctx, d, tag, self, server, log))
		img, err = cli.ImageInspect(ctx, tag)
		require.NoError(t, err)
		assert.NotEqual(t, first, img.ID, "a new sandplane-toolbox, a new image")
	})

	t.Run("a named base that is missing is refused, naming the fix", func(t *testing.T) {
		d, err := docker.New(docker.WithToolboxBase("sandplane-missing-base:never"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		err = docker.EnsureToolboxImageFrom(ctx, d, randomTag(t), self, "", log)
		assert.Equal(t, provider.PreflightFailed, provider.Code(err))
		assert.Contains(t, err.Error(), "docker pull sandplane-missing-base:never")
	})
}
