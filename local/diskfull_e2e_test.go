package local_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
)

// smallDisk mounts a tmpfs of size at dir in a mount namespace of its own,
// held by a process that ends with t, and returns the command prefix that
// runs a program in that namespace. Nothing outside the namespace sees
// the mount, and it goes with the holder.
func smallDisk(t *testing.T, dir, size string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs as the daemon's root needs root (CI runs as root)")
	}
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s (util-linux) is not installed", tool)
		}
	}
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs -o size="$2" tmpfs "$1" && echo ready && exec sleep 3600`, "sh", dir, size)
	out, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the tmpfs was not mounted")
	require.Equal(t, "ready\n", line)
	return []string{"nsenter", "-t", strconv.Itoa(holder.Process.Pid), "-m", "--"}
}

// A full disk under the registry: the create that cannot be written answers
// resource_exhausted saying what to free, leaves nothing that a restart
// brings back, and the daemon creates again once there is room.
func TestRegistryOnAFullDisk(t *testing.T) {
	root := t.TempDir()
	in := smallDisk(t, root, "8m")
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	d := testdaemon.Start(t, testdaemon.Options{Root: root, Wrap: in})
	ctx := context.Background()
	kept, err := d.P.Create(ctx, provider.CreateRequest{Name: "kept", AutoStopInterval: ptr(0)})
	require.NoError(t, err)

	fill := exec.Command(in[0], append(in[1:], "sh", "-c", `cat /dev/zero > "$1/filler"`, "sh", root)...)
	out, err := fill.CombinedOutput()
	require.Error(t, err, "filling the disk stops at its end")
	require.Contains(t, string(out), "No space left on device")

	_, err = d.P.Create(ctx, provider.CreateRequest{Name: "full"})
	require.Error(t, err)
	assert.Equal(t, provider.ResourceExhausted, provider.Code(err), "%v", err)
	assert.Contains(t, provider.Message(err), "the disk that holds the daemon's root is full; free space there")

	d = d.Restart(t)
	_, err = d.P.Get(ctx, "full")
	assert.Equal(t, provider.NotFound, provider.Code(err), "the failed create left nothing behind: %v", err)
	got, err := d.P.Get(ctx, kept.ID)
	require.NoError(t, err, "what was written before is whole")
	assert.Equal(t, kept.ID, got.ID)

	free := exec.Command(in[0], append(in[1:], "rm", root+"/filler")...)
	out, err = free.CombinedOutput()
	require.NoError(t, err, "%s", out)
	again, err := d.P.Create(ctx, provider.CreateRequest{Name: "full", AutoStopInterval: ptr(0)})
	require.NoError(t, err, "the daemon creates again once there is room")
	assert.Equal(t, "full", again.ID)
	for _, id := range []string{kept.ID, again.ID} {
		require.NoError(t, d.P.Delete(ctx, id))
	}
}
