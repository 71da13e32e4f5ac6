package toolbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// withNodeTools puts the language tools that `make test-deps` installs
// (typescript, ts-node, typescript-language-server) first in PATH, which the
// toolbox and everything it starts inherit.
func withNodeTools(t *testing.T) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("testdata", "node", "node_modules", ".bin"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(bin, "typescript-language-server")); err != nil {
		t.Skipf("the node test tools are not installed (%v): run `make test-deps`", err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// requireTool skips when a program the test drives for real is missing;
// CI installs every one of them (.ci/run).
func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed: %v (.ci/run installs it)", name, err)
	}
}
