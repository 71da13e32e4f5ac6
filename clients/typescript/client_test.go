package typescript

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandplane/sandplane/internal/testdaemon"
)

// TestMain builds no binary of its own: testdaemon.Main removes the one
// Binary builds, and fails the run when a child process outlives the tests.
func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// nodeTimeout bounds the whole node run, only so that a wedged one cannot
// hang the suite; it takes seconds.
const nodeTimeout = 5 * time.Minute

// TestClient builds the package (npm run build) and runs its node tests
// against real daemons of the sandplane binary built from this tree, which
// they get in SANDPLANE_BIN. It skips only without node; a missing
// node_modules fails it, with what to run.
func TestClient(t *testing.T) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the TypeScript client's tests need Node 18+")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("node is installed but npm is not: %v", err)
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "typescript", "package.json")); err != nil {
		t.Fatal("the TypeScript client's packages are not installed: run `make test-deps` (npm ci in clients/typescript)")
	}
	bin := testdaemon.Binary(t)
	// Everything node makes (daemon roots, token files, configs) goes under
	// tmp, so that any process left behind is found by it.
	tmp := t.TempDir()

	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	env := append(os.Environ(), "SANDPLANE_BIN="+bin, "SANDPLANE_TEST_TMPDIR="+tmp, "NO_COLOR=1")

	build := exec.CommandContext(ctx, npm, "run", "--silent", "build")
	build.Dir = dir
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("npm run build failed: %v\n%s", err, out)
	}

	start := time.Now()
	test := exec.CommandContext(ctx, nodeBin, "--test", "--test-reporter=spec", filepath.Join("build-test", "test", "client.test.js"))
	test.Dir = dir
	test.Env = env
	test.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	test.Stdout = &out
	test.Stderr = &out
	err = test.Run()
	leftovers(t, tmp)
	if err != nil {
		t.Fatalf("node --test failed (%v) after %v:\n%s", err, time.Since(start).Round(time.Millisecond), out.String())
	}
	t.Logf("node --test passed in %v:\n%s", time.Since(start).Round(time.Millisecond), lastLines(out.String(), 12))
}

// leftovers fails t when a process that node started (a daemon, or a
// sandbox's workload) outlives it, and kills each by its PID: every one of
// them has tmp in its environment or its command line, since node's daemons
// run with their roots under tmp.
func leftovers(t *testing.T, tmp string) {
	t.Helper()
	mark := []byte(tmp)
	for _, file := range []string{"environ", "cmdline"} {
		for _, pid := range testdaemon.ProcessesWhere(t, file, func(b []byte) bool { return bytes.Contains(b, mark) }) {
			if pid == os.Getpid() {
				continue
			}
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			t.Errorf("process %d outlived the node tests: %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// lastLines is the last n lines of s: node's summary.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
