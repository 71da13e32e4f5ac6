package testdaemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandplane/sandplane/internal/leakcheck"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
)

const (
	mainPackage    = "github.com/sandplane/sandplane/cmd/sandplane"
	initPackage    = "github.com/sandplane/sandplane/cmd/sandplane-init"
	toolboxPackage = "github.com/sandplane/sandplane/cmd/sandplane-toolbox"
)

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary is the path of a sandplane binary built from this tree, the same
// for every test of the process, with sandplane-init and sandplane-toolbox
// beside it as `make build` installs them. The first call builds them; a
// failed build fails every test that asks.
func Binary(t testing.TB) string {
	t.Helper()
	built.once.Do(build)
	if built.err != nil {
		t.Fatalf("build sandplane: %v", built.err)
	}
	return built.path
}

func build() {
	dir, err := os.MkdirTemp("", "sandplane-testdaemon-")
	if err != nil {
		built.err = err
		return
	}
	built.dir = dir
	path := filepath.Join(dir, "sandplane")
	// Static, so that the same binary runs on the host and in the docker
	// runtime's FROM-scratch toolbox image.
	cmd := exec.Command("go", "build", "-o", dir+"/", mainPackage, initPackage, toolboxPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		built.err = fmt.Errorf("%w\n%s", err, out)
		return
	}
	built.path = path
}

// Toolbox is the path of the sandplane-toolbox built beside Binary: the
// default snapshot's workload.
func Toolbox(t testing.TB) string {
	return filepath.Join(filepath.Dir(Binary(t)), "sandplane-toolbox")
}

// RequireOwnInit fails t unless this test binary, re-executed as a native
// sandbox's init, runs the init: a TestMain that parses flags before it
// calls nsinit.Main (directly or through Main) exits on the init's flags
// instead, and every native sandbox it runs falls back to process groups,
// from which what a sandbox starts in a session of its own escapes.
func RequireOwnInit(t testing.TB) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The runtime's own check of an init program: it asks the protocol.
	if err := native.New(native.WithInitProgram(exe)).InitFallback(); err != nil {
		t.Fatalf("this test binary is not its own init (%v): call nsinit.Main before anything else in TestMain, flag.Parse included", err)
	}
}

// Main runs the tests of m, failing them when a goroutine or a child
// process outlives them (leakcheck.Main), and removes the binary they
// built, if any; it
// returns m's exit code. In this binary re-executed by ServeBare it serves
// instead.
func Main(m *testing.M) int {
	// A test binary that runs native sandboxes in-process is their init.
	nsinit.Main()
	if file := os.Getenv(bareEnv); file != "" {
		return serveBare(file)
	}
	code := leakcheck.Main(m)
	built.once.Do(func() {}) // waits for a build under way; none starts after
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}
