package leakcheck

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestChildrenFindsAChildUntilItIsGone(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := strconv.Itoa(cmd.Process.Pid)
	found := childrenOf(os.Getpid())
	require.Len(t, found, 1)
	assert.True(t, strings.HasPrefix(found[0], pid+" "), found[0])
	assert.Contains(t, found[0], "sleep 60")

	require.NoError(t, cmd.Process.Kill())
	assert.Contains(t, childrenOf(os.Getpid())[0], pid, "a zombie nobody waited for is still a child")
	_ = cmd.Wait()
	assert.Empty(t, children(os.Getpid(), 10*time.Second), "a reaped child is gone")
}

func TestParentOfReadsAnOddCommandName(t *testing.T) {
	ppid, state, ok := parentOf(strconv.Itoa(os.Getpid()))
	require.True(t, ok)
	assert.Equal(t, os.Getppid(), ppid)
	assert.NotEmpty(t, state)
}

func TestGoroutinesFindsOneUntilItReturns(t *testing.T) {
	release := make(chan struct{})
	done := make(chan struct{})
	go func() { <-release; close(done) }()
	err := goroutines(100 * time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TestGoroutinesFindsOneUntilItReturns")
	close(release)
	<-done
	assert.NoError(t, goroutines(10*time.Second), "a goroutine that returned is no leak")
}
