package backend

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadOwner is the owner label of a process of this boot that has ended.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	label := OwnerOf(cmd.Process.Pid)
	require.NotEmpty(t, label)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	return label
}

func TestOwnerGone(t *testing.T) {
	self := OwnerLabel()
	require.NotEmpty(t, self)
	boot := bootID()
	for _, tc := range []struct {
		name  string
		label string
		gone  bool
	}{
		{"this process", self, false},
		{"a process that ended", deadOwner(t), true},
		{"its pid, another start", fmt.Sprintf("%s/%d/1", boot, os.Getpid()), true},
		{"another boot", "another-boot/1/1", false},
		{"not a label", "x", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.gone, ownerGone(tc.label, boot)) })
	}
	assert.False(t, ownerGone(deadOwner(t), ""), "without this boot's id, nothing is known gone")
}
