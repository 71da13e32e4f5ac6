//go:build !unix

package toolbox

import (
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

func setSession(*exec.Cmd) {}

func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}

func killGroup(int) {}
