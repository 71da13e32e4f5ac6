package sshgw

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/client"
)

// ActivityInterval is how often an open connection counts as activity of
// its sandbox, after the first count when it opens: Daytona's proxies bump
// activity at most every 45 s too, so an open session keeps a sandbox with
// any auto-stop interval alive.
const ActivityInterval = 45 * time.Second

// handshakeTimeout bounds the time a connection may take to authenticate,
// so that connections that never do hold nothing for long.
const handshakeTimeout = 30 * time.Second

// Sandbox is what an access token opens.
type Sandbox struct {
	// ID is the sandbox's id, for Touch.
	ID string
	// Toolbox is the client of the sandbox's toolbox.
	Toolbox *client.Client
	// Dial connects to port of the sandbox, only ever to a process of it;
	// nil refuses port forwarding.
	Dial func(ctx context.Context, port int) (net.Conn, error)
}

// Opener resolves access tokens. It is safe for concurrent use.
type Opener interface {
	// Open answers the sandbox token opens. permission_denied: the token is
	// unknown, revoked or expired; failed_precondition: its sandbox is not
	// started. The error's message is shown to the SSH user.
	Open(ctx context.Context, token string) (Sandbox, error)
	// Touch counts as activity of the sandbox; errors are the Opener's.
	Touch(ctx context.Context, sandboxID string)
}

// Config configures a Server.
type Config struct {
	Opener Opener
	// Clock times the activity counts and the handshake bound; nil is the
	// real clock.
	Clock clock.Clock
	// ActivityInterval is how often an open connection counts as activity
	// after it opens; 0 is the package's ActivityInterval. A simulator
	// whose minute is shorter shrinks it alike.
	ActivityInterval time.Duration
	// HostKey is the server's key; nil makes a new ed25519 key.
	HostKey ssh.Signer
	// Logf logs a connection's failures; nil discards them.
	Logf func(format string, args ...any)
}

// Server is an SSH gateway. Serve it on any number of listeners; Close ends
// them and every connection.
type Server struct {
	cfg    Config
	ssh    *ssh.ServerConfig
	ctx    context.Context
	cancel context.CancelFunc
	// opened holds the sandbox of each connection that authenticated, by
	// session id, until the connection takes it.
	opened sync.Map

	mu     sync.Mutex
	closed bool
	open   map[io.Closer]struct{} // listeners and connections
	wg     sync.WaitGroup
}

// New returns a gateway that opens what cfg.Opener resolves.
func New(cfg Config) (*Server, error) {
	if cfg.Opener == nil {
		return nil, errors.New("sshgw: an Opener is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.ActivityInterval <= 0 {
		cfg.ActivityInterval = ActivityInterval
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.HostKey == nil {
		key, err := newHostKey()
		if err != nil {
			return nil, err
		}
		cfg.HostKey = key
	}
	s := &Server{cfg: cfg, open: map[io.Closer]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ssh = s.serverConfig()
	return s, nil
}

func newHostKey() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshgw: make a host key: %w", err)
	}
	return ssh.NewSignerFromKey(priv)
}

// serverConfig authenticates by the user name alone, whatever method the
// client offers: the user name is the access token, so a password or a
// key would add nothing, and OpenSSH tries "none" first anyway.
func (s *Server) serverConfig() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		NoClientAuth:         true,
		NoClientAuthCallback: s.authenticate,
		PasswordCallback:     func(c ssh.ConnMetadata, _ []byte) (*ssh.Permissions, error) { return s.authenticate(c) },
		PublicKeyCallback:    func(c ssh.ConnMetadata, _ ssh.PublicKey) (*ssh.Permissions, error) { return s.authenticate(c) },
		ServerVersion:        "SSH-2.0-sandplane-sim",
	}
	cfg.AddHostKey(s.cfg.HostKey)
	return cfg
}

// HostKey is the server's public key, for a client's known_hosts.
func (s *Server) HostKey() ssh.PublicKey { return s.cfg.HostKey.PublicKey() }

// authenticate opens the token that is the connection's user name. A
// refusal reaches the user as a banner, since SSH carries no reason for a
// failed authentication.
func (s *Server) authenticate(c ssh.ConnMetadata) (*ssh.Permissions, error) {
	sb, err := s.cfg.Opener.Open(s.ctx, c.User())
	if err != nil {
		return nil, &ssh.BannerError{Err: err, Message: refusal(err)}
	}
	s.opened.Store(string(c.SessionID()), sb)
	return &ssh.Permissions{}, nil
}

// refusal is what a refused user reads.
func refusal(err error) string {
	msg := provider.Message(err)
	if provider.Code(err) == provider.PermissionDenied {
		msg += "; create a new one with `sandbox.createSshAccess()` (POST /api/sandbox/{id}/ssh-access) and use its token as the user name"
	}
	return "sandplane sim: " + msg + "\r\n"
}

// Serve accepts connections on ln until Close; it returns nil then, and
// the listener's error if it fails first.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln) {
		ln.Close()
		return nil
	}
	defer s.untrack(ln)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !s.track(nc) {
			nc.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(nc)
			s.serveConn(nc)
		}()
	}
}

// track adds c (a listener or a connection) to what Close closes, unless
// the server is closed already.
func (s *Server) track(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.open[c] = struct{}{}
	return true
}

func (s *Server) untrack(c io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, c)
}

// Close stops every listener and connection, and waits for what they ran
// to end (a command in a sandbox is ended through its toolbox).
func (s *Server) Close() error {
	s.cancel() // first, so that Serve sees its listener's end as a close
	s.mu.Lock()
	s.closed = true
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// serveConn authenticates nc, then serves its channels while it is open.
func (s *Server) serveConn(nc net.Conn) {
	defer nc.Close()
	bound := s.cfg.Clock.AfterFunc(handshakeTimeout, func() { nc.Close() })
	sconn, chans, reqs, err := ssh.NewServerConn(nc, s.ssh)
	bound.Stop()
	if err != nil {
		s.cfg.Logf("ssh gateway: %s: %v", nc.RemoteAddr(), err)
		return
	}
	defer sconn.Close()
	v, _ := s.opened.LoadAndDelete(string(sconn.SessionID()))
	sb := v.(Sandbox)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	var running sync.WaitGroup
	defer running.Wait()
	running.Add(2)
	go func() { defer running.Done(); s.touchWhileOpen(ctx, sb.ID) }()
	go func() { defer running.Done(); ssh.DiscardRequests(reqs) }()
	for nch := range chans {
		running.Add(1)
		go func() {
			defer running.Done()
			s.channel(ctx, sb, nch)
		}()
	}
	cancel()
}

// touchWhileOpen counts the connection as activity now and every
// cfg.ActivityInterval until ctx ends.
func (s *Server) touchWhileOpen(ctx context.Context, id string) {
	s.cfg.Opener.Touch(ctx, id)
	t := s.cfg.Clock.NewTicker(s.cfg.ActivityInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.cfg.Opener.Touch(ctx, id)
		}
	}
}

// channel serves one channel the client opened.
func (s *Server) channel(ctx context.Context, sb Sandbox, nch ssh.NewChannel) {
	switch nch.ChannelType() {
	case "session":
		s.session(ctx, sb, nch)
	case "direct-tcpip":
		s.forward(ctx, sb, nch)
	default:
		_ = nch.Reject(ssh.UnknownChannelType, "the gateway opens sessions and forwards to the sandbox's ports only")
	}
}
