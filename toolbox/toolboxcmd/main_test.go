package toolboxcmd

import (
	"os"
	"testing"

	"github.com/sandplane/sandplane/internal/leakcheck"
)

// TestMain fails the run when a goroutine or a child process outlives the
// package's tests.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
