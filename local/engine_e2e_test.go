package local_test

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/provider"
)

// Faults of the docker engine under a running daemon, on a private engine
// the test may stop and start (dockertest.PrivateEngine): the machine's
// own engine is never touched.

// engineAfterFault is how long the daemon may take, once the engine is
// back, to find out what became of its sandboxes: its watches ask again on
// a backoff of up to 30s.
const engineAfterFault = 60 * time.Second

// privateDocker is a daemon on a private engine, with a toolbox image made
// there FROM scratch out of the static sandplane-toolbox of this build.
type privateDocker struct {
	engine *dockertest.PrivateEngine
	cli    *client.Client
	d      *testdaemon.Daemon
}

func startPrivateDocker(t *testing.T) *privateDocker {
	t.Helper()
	engine := dockertest.StartPrivateEngine(t)
	cli := engine.Client()
	tag := "sandplane-engine-e2e:" + randHex(6)
	toolbox, err := os.ReadFile(testdaemon.Toolbox(t))
	require.NoError(t, err)
	img := docker.ScratchImage{
		Files:      map[string][]byte{"sandplane-toolbox": toolbox},
		Dirs:       map[string]fs.FileMode{"tmp": fs.ModeSticky | 0o777, "home/daytona": 0o755},
		Entrypoint: []string{"/sandplane-toolbox", "--host", "0.0.0.0"},
		Env:        map[string]string{"HOME": "/home/daytona"},
		WorkDir:    "/home/daytona",
		Labels:     map[string]string{dockertest.Label: "true"},
	}
	if sh, ok := docker.StaticBusybox(); ok {
		img.Files["bin/sh"] = sh
	}
	require.NoError(t, docker.BuildScratchImage(context.Background(), cli, tag, img))
	config := fmt.Sprintf(`dockerImage: %[1]s
snapshots:
  never-ready:
    # The toolbox on the container's loopback: the published port never reaches it.
    image: %[1]s
    imageCommand: [/sandplane-toolbox]
`, tag)
	d := testdaemon.Start(t, testdaemon.Options{Config: config, Env: []string{"DOCKER_HOST=" + engine.Host}})
	return &privateDocker{engine: engine, cli: cli, d: d}
}

// containers are the containers of the daemon's sandboxes on the engine.
func (p *privateDocker) containers(t *testing.T) []container.Summary {
	t.Helper()
	list, err := p.cli.ContainerList(context.Background(), container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelRoot+"="+p.d.Root)),
	})
	require.NoError(t, err)
	return list
}

// carried counts the images that carry a sandbox's files into a new
// container; only one a container runs from may stay.
func (p *privateDocker) carried(t *testing.T) int {
	t.Helper()
	list, err := p.cli.ImageList(context.Background(), image.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelRoot+"="+p.d.Root), filters.Arg("label", "io.sandplane.carried"))})
	require.NoError(t, err)
	return len(list)
}

// leftovers names the daemon's containers, and counts the carried images.
func (p *privateDocker) leftovers(t *testing.T) string {
	t.Helper()
	var names []string
	for _, c := range p.containers(t) {
		names = append(names, strings.Join(c.Names, ",")+" "+c.State)
	}
	return fmt.Sprintf("containers %v and %d carried images", names, p.carried(t))
}

// keepFile makes a folder in the sandbox, proof of its files after a start.
func keepFile(t *testing.T, p *privateDocker, s *provider.Sandbox) {
	t.Helper()
	resp := toolboxDo(t, p.d.P, s, http.MethodPost, "/files/folder?path=kept&mode=0755", "")
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}

func hasFile(t *testing.T, p *privateDocker, s *provider.Sandbox) bool {
	t.Helper()
	resp := toolboxDo(t, p.d.P, s, http.MethodGet, "/files/info?path=kept", "")
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// settled waits until sandbox id is stopped, or started with its
// container running on the engine, and returns it.
func settled(t *testing.T, p *privateDocker, id string) *provider.Sandbox {
	t.Helper()
	var last *provider.Sandbox
	require.Eventually(t, func() bool {
		s, err := p.d.P.Get(context.Background(), id)
		if err != nil {
			return false
		}
		last = s
		if s.State != provider.StateStarted {
			return s.State == provider.StateStopped
		}
		c, err := p.cli.ContainerInspect(context.Background(), docker.ContainerName(id))
		return err == nil && c.State != nil && c.State.Running
	}, engineAfterFault, 50*time.Millisecond, "sandbox %s never settled after the engine came back", id)
	return last
}

// TestEngineGoesAway stops the engine under two running docker sandboxes
// and starts it again on the same directories: the daemon, never
// restarted, reconnects, shows each sandbox stopped because the engine
// went away (or adopted, should its container have lived on), starts it
// again with its files, and keeps every record.
func TestEngineGoesAway(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault func(*dockertest.PrivateEngine)
	}{
		{"stopped", (*dockertest.PrivateEngine).Stop},
		{"crashed", (*dockertest.PrivateEngine).Kill9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := startPrivateDocker(t)
			ctx := context.Background()
			before, err := p.d.P.Info(ctx)
			require.NoError(t, err)
			var ids []string
			for _, name := range []string{"first", "second"} {
				s := dockerCreate(t, p.d, provider.CreateRequest{Name: name})
				keepFile(t, p, s)
				ids = append(ids, s.ID)
			}

			tt.fault(p.engine)
			p.engine.Start()

			for _, id := range ids {
				s := settled(t, p, id)
				t.Logf("after the engine came back, sandbox %s is %s (%s)", id, s.State, s.ErrorReason)
				if s.State == provider.StateStopped {
					assert.Equal(t, docker.ReasonEngineGone, s.ErrorReason, "sandbox %s", id)
					s, err = p.d.P.Start(ctx, id)
					require.NoError(t, err, "start %s after the engine came back; daemon stderr:\n%s", id, p.d.Stderr)
				}
				assert.Equal(t, provider.StateStarted, s.State)
				checkToolbox(t, p.d.P, s)
				assert.True(t, hasFile(t, p, s), "sandbox %s kept its files", id)
			}
			list, err := p.d.P.List(ctx, provider.ListOptions{})
			require.NoError(t, err)
			var listed []string
			for _, s := range list {
				listed = append(listed, s.ID)
			}
			assert.ElementsMatch(t, ids, listed, "every record is still listed")
			after, err := p.d.P.Info(ctx)
			require.NoError(t, err)
			assert.Equal(t, before.PID, after.PID, "the daemon reconnected without a restart")
		})
	}
}

// TestEngineGoesAwayDuringCreate stops the engine while a create waits for
// its container to come up: the create fails unavailable, saying that the
// engine is not answering and what to do, and once the engine is back no
// container of it is left and no record of it either.
func TestEngineGoesAwayDuringCreate(t *testing.T) {
	p := startPrivateDocker(t)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := p.d.P.Create(ctx, provider.CreateRequest{
			Name: "inflight", Snapshot: "never-ready", Runtime: provider.RuntimeDocker, AutoStopInterval: ptr(0),
		})
		done <- err
	}()
	require.Eventually(t, func() bool {
		for _, c := range p.containers(t) {
			if c.State == container.StateRunning {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the create never started its container")

	p.engine.Stop()
	var err error
	select {
	case err = <-done:
	case <-time.After(engineAfterFault): // only stops a hang
		t.Fatal("the create did not end after the engine went away")
	}
	require.Error(t, err)
	assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "docker engine")
	assert.Contains(t, err.Error(), "start dockerd")

	p.engine.Start()
	require.Eventually(t, func() bool { return len(p.containers(t)) == 0 },
		engineAfterFault, 100*time.Millisecond, "the failed create's container is left on the engine")
	list, err := p.d.P.List(ctx, provider.ListOptions{})
	require.NoError(t, err)
	for _, s := range list {
		assert.NotContains(t, []provider.State{provider.StateStarting, provider.StateStopping}, s.State, "sandbox %s is stuck", s.ID)
	}
	assert.Empty(t, list, "the failed create left no record")
}

// TestDaemonKilledDuringASnapshot kills the daemon with SIGKILL while a
// start commits a sandbox's filesystem to carry it into a new container
// (its port was taken while it was stopped), at several points of the
// commit: the restarted daemon leaves no container but the sandbox's, no
// record starting, and the sandbox starts with its files.
func TestDaemonKilledDuringASnapshot(t *testing.T) {
	needShell(t)
	for _, after := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		t.Run(after.String(), func(t *testing.T) {
			p := startPrivateDocker(t)
			ctx := context.Background()
			s := dockerCreate(t, p.d, provider.CreateRequest{Name: "snap"})
			// Enough to make the commit take a while.
			require.Zero(t, execute(t, p.d.P, s, "dd if=/dev/urandom of=big bs=1M count=200 2>/dev/null && echo kept > state.txt").ExitCode)
			_, err := p.d.P.Stop(ctx, s.ID)
			require.NoError(t, err)
			squatter, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)))
			require.NoError(t, err)
			defer squatter.Close()

			killed, answered := p.d, make(chan struct{})
			go func() {
				defer close(answered)
				_, _ = killed.P.Start(ctx, s.ID) // its answer is lost with the daemon
			}()

			time.Sleep(after) // a point of the commit to kill the daemon at
			killed.Kill9()
			<-answered
			t.Logf("killed with the engine holding %s", p.leftovers(t))
			p.d = p.d.Restart(t)

			got := settled(t, p, s.ID)
			if got.State == provider.StateStopped {
				got, err = p.d.P.Start(ctx, s.ID)
				require.NoError(t, err, "daemon stderr:\n%s", p.d.Stderr)
			}
			assert.Equal(t, "kept\n", execute(t, p.d.P, got, "cat state.txt").Result)
			names := []string{}
			for _, c := range p.containers(t) {
				names = append(names, c.Names...)
			}
			assert.Equal(t, []string{"/" + docker.ContainerName(s.ID)}, names, "only the sandbox's container is left")
			require.Eventually(t, func() bool { return p.carried(t) <= 1 }, engineAfterFault, 100*time.Millisecond,
				"an image an interrupted commit left is swept: %s", p.leftovers(t))
		})
	}
}
