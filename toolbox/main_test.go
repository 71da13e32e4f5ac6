package toolbox

import (
	"os"
	"testing"
)

// TestMain gives the package's shells a HOME of their own: an interactive
// bash (a PTY, a session) sources ~/.bashrc, and a developer's rc file
// (a version manager's rehash waiting on its lock, a slow prompt) must not
// decide whether a test sees its output.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "toolbox-test-home-")
	if err != nil {
		panic(err)
	}
	os.Setenv("HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
