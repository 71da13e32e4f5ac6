package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/toolbox"
)

func newToolboxCmd() *cobra.Command {
	var listen, host, root string
	cmd := &cobra.Command{
		Use:   "toolbox",
		Short: "Serve the in-sandbox toolbox API (the Daytona toolbox subset the SDKs use)",
		Long: `Serve the in-sandbox toolbox API: process execution, sessions and files, as
Daytona's toolbox daemon answers them, plus GET /api/info.

It listens on --listen, or on $PORT of --host (127.0.0.1) when --listen is not
given; in a container, --host 0.0.0.0 lets the published port reach it. The
working directory is the current directory. SIGTERM or SIGINT shut it down
gracefully and it exits 0.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, err := toolboxListenAddr(listen, os.Getenv("PORT"))
			if err != nil {
				return err
			}
			if listen == "" {
				_, port, _ := net.SplitHostPort(addr)
				addr = net.JoinHostPort(host, port)
			}
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("toolbox: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return toolbox.Serve(ctx, addr, toolbox.Options{
				WorkDir:   wd,
				Version:   versionString(),
				SandboxID: os.Getenv("SANDPLANE_SANDBOX_ID"),
				Root:      root,
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default --host and $PORT)")
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "interface to listen on at $PORT when --listen is not given")
	cmd.MarkFlagsMutuallyExclusive("listen", "host")
	cmd.Flags().StringVar(&root, "root", "", "confine the file endpoints to this directory")
	return cmd
}

func toolboxListenAddr(listen, port string) (string, error) {
	if listen != "" {
		return listen, nil
	}
	if port == "" {
		return "", errors.New("toolbox: no --listen given and PORT is not set")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("toolbox: PORT %q is not a port number", port)
	}
	return net.JoinHostPort("127.0.0.1", port), nil
}

// toolboxVersion is the module version stamped into the binary, or "dev".
func toolboxVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
