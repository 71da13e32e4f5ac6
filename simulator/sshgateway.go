package simulator

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator/internal/sshgw"
	"github.com/sandplane/sandplane/toolbox/client"
)

// sshOpener opens the sandbox of an SSH access token for the gateway
// (internal/sshgw): the token must be live and its sandbox started, or
// paused, which a connection resumes as toolbox traffic does.
type sshOpener struct{ *Simulator }

// newSSHGateway is the simulator's gateway; it serves once ServeSSH is
// given a listener.
func newSSHGateway(s *Simulator) (*sshgw.Server, error) {
	every := s.cfg.scaled(sshgw.ActivityInterval)
	return sshgw.New(sshgw.Config{Opener: sshOpener{s}, Clock: s.clk, ActivityInterval: every, Logf: func(format string, args ...any) {
		s.cfg.Logger.Debug("ssh gateway", "error", provider.Errorf(provider.Unavailable, format, args...))
	}})
}

// ServeSSH serves the SSH gateway on ln until the simulator closes; from
// then on the sshCommand of a new SSH access names ln's port. A token of
// createSshAccess is the user name: `ssh -p PORT TOKEN@HOST` opens a shell
// in its sandbox, runs a command, or forwards to the sandbox's ports.
func (s *Simulator) ServeSSH(ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.sshPort.Store(int32(a.Port))
	}
	return s.gateway.Serve(ln)
}

// sshCommandPort is the port sshCommand names: the gateway's, or Daytona's
// when no gateway serves.
func (s extraAPI) sshCommandPort() (port int, served bool) {
	if p := s.sshPort.Load(); p != 0 {
		return int(p), true
	}
	return sshGatewayPort, false
}

// Open resolves token to its sandbox's toolbox and ports. permission_denied:
// unknown, revoked or expired; failed_precondition: not started.
func (o sshOpener) Open(ctx context.Context, token string) (sshgw.Sandbox, error) {
	sb, err := o.sandboxOf(token)
	if err != nil {
		return sshgw.Sandbox{}, err
	}
	proxyAPI{o.Simulator}.resumeForToolbox(ctx, sb)
	o.mu.Lock()
	state, id := sb.State, sb.ID
	o.mu.Unlock()
	if state != stStarted {
		return sshgw.Sandbox{}, provider.Errorf(provider.FailedPrecondition,
			"sandbox %s is %s: start it (sandbox.start()) and connect again", id, state)
	}
	route, err := o.backend.Toolbox(ctx, id)
	if err != nil {
		return sshgw.Sandbox{}, provider.Errorf(provider.Unavailable, "sandbox %s: reach its toolbox: %v", id, err)
	}
	header := http.Header{}
	if route.Token != "" {
		header.Set(previewTokenHeader, route.Token)
	}
	// The client polls the command's real processes, on the real clock: a
	// simulated clock (a test's, stopped) says nothing of when they print.
	tbx := client.New(route.URL.String(), header, client.WithClock(clock.Real()), client.WithHTTPClient(&http.Client{Transport: route.Transport}))
	return sshgw.Sandbox{ID: id, Toolbox: tbx, Dial: o.dialer(id)}, nil
}

// sandboxOf is the sandbox of a live token.
func (o sshOpener) sandboxOf(token string) (*sandbox, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.ssh[token]
	if a == nil || !o.clk.Now().Before(a.ExpiresAt) {
		return nil, provider.Errorf(provider.PermissionDenied, "this SSH access token is unknown, revoked or expired")
	}
	sb := o.rows.Get(a.SandboxID)
	if sb == nil || sb.gone {
		return nil, provider.Errorf(provider.PermissionDenied, "the sandbox of this SSH access token no longer exists")
	}
	return sb, nil
}

// dialer connects to a port of sandbox id where a process of it listens.
func (o sshOpener) dialer(id string) func(ctx context.Context, port int) (net.Conn, error) {
	return func(ctx context.Context, port int) (net.Conn, error) {
		route, err := o.backend.Port(ctx, id, port)
		if err != nil {
			if errors.Is(err, ErrNotListening) {
				return nil, provider.Errorf(provider.FailedPrecondition, "no process of sandbox %s listens on port %d", id, port)
			}
			return nil, provider.Errorf(provider.Unavailable, "sandbox %s port %d: %v", id, port, err)
		}
		return route.Dial(ctx)
	}
}

// Touch counts an open connection as activity of a started sandbox,
// through the API's throttle, as the proxy does.
func (o sshOpener) Touch(_ context.Context, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if sb := o.rows.Get(id); sb != nil && !sb.gone && sb.State == stStarted {
		o.eng.bumpLocked(sb)
	}
}
