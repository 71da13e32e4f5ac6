// Command toolbox is the workload of the simulator's docker test: the
// project's toolbox server on $PORT of every interface, because the engine's
// port proxy cannot reach a server bound to the container's loopback.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandplane/sandplane/toolbox"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		fmt.Fprintln(os.Stderr, "toolbox: PORT is not set")
		os.Exit(2)
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolbox:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = toolbox.Serve(ctx, net.JoinHostPort("0.0.0.0", port), toolbox.Options{
		WorkDir:   wd,
		Version:   "sim-docker-test",
		SandboxID: os.Getenv("DAYTONA_SANDBOX_ID"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolbox:", err)
		os.Exit(1)
	}
}
