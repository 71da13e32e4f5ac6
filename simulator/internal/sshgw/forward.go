package sshgw

import (
	"context"
	"io"
	"net"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/sandplane/sandplane/provider"
)

// directTCPIP is RFC 4254's direct-tcpip payload (ssh -L).
type directTCPIP struct {
	Host     string
	Port     uint32
	OrigHost string
	OrigPort uint32
}

// forward serves ssh -L: a connection to one of the sandbox's own ports.
// Only the sandbox's loopback is a destination, as seen from inside it,
// so the gateway reaches nothing the sandbox's own processes do not serve.
func (s *Server) forward(ctx context.Context, sb Sandbox, nch ssh.NewChannel) {
	var d directTCPIP
	if err := ssh.Unmarshal(nch.ExtraData(), &d); err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	if !sandboxLocal(d.Host) || d.Port == 0 || d.Port > 65535 || sb.Dial == nil {
		_ = nch.Reject(ssh.Prohibited, "only the sandbox's own ports can be forwarded: -L LOCAL:localhost:PORT")
		return
	}
	up, err := sb.Dial(ctx, int(d.Port))
	if err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, provider.Message(err))
		return
	}
	defer up.Close()
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	splice(ctx, ch, up)
}

// sandboxLocal says whether host names the sandbox itself.
func sandboxLocal(host string) bool {
	switch host {
	case "localhost", "127.0.0.1", "::1", "0.0.0.0", "":
		return true
	}
	return false
}

// splice copies both ways until both directions have ended or ctx ends,
// passing each direction's end on as a half-close.
func splice(ctx context.Context, ch ssh.Channel, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, ch)
		if c, ok := up.(interface{ CloseWrite() error }); ok {
			_ = c.CloseWrite()
		}
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(ch, up)
		_ = ch.CloseWrite()
	}()
	stop := context.AfterFunc(ctx, func() {
		ch.Close()
		up.Close()
	})
	defer stop()
	wg.Wait()
}
