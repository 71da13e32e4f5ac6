package native

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/native/nsinit"
)

var builtInit struct {
	once sync.Once
	path string
	err  error
}

// builtInitProgram builds cmd/sandplane-init once per test binary and returns a
// copy of it in a directory of t's own.
func builtInitProgram(t *testing.T) string {
	t.Helper()
	builtInit.once.Do(func() {
		dir, err := os.MkdirTemp("", "sandplane-init-")
		if err != nil {
			builtInit.err = err
			return
		}
		builtInit.path = filepath.Join(dir, InitProgramName)
		out, err := exec.Command("go", "build", "-o", builtInit.path, "github.com/sandplane/sandplane/cmd/sandplane-init").CombinedOutput()
		if err != nil {
			builtInit.err = err
			t.Logf("%s", out)
		}
	})
	require.NoError(t, builtInit.err, "build sandplane-init")
	return copyOf(t, builtInit.path, filepath.Join(t.TempDir(), InitProgramName))
}

func TestInitAnswersItsProtocol(t *testing.T) {
	for _, prog := range []struct{ name, path string }{{"this program", "/proc/self/exe"}, {InitProgramName, builtInitProgram(t)}} {
		t.Run(prog.name, func(t *testing.T) {
			// Not PID 1, and no status pipe: the question needs neither.
			cmd := exec.Command(prog.path, nsinit.ProtocolFlag)
			cmd.Args[0] = nsinit.Name
			out, err := cmd.Output()
			require.NoError(t, err)
			assert.Equal(t, strconv.Itoa(nsinit.Protocol), strings.TrimSpace(string(out)))
		})
	}
}

func TestInitProgramIsCheckedBeforeUse(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode))
		require.NoError(t, os.Chmod(p, mode)) // past the umask
		return p
	}
	tests := []struct {
		name    string
		path    string
		refusal string // empty: used
	}{
		{"built from this tree", builtInitProgram(t), ""},
		// echo answers its arguments: no number, as an init of another
		// protocol answers a number that is not this build's.
		{"another answer", copyOf(t, "/bin/echo", filepath.Join(dir, "echo")), `speaks init protocol "-protocol"`},
		// A script cannot run from a descriptor closed on exec.
		{"a script", script("mute", "echo "+strconv.Itoa(nsinit.Protocol), 0o755), "ask its protocol"},
		{"writable by others", script("open", "echo "+strconv.Itoa(nsinit.Protocol), 0o777), "writable by users other than its owner"},
		{"a directory", dir, "not a regular file"},
		{"owned by another user", ownedByNobody(t, builtInitProgram(t)), "neither this user nor root"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.path == "" {
				t.Skip("only root can give a file to another user")
			}
			r := New(WithInitProgram(tt.path))
			if tt.refusal == "" {
				assert.NoError(t, r.InitFallback())
				assert.Equal(t, tt.path, r.InitProgram())
				return
			}
			require.Error(t, r.InitFallback())
			assert.Contains(t, r.InitFallback().Error(), tt.refusal)
			assert.Equal(t, selfInit.file, r.InitProgram(), "a refused program leaves the runtime on its own")
		})
	}
}

// ownedByNobody gives path to uid 65534, or returns "" when this user
// cannot.
func ownedByNobody(t *testing.T, path string) string {
	t.Helper()
	if err := os.Lchown(path, 65534, 65534); err != nil {
		return ""
	}
	return path
}

func copyOf(t *testing.T, src, dst string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, data, 0o755))
	return dst
}

// TestWorkloadRunsUnderTheInitProgram runs a workload under sandplane-init,
// replaces the file once checked, and ends the sandbox: the init is the
// program that was checked, and nothing outlives it.
func TestWorkloadRunsUnderTheInitProgram(t *testing.T) {
	path := builtInitProgram(t)
	r := New(WithInitProgram(path))
	require.NoError(t, r.InitFallback())
	requirePIDNamespaces(t, r)
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nexit 1\n"), 0o755))

	spec, h := startEscaping(t, r, "", "cold")

	exe, err := os.Readlink(procRoot + "/" + strconv.Itoa(h.PID) + "/exe")
	require.NoError(t, err)
	assert.Equal(t, path+" (deleted)", exe, "PID 1 runs the checked program, not the file now at its path")
	require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
	assert.Empty(t, marked(spec.SandboxID), "processes of the sandbox outlived it")
	assert.True(t, portFree(spec.Port), "the sandbox's port is still taken")
}

func TestIsolatedWorkloadRunsUnderTheInitProgram(t *testing.T) {
	path := builtInitProgram(t)
	r := isolatedRuntime(t, WithInitProgram(path))
	require.NoError(t, r.InitFallback())
	py := python3(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	spec := isolatedSpec(t, "", `echo "inner init: $(wc -c < /proc/1/exe) bytes"; exec "$PY" -m http.server "$PORT" --bind 127.0.0.1`)
	spec.Env["PY"] = py
	h := start(t, r, spec)
	t.Cleanup(func() { killMarked(spec.SandboxID) })
	waitForLog(t, r, h, spec.Dir, fmt.Sprintf("inner init: %d bytes", fi.Size()))
	waitServing(t, spec.Port)
	exe, err := os.Readlink(procRoot + "/" + strconv.Itoa(h.PID) + "/exe")
	require.NoError(t, err)
	assert.Equal(t, path, exe, "the outer init is the init program")
	require.NoError(t, r.Stop(testCtx(t), h, hangGuard))
	assert.Empty(t, marked(spec.SandboxID), "processes of the sandbox outlived it")
}
