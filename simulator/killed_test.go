package simulator

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
	"github.com/sandplane/sandplane/simulator/internal/backend"
)

// kill9 kills sim with SIGKILL and waits until it has ended.
func (s *simProcess) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Kill())
	<-s.done
}

// containersOwnedBy lists the containers, running or not, that the
// simulator process owner names made.
func containersOwnedBy(t *testing.T, cli *client.Client, owner string) []container.Summary {
	t.Helper()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", docker.LabelPrefix+backend.LabelSimOwner+"="+owner))})
	require.NoError(t, err)
	return cs
}

// A docker simulator killed with SIGKILL while its warm pool fills leaves
// containers behind, and nothing else can: the next docker simulator on the
// machine removes every one of them.
func TestDockerSimulatorKilledDuringAWarmPoolRefill(t *testing.T) {
	cli := dockertest.Engine(t)
	first := startSimProcess(t, "docker", nil, "--warm-pool", "3", "--ssh-listen", "off")
	owner := backend.OwnerOf(first.cmd.Process.Pid)
	require.NotEmpty(t, owner, "/proc tells this simulator's start time")
	t.Cleanup(func() {
		for _, c := range containersOwnedBy(t, cli, owner) {
			_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})
	require.Eventually(t, func() bool { return len(containersOwnedBy(t, cli, owner)) > 0 },
		2*time.Minute, 20*time.Millisecond, "the pool's refill makes containers")
	first.kill9(t)
	left := containersOwnedBy(t, cli, owner)
	require.NotEmpty(t, left, "SIGKILL leaves the refill's containers: nothing of the simulator ran after it")

	startSimProcess(t, "docker", nil, "--ssh-listen", "off")
	assert.Eventually(t, func() bool { return len(containersOwnedBy(t, cli, owner)) == 0 },
		time.Minute, 100*time.Millisecond, "the next docker simulator removed what the killed one left")
}

// A native simulator killed with SIGKILL while its warm pool fills leaves
// no process: each workload ends with the simulator (parent death).
func TestNativeSimulatorKilledDuringAWarmPoolRefill(t *testing.T) {
	first := startSimProcess(t, "native", nil, "--warm-pool", "3", "--ssh-listen", "off")
	// The workloads' environment names the simulator's state directory
	// (their home is in it).
	root := stateDirOf(t, first.cmd)
	ofRoot := func() []int {
		return testdaemon.ProcessesWhere(t, "environ", func(b []byte) bool { return strings.Contains(string(b), root) })
	}
	require.Eventually(t, func() bool { return len(ofRoot()) > 0 }, time.Minute, 10*time.Millisecond, "the pool's refill starts workloads")
	first.kill9(t)
	assert.Eventually(t, func() bool { return len(ofRoot()) == 0 }, 30*time.Second, 20*time.Millisecond,
		"no workload outlives a simulator killed mid-refill: %v", ofRoot())
}

// stateDirOf is the --root a simulator was started with.
func stateDirOf(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	for i, a := range cmd.Args {
		if a == "--root" && i+1 < len(cmd.Args) {
			return cmd.Args[i+1]
		}
	}
	t.Fatal("no --root")
	return ""
}
