package toolbox

import (
	"os"
	"testing"

	"github.com/sandplane/sandplane/internal/leakcheck"
	"github.com/sandplane/sandplane/internal/testdaemon"
)

// TestMain gives the package's shells (PTYs, sessions) a HOME of their own.
func TestMain(m *testing.M) {
	remove := testdaemon.PrivateHome()
	code := leakcheck.Main(m)
	remove()
	os.Exit(code)
}
