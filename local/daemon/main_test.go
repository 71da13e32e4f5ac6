package daemon

import (
	"os"
	"testing"

	"github.com/sandplane/sandplane/internal/leakcheck"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
)

// TestMain fails the run when a goroutine or a child process outlives the
// package's tests. The binary can be a workload's init, as the daemon's
// is, so that the native runtime probes here what it probes under serve.
func TestMain(m *testing.M) {
	nsinit.Main()
	os.Exit(leakcheck.Main(m))
}
