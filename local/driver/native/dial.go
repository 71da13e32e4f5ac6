package native

import (
	"context"
	"net"
	"path/filepath"

	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
)

// DialPort connects from the host to port on the loopback of the isolated
// workload whose sandbox directory is dir: such a workload has a network of
// its own, and only its declared ports are forwarded to host ports, so a
// server it starts on any other port is reached only this way (a proxy's
// previews of every port, as Daytona's). unavailable when nothing listens
// there, or the workload in dir is not isolated (then it is on the host's
// network: dial the port there); ctx's error when it ends first.
func (r *Driver) DialPort(ctx context.Context, dir string, port int) (net.Conn, error) {
	if !validPort(port) {
		return nil, provider.Errorf(provider.InvalidArgument, "port %d is not one", port)
	}
	c, err := nsinit.DialPort(ctx, filepath.Join(dir, runDir, dialSocket), port)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, provider.Errorf(provider.Unavailable, "port %d of the isolated sandbox in %s: %v", port, dir, err)
	}
	return c, nil
}
