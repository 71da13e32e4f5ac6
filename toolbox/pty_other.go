//go:build !unix

package toolbox

import (
	"errors"
	"os"
	"os/exec"
)

func startPTY(*exec.Cmd, int, int) (*os.File, error) {
	return nil, errors.New("pseudo-terminals are not supported on this platform")
}

func setPTYSize(*os.File, int, int) error {
	return errors.New("pseudo-terminals are not supported on this platform")
}
