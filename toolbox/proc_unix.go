//go:build unix

package toolbox

import (
	"os/exec"
	"syscall"
)

func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// setSession makes the command the leader of a terminal session (and of a
// process group) of its own, without a controlling terminal.
func setSession(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killProcessGroup kills the command and everything it started that stayed
// in its group. The leader is not reaped yet, so the group id is still ours.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		cmd.Process.Kill()
	}
}

// killGroup kills the process group pgid, if any is left.
func killGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }
