package toolbox

import (
	"io"
	"syscall"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// hangUpGrace is how long a hung-up terminal session has to end by itself
// before what is left of it is killed: a shell runs its exit traps and
// hangs up its jobs in far less.
const hangUpGrace = 2 * time.Second

// hangUp ends a terminal session as closing its terminal would: SIGHUP to
// each process of tree, so that shells run their exit traps and release
// what they hold (an editor its swap file, a version manager its lock)
// rather than leave it behind as SIGKILL would, and then the end of the
// shell's input, unless input is nil. It returns once exited closes or
// hangUpGrace has passed on clk; the caller kills what is left.
//
// The end of input is for a shell that took the SIGHUP in the instant
// before it blocked reading its next command: it sleeps through the signal
// until that read returns. It comes after the signal, never before: a shell
// that sees the end of its input first runs its exit trap, and a SIGHUP
// landing then would cut the trap short.
func hangUp(tree []treeMember, input io.Closer, exited <-chan struct{}, clk clock.Clock) {
	if len(tree) == 0 {
		return
	}
	signalMembers(tree, syscall.SIGHUP)
	if input != nil {
		input.Close()
	}
	t := clk.NewTimer(hangUpGrace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C():
	}
}
