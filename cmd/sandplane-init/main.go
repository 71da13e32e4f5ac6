// Command sandplane-init is the init of each native sandbox: PID 1 of the
// sandbox's own PID namespace, started by the sandplane daemon, never by
// hand (see package nsinit). sandplane re-executes itself as that init when
// this program is not installed beside it; this one does the same work, and
// starts in a fraction of the time because it links nothing else.
package main

import (
	"fmt"
	"os"

	"github.com/sandplane/sandplane/local/driver/native/nsinit"
)

func main() {
	nsinit.Main() // runs the init and exits when started as one
	fmt.Fprintf(os.Stderr, "%s is the init of native sandboxes, which the sandplane daemon starts; it is not run by hand\n", os.Args[0])
	os.Exit(2)
}
