package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/sandplane/sandplane/internal/netguard"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Listen binds addr, which must be a loopback address
// (netguard.ListenLoopback). When the port is
// taken it says by whom: another sandplane daemon, or a squatter.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	loopback, err := netguard.ListenLoopback(addr)
	if err != nil {
		return nil, provider.Errorf(provider.InvalidArgument, "listen address %q: %w", addr, err)
	}
	if !loopback {
		return nil, provider.Errorf(provider.InvalidArgument, "listen address %q is not loopback: the daemon has no authentication strong enough for a network; use 127.0.0.1", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, provider.Errorf(provider.Unavailable, "listen on %s: %w", addr, err)
	}
	if info, perr := probe(ctx, addr); perr == nil && info.Name == "sandplane" {
		// A daemon with a token tells a probe only its version.
		who := "version " + info.Version
		if info.PID != 0 {
			who = fmt.Sprintf("pid %d, root %s, %s", info.PID, info.RootDir, who)
		}
		return nil, provider.Errorf(provider.Unavailable, "a sandplane daemon (%s) already serves %s: use it, or stop it first", who, addr)
	}
	return nil, provider.Errorf(provider.Unavailable, "%s is taken by something that is not a sandplane daemon: stop it or pick another address with --listen", addr)
}

func probe(ctx context.Context, addr string) (*provider.Info, error) {
	ctx, cancel := clock.WithTimeout(ctx, clock.Real(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/info", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var info provider.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, err
	}
	return &info, nil
}
