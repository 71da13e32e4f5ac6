package baseimage

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// TestLockFileWaitsForAnotherProcess holds the lock in a flock(1) process,
// as a second daemon building the same image would.
func TestLockFileWaitsForAnotherProcess(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) is not installed (util-linux): it holds the lock from another process")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	holder := exec.Command("flock", path, "-c", "echo held; cat >/dev/null")
	stdin, err := holder.StdinPipe()
	require.NoError(t, err)
	stdout, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)

	clk := clocktest.NewFake(time.Time{})
	ctx := context.Background()
	waiting := make(chan struct{}, 1)
	got := make(chan error, 1)
	go func() {
		unlock, err := lockFile(ctx, clk, path, func() { waiting <- struct{}{} })
		if err == nil {
			unlock()
		}
		got <- err
	}()
	<-waiting
	require.NoError(t, clk.BlockUntilWaiters(ctx, 1))
	select {
	case err := <-got:
		t.Fatalf("took the lock another process holds: %v", err)
	default:
	}

	require.NoError(t, stdin.Close()) // the holder reads EOF and exits, dropping the lock
	require.NoError(t, holder.Wait())
	clk.Advance(lockPoll)
	assert.NoError(t, <-got)
}
