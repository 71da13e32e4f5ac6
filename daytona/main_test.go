package daytona

import (
	"os"
	"testing"

	"github.com/sandplane/sandplane/internal/testdaemon"
)

// TestMain fails the run when a goroutine or a child process outlives the
// package's tests (testdaemon.Main runs leakcheck.Main). This binary is
// also the init of the native sandboxes the entrypoint tests run.
func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// TestThisBinaryIsItsOwnInit: the simulator's native sandboxes run under
// this binary as their init; without it they would fall back to process
// groups and leave behind what they start.
func TestThisBinaryIsItsOwnInit(t *testing.T) { testdaemon.RequireOwnInit(t) }
