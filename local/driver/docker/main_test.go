package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/leakcheck"
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
)

// The test image: the server under testdata, plus busybox as /bin/sh when
// this machine has a static one. Built once per test binary, removed at the
// end.
var (
	imageOnce sync.Once
	imageTag  string
	imageErr  error
	hasShell  bool
)

func TestMain(m *testing.M) {
	code := leakcheck.Main(m)
	if imageTag != "" {
		if cli, err := dockertest.NewClient(); err == nil {
			if err := dockertest.RemoveImage(context.Background(), cli, imageTag); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			_ = cli.Close()
		}
	}
	os.Exit(code)
}

func testImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	imageOnce.Do(func() {
		ctx := context.Background()
		bin, err := dockertest.BuildStaticGo(ctx, cli, "./testdata/server")
		if err != nil {
			imageErr = err
			return
		}
		files := map[string][]byte{"server": bin}
		if sh, ok := dockertest.StaticBusybox(); ok {
			files["bin/sh"] = sh
			hasShell = true
		}
		tag := "sandplane-docker-test:" + randomHex(6)
		if imageErr = dockertest.BuildImage(ctx, cli, tag, files, []string{"/server"}); imageErr == nil {
			imageTag = tag
		}
	})
	require.NoError(t, imageErr, "build the test image")
	return imageTag
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// harness is one test's engine, runtime and root; every container labelled
// with its root is removed when the test ends.
type harness struct {
	t     testing.TB
	cli   *client.Client
	rt    *docker.Driver
	root  string
	image string
	// network is the harness's own sandbox network, removed at the end.
	network string
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	cli := dockertest.Engine(t)
	h := &harness{t: t, cli: cli, image: testImage(t, cli)}
	h.root = "/sandplane-test/" + randomHex(6)
	h.network = "sandplane-test-" + randomHex(6)
	// Registered first, so it runs after the containers on it are gone.
	t.Cleanup(func() {
		if err := cli.NetworkRemove(context.Background(), h.network); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove network %s: %v", h.network, err)
		}
	})
	h.rt = h.newRuntime()
	h.cleanupRoot(h.root)
	return h
}

// newRuntime is a fresh runtime value on the same engine, as a restarted
// daemon would make.
func (h *harness) newRuntime() *docker.Driver {
	h.t.Helper()
	rt, err := docker.New(docker.WithNetwork(h.network))
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// cleanupRoot removes, when the test ends, every container and image
// labelled root.
func (h *harness) cleanupRoot(root string) {
	h.t.Cleanup(func() {
		ctx := context.Background()
		list, err := h.cli.ContainerList(ctx, container.ListOptions{
			All:     true,
			Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root)),
		})
		if err != nil {
			h.t.Errorf("list containers to clean up: %v", err)
			return
		}
		for _, c := range list {
			if err := h.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
				h.t.Errorf("remove container %s: %v", c.ID, err)
			}
		}
		// Images Start committed to carry a filesystem over carry the root
		// label too.
		images, err := h.cli.ImageList(ctx, image.ListOptions{
			All:     true,
			Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root)),
		})
		if err != nil {
			h.t.Errorf("list images to clean up: %v", err)
			return
		}
		for _, img := range images {
			if err := dockertest.RemoveImage(ctx, h.cli, img.ID); err != nil {
				h.t.Error(err)
			}
		}
	})
}

func (h *harness) spec() driver.Spec {
	h.t.Helper()
	port := freePort(h.t)
	return driver.Spec{
		SandboxID: "t" + randomHex(6),
		Root:      h.root,
		Image:     h.image,
		Env:       map[string]string{"PORT": strconv.Itoa(port)},
		Port:      port,
	}
}

func (h *harness) start(ctx context.Context, spec driver.Spec) driver.Handle {
	h.t.Helper()
	hd, err := h.rt.Start(ctx, spec)
	require.NoError(h.t, err)
	require.NotEmpty(h.t, hd.ContainerID)
	return hd
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// getWhenUp polls url until it answers 200 and returns the body. The deadline
// only keeps a broken test from hanging.
func getWhenUp(t testing.TB, url string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, err := get(url)
		if err == nil {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never answered: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
	}
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}

func baseURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
