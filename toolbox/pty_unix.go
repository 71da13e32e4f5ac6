//go:build unix

package toolbox

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
)

// startPTY starts cmd as the leader of a new session whose controlling
// terminal is a new PTY of the given size, and returns the PTY's master.
func startPTY(cmd *exec.Cmd, cols, rows int) (*os.File, error) {
	return pty.StartWithAttrs(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)},
		&syscall.SysProcAttr{Setsid: true, Setctty: true})
}

// setPTYSize resizes the terminal; the kernel signals SIGWINCH to its
// foreground process group.
func setPTYSize(ptmx *os.File, cols, rows int) error {
	return pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
}
