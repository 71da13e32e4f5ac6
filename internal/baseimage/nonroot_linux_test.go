package baseimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// nonRootHelperEnv makes TestBuildWithoutRootFailsNamingTheFix, re-run by
// itself as another user, print what Build answers instead of testing.
const nonRootHelperEnv = "SANDPLANE_BASEIMAGE_NONROOT_HELPER"

// nobody is the user the test runs Build as.
const nobody = 65534

func TestBuildWithoutRootFailsNamingTheFix(t *testing.T) {
	if dir := os.Getenv(nonRootHelperEnv); dir != "" {
		_, err := Build(context.Background(), newFakeEngine(), Options{TempDir: dir})
		fmt.Printf("code=%s\nmessage=%s\n", provider.Code(err), provider.Message(err))
		return
	}
	if os.Geteuid() != 0 {
		// Already not root: ask directly.
		_, err := Build(context.Background(), newFakeEngine(), Options{TempDir: t.TempDir()})
		assert.Equal(t, provider.PreflightFailed, provider.Code(err))
		assert.Contains(t, provider.Message(err), "sudo sandplane image build")
		return
	}
	// As root, run a copy of this test binary as nobody, from a directory
	// nobody can reach and write to (the test's own are root's, 0700).
	dir, err := os.MkdirTemp("", "baseimage-nonroot-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	bin := filepath.Join(dir, "baseimage.test")
	copyExecutable(t, bin)

	cmd := exec.Command(bin, "-test.run", "^TestBuildWithoutRootFailsNamingTheFix$")
	cmd.Env = []string{nonRootHelperEnv + "=" + dir, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "code="+string(provider.PreflightFailed))
	assert.Contains(t, string(out), "needs root")
	assert.Contains(t, string(out), "sudo sandplane image build")
	assert.Contains(t, string(out), "name another image in the snapshot")
}

func copyExecutable(t *testing.T, to string) {
	self, err := os.Executable()
	require.NoError(t, err)
	src, err := os.Open(self)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
