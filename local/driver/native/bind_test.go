package native

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// missingHomeTarget is a directory under /home that does not exist on this
// machine, so that binding there must make it in a copy of /home.
func missingHomeTarget(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/home"); err != nil {
		t.Skipf("this machine has no /home to bind under: %v", err)
	}
	raw := make([]byte, 6)
	_, _ = rand.Read(raw)
	p := "/home/sandplane-bind-" + hex.EncodeToString(raw)
	_, err := os.Lstat(p)
	require.True(t, os.IsNotExist(err), "%s exists", p)
	return p
}

func TestBindsShowADirectoryElsewhereWithoutTouchingTheHost(t *testing.T) {
	for _, how := range starts {
		for _, userNS := range []bool{false, true} {
			t.Run(how+"/userns="+strconv.FormatBool(userNS), func(t *testing.T) {
				r := nsDriver(t, userNS)
				require.True(t, r.CanBind(), "a PID-namespace runtime with its own /proc binds")
				before, err := os.ReadDir("/home")
				require.NoError(t, err)
				target := missingHomeTarget(t)
				spec := newSpec(t, "", "sh", "-c", `pwd; echo hi > made-here; ls -a /home`)
				src := filepath.Join(spec.Dir, "home")
				require.NoError(t, os.Mkdir(src, 0o700))
				spec.Binds = []driver.Bind{{Source: src, Target: target}}
				spec.WorkDir = target

				out := runAs(t, r, spec, how)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				assert.Equal(t, target, lines[0], "the workload starts in the bound directory")
				for _, e := range before {
					assert.Contains(t, lines, e.Name(), "what /home held stays visible")
				}
				assert.Contains(t, lines, filepath.Base(target))
				got, err := os.ReadFile(filepath.Join(src, "made-here"))
				require.NoError(t, err, "the file lands in the source directory")
				assert.Equal(t, "hi\n", string(got))
				_, err = os.Lstat(target)
				assert.True(t, os.IsNotExist(err), "the host's %s was made: %v", target, err)
				after, err := os.ReadDir("/home")
				require.NoError(t, err)
				assert.Equal(t, len(before), len(after), "the host's /home changed")
			})
		}
	}
}

func TestBindsOnAnExistingDirectoryLeaveItAlone(t *testing.T) {
	for _, how := range starts {
		t.Run(how, func(t *testing.T) {
			r := New()
			requirePIDNamespaces(t, r)
			target := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(target, "hosts-own"), []byte("x"), 0o600))
			spec := newSpec(t, "", "sh", "-c", `ls; touch made-here`)
			src := filepath.Join(spec.Dir, "home")
			require.NoError(t, os.Mkdir(src, 0o700))
			spec.Binds = []driver.Bind{{Source: src, Target: target}}
			spec.WorkDir = target

			out := runAs(t, r, spec, how)
			assert.Empty(t, strings.TrimSpace(out), "the workload sees the source, not the host's directory")
			assert.FileExists(t, filepath.Join(src, "made-here"))
			assert.NoFileExists(t, filepath.Join(target, "made-here"))
			assert.FileExists(t, filepath.Join(target, "hosts-own"))
		})
	}
}

func TestBindsAreRefusedWithoutAMountNamespace(t *testing.T) {
	r := New(WithContainment(ContainProcessGroup))
	assert.False(t, r.CanBind())
	spec := newSpec(t, "", "true")
	spec.Binds = []driver.Bind{{Source: spec.Dir, Target: "/home/daytona"}}
	err := r.Preflight(testCtx(t), spec)
	require.Error(t, err)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err))
	_, err = r.Start(testCtx(t), spec)
	assert.Equal(t, provider.PreflightFailed, provider.Code(err))
}
