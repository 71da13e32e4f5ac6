package docker_test

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
)

// tempTag is a fresh image tag, removed when t ends.
func tempTag(t *testing.T, h *harness) string {
	t.Helper()
	tag := "sandplane-docker-test-src:" + randomHex(6)
	t.Cleanup(func() {
		if err := dockertest.RemoveImage(context.Background(), h.cli, tag); err != nil {
			t.Error(err)
		}
	})
	return tag
}

func TestPreflightRunsTheImageSourceOnce(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	tag := tempTag(t, h)
	var runs atomic.Int32
	h.rt.SetImageSource(tag, func(ctx context.Context) error {
		runs.Add(1)
		return h.cli.ImageTag(ctx, h.image, tag)
	})

	spec := h.spec()
	spec.Image = tag
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, h.rt.Preflight(ctx, spec)) })
	}
	wg.Wait()
	assert.Equal(t, int32(1), runs.Load(), "concurrent creates build once")

	require.NoError(t, h.rt.Preflight(ctx, spec))
	assert.Equal(t, int32(1), runs.Load(), "a present image is not rebuilt")
	h.start(ctx, spec)
	assert.Equal(t, "hello from the test server\n", getWhenUp(t, baseURL(spec.Port)))

	require.NoError(t, dockertest.RemoveImage(ctx, h.cli, tag))
	require.NoError(t, h.rt.Preflight(ctx, spec))
	assert.Equal(t, int32(2), runs.Load(), "a vanished image is made again")

	require.NoError(t, h.rt.SyncImage(ctx, tag))
	assert.Equal(t, int32(3), runs.Load(), "SyncImage always runs the source")
	assert.Equal(t, provider.NotFound, provider.Code(h.rt.SyncImage(ctx, "no-source:"+randomHex(4))))
}

func TestPreflightLetsTheSourceRefreshAPresentImageOnce(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	tag := tempTag(t, h)
	require.NoError(t, h.cli.ImageTag(ctx, h.image, tag))
	var runs atomic.Int32
	h.rt.SetImageSource(tag, func(context.Context) error {
		runs.Add(1)
		return errors.New("cannot refresh it")
	})
	spec := h.spec()
	spec.Image = tag
	require.NoError(t, h.rt.Preflight(ctx, spec), "a present image stays usable when its refresh fails")
	require.NoError(t, h.rt.Preflight(ctx, spec))
	assert.Equal(t, int32(1), runs.Load(), "asked once per runtime")
}

func TestPreflightReportsWhyTheSourceFailed(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	spec.Image = "sandplane-no-such-image:" + randomHex(4)
	tests := []struct {
		name     string
		src      docker.ImageSource
		code     provider.ErrorCode
		contains []string
	}{
		{
			"cannot build",
			func(context.Context) error {
				return provider.Errorf(provider.PreflightFailed, "the binary is dynamically linked: build it with make build")
			},
			provider.PreflightFailed,
			[]string{spec.Image, "could not build it", "make build"},
		},
		{
			"engine gone",
			func(context.Context) error { return provider.Errorf(provider.Unavailable, "engine went away") },
			provider.Unavailable,
			[]string{"engine went away"},
		},
		{
			"source claims success",
			func(context.Context) error { return nil },
			provider.PreflightFailed,
			[]string{spec.Image, "never pulls"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.rt.SetImageSource(spec.Image, tt.src)
			err := h.rt.Preflight(ctx, spec)
			require.Error(t, err)
			assert.Equal(t, tt.code, provider.Code(err))
			for _, s := range tt.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestPreflightGivesUpWaitingForASlowSource(t *testing.T) {
	h := newHarness(t)
	spec := h.spec()
	spec.Image = "sandplane-no-such-image:" + randomHex(4)
	release := make(chan struct{})
	started := make(chan struct{})
	h.rt.SetImageSource(spec.Image, func(ctx context.Context) error {
		close(started)
		<-release
		return errors.New("released")
	})
	go func() { _ = h.rt.SyncImage(context.Background(), spec.Image) }()
	<-started
	t.Cleanup(func() { close(release) })

	// Long enough for the image lookup, then Preflight waits on the build
	// another caller runs, and must give up when its context ends.
	ctx, cancel := context.WithTimeout(testContext(t), 500*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, h.rt.Preflight(ctx, spec), context.DeadlineExceeded)
}

func TestBuildImageReplacesTheTag(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	tag := tempTag(t, h)
	img := docker.ScratchImage{
		Files:      map[string][]byte{"a": []byte("one")},
		Dirs:       map[string]fs.FileMode{"tmp": fs.ModeSticky | 0o777},
		Entrypoint: []string{"/a"},
		Labels:     map[string]string{"io.sandplane.test": "one"},
	}
	require.NoError(t, h.rt.BuildImage(ctx, tag, img))
	first, err := h.cli.ImageInspect(ctx, tag)
	require.NoError(t, err)
	labels, err := h.rt.ImageLabels(ctx, tag)
	require.NoError(t, err)
	assert.Equal(t, "one", labels["io.sandplane.test"])

	img.Files = map[string][]byte{"a": []byte("two")}
	img.Labels = map[string]string{"io.sandplane.test": "two"}
	require.NoError(t, h.rt.BuildImage(ctx, tag, img))
	labels, err = h.rt.ImageLabels(ctx, tag)
	require.NoError(t, err)
	assert.Equal(t, "two", labels["io.sandplane.test"])
	_, err = h.cli.ImageInspect(ctx, first.ID)
	assert.True(t, cerrdefs.IsNotFound(err), "the replaced image is removed: %v", err)

	_, err = h.rt.ImageLabels(ctx, "sandplane-no-such-image:"+randomHex(4))
	assert.Equal(t, provider.NotFound, provider.Code(err))
}
