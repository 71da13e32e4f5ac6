package conformance_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/conformance"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/runtime/docker"
	"github.com/sandplane/sandplane/local/runtime/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// localExpect is what the local control plane promises, on either runtime.
var localExpect = conformance.Expectations{
	Traits: provider.Traits{Name: "local", StopStoppedIsNoop: true, ResizeIsNoop: true, SyncStop: true, ReapIntervalMinutes: 1},
}

// dockerEnv is what the docker harnesses of one run share: the engine and
// the toolbox image their daemons build from the test binary of sandplane.
type dockerEnv struct {
	cli   *client.Client
	image string
}

// newDockerEnv skips t when no engine answers, and builds the toolbox image
// once, through a throwaway daemon, so that the scenarios' daemons do not
// all build it at once. The image is removed when t ends.
func newDockerEnv(t *testing.T) *dockerEnv {
	t.Helper()
	needBinary(t)
	env := &dockerEnv{cli: dockertest.Engine(t), image: "sandplane-conformance:" + randHex(6)}
	t.Cleanup(func() {
		if err := dockertest.RemoveImage(context.Background(), env.cli, env.image); err != nil {
			t.Errorf("remove the toolbox image: %v", err)
		}
	})
	d := startDaemon(t, env, t.TempDir())
	ctx := context.Background()
	sb, err := d.p.Create(ctx, provider.CreateRequest{Runtime: provider.RuntimeDocker, AutoStopInterval: ptr(0)})
	if err != nil {
		t.Skipf("the docker runtime cannot run the default snapshot here (%v); daemon log:\n%s", err, d.stderr)
	}
	require.NoError(t, d.p.Delete(ctx, sb.Id))
	d.stop()
	return env
}

// removeRoot removes every container of the daemon that used root.
func (env *dockerEnv) removeRoot(t *testing.T, root string) {
	ctx := context.Background()
	list, err := env.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+root)),
	})
	if err != nil {
		t.Logf("list the containers of %s: %v", root, err)
		return
	}
	for _, c := range list {
		if err := env.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Logf("remove container %s: %v", c.ID, err)
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Sandbox ports: each daemon gets its own block below the kernel's
// ephemeral range, starting at a random block so that two runs on one
// machine rarely meet.
const (
	portsPerDaemon = 20
	portsLow       = 12000
	portBlocks     = 1000
)

var nextBlock atomic.Int64

func init() { nextBlock.Store(int64(mathrand.IntN(portBlocks))) }

func portBlock() int {
	return portsLow + int(nextBlock.Add(1)%portBlocks)*portsPerDaemon
}

// daemon is one `sandplane serve` process.
type daemon struct {
	cmd    *exec.Cmd
	exited chan struct{}
	p      *local.Provider
	stderr *lockedBuffer
}

// startDaemon runs `sandplane serve` on a free loopback port with the
// harness minute and its own root; docker daemons get the run's image.
// Cleanup stops it and removes whatever it left behind.
func startDaemon(t *testing.T, env *dockerEnv, root string) *daemon {
	t.Helper()
	needBinary(t)
	t.Cleanup(func() { killMarked(t, root) })
	if env != nil {
		t.Cleanup(func() { env.removeRoot(t, root) })
	}
	// Daemons that run side by side must not hand out the same ports.
	lo := portBlock()
	config := fmt.Sprintf("ports:\n  min: %d\n  max: %d\n", lo, lo+portsPerDaemon-1)
	if env != nil {
		config += "dockerImage: " + env.image + "\n"
	}
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o600))
	args := []string{"serve", "--listen", freeAddr(t), "--root", root, "--minute", minuteFlag.String(), "--config", cfg}
	d := &daemon{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(sandplaneBin, args...)
	d.cmd.Env = append(os.Environ(), "AGENT_CONTROL_PLANE_URL=", "SANDPLANE_TOKEN=")
	d.cmd.Stderr = d.stderr
	require.NoError(t, d.cmd.Start())
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.stderr)
		}
	})
	var err error
	d.p, err = local.New("http://" + args[2])
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := d.p.Info(context.Background())
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "the daemon did not come up: %s", d.stderr)
	return d
}

func (d *daemon) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// dockerProvider creates every sandbox on the docker runtime.
type dockerProvider struct{ *local.Provider }

func (d dockerProvider) Create(ctx context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	req.Runtime = provider.RuntimeDocker
	return d.Provider.Create(ctx, req)
}

// localMaker makes a harness of a fresh daemon per scenario: native, or
// docker when env is set.
func localMaker(env *dockerEnv) conformance.HarnessMaker {
	return func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		d := startDaemon(t, env, t.TempDir())
		down, err := local.New("http://" + freeAddr(t))
		if err != nil {
			return nil, err
		}
		var p provider.Provider = d.p
		if env != nil {
			p = dockerProvider{d.p}
		}
		return &conformance.Static{
			P:         p,
			Down:      down,
			MinuteLen: *minuteFlag,
			Clk:       clock.Real(),
			Client:    &http.Client{Transport: &http.Transport{Proxy: nil}},
			Run:       runID(),
			Want:      localExpect,
		}, nil
	}
}

func ptr[T any](v T) *T { return &v }
