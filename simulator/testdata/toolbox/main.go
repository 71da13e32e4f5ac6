// Command toolbox is the workload the simulator's runtime tests spawn: the
// project's toolbox server on $PORT, as `sandplane toolbox` runs it.
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
	// Loopback by default; the docker test's image sets TOOLBOX_HOST=0.0.0.0,
	// because the engine's port proxy cannot reach a container's loopback.
	host := os.Getenv("TOOLBOX_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	err = toolbox.Serve(ctx, net.JoinHostPort(host, port), toolbox.Options{
		WorkDir:   wd,
		Version:   "sim-test",
		SandboxID: os.Getenv("DAYTONA_SANDBOX_ID"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolbox:", err)
		os.Exit(1)
	}
}
