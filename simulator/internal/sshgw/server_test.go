package sshgw_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/simulator/internal/sshgw"
	"github.com/sandplane/sandplane/toolbox"
	"github.com/sandplane/sandplane/toolbox/client"
)

// opener opens one token, to a real toolbox, and counts each sandbox's
// activity.
type opener struct {
	token   string
	sandbox sshgw.Sandbox

	mu      sync.Mutex
	touches int
	touched chan struct{}
}

func (o *opener) Open(_ context.Context, token string) (sshgw.Sandbox, error) {
	if token != o.token {
		return sshgw.Sandbox{}, provider.Errorf(provider.PermissionDenied, "this SSH access token is unknown, revoked or expired")
	}
	return o.sandbox, nil
}

func (o *opener) Touch(_ context.Context, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id == o.sandbox.ID {
		o.touches++
	}
	select {
	case o.touched <- struct{}{}:
	default:
	}
}

func (o *opener) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.touches
}

type gateway struct {
	addr   string
	opener *opener
	// port is a port of the sandbox, served by an HTTP server that answers
	// "port <n>".
	port int
}

// newGateway serves a gateway on loopback in front of a real toolbox.
func newGateway(t *testing.T, clk clock.Clock) *gateway {
	t.Helper()
	dir := t.TempDir()
	h := toolbox.NewHandler(toolbox.Options{WorkDir: dir, HomeDir: dir})
	tb := httptest.NewServer(h)
	t.Cleanup(func() {
		tb.Close()
		h.(io.Closer).Close()
	})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "port %s", r.Host)
	}))
	t.Cleanup(app.Close)
	_, p, _ := net.SplitHostPort(app.Listener.Addr().String())
	appPort, _ := strconv.Atoi(p)

	o := &opener{token: "tok-" + strings.Repeat("a", 20), touched: make(chan struct{}, 16)}
	o.sandbox = sshgw.Sandbox{
		ID:      "sb-1",
		Toolbox: client.New(tb.URL, nil),
		Dial: func(ctx context.Context, port int) (net.Conn, error) {
			if port != appPort {
				return nil, provider.Errorf(provider.FailedPrecondition, "no process of the sandbox listens on port %d", port)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", app.Listener.Addr().String())
		},
	}
	srv, err := sshgw.New(sshgw.Config{Opener: o, Clock: clk, Logf: t.Logf})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-served)
	})
	return &gateway{addr: ln.Addr().String(), opener: o, port: appPort}
}

// openSSH runs the OpenSSH client against g as user, with stdin, and
// returns its output and exit code.
func (g *gateway) openSSH(t *testing.T, user, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("the OpenSSH client is not installed: apt-get install openssh-client")
	}
	host, port, _ := net.SplitHostPort(g.addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all := append([]string{"-p", port, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-F", "/dev/null", user + "@" + host}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err = cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), code
}

func TestOpenSSHClient(t *testing.T) {
	g := newGateway(t, clock.Real())
	tok := g.opener.token
	for _, tc := range []struct {
		name, user, stdin string
		args              []string
		stdout            string
		stderr            string
		code              int
	}{
		{name: "exec keeps the streams and the exit status apart", user: tok,
			args: []string{"echo out; echo err >&2; exit 3"}, stdout: "out\n", stderr: "err\n", code: 3},
		{name: "exec reads stdin to its end", user: tok, stdin: "a\nb\nc\n",
			args: []string{"wc -l"}, stdout: "3\n"},
		{name: "a shell without a terminal reads its commands from stdin", user: tok, stdin: "echo from-shell\nexit 4\n",
			args: []string{"-T"}, stdout: "from-shell\n", code: 4},
		{name: "a terminal on request", user: tok,
			args: []string{"-tt", "tty; echo term=$TERM"}, stdout: "/dev/pts/"},
		{name: "stdio forwarding reaches the sandbox's port", user: tok, stdin: "GET / HTTP/1.0\r\nHost: app\r\n\r\n",
			args: []string{"-W", "localhost:" + strconv.Itoa(g.port)}, stdout: "port app"},
		{name: "forwarding elsewhere is refused", user: tok, args: []string{"-W", "example.com:80"},
			stderr: "only the sandbox's own ports", code: 255},
		{name: "an unknown token is refused with what to do", user: "not-a-token", args: []string{"true"},
			stderr: "create a new one with `sandbox.createSshAccess()`", code: 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := g.openSSH(t, tc.user, tc.stdin, tc.args...)
			assert.Equal(t, tc.code, code, "stdout %q, stderr %q", stdout, stderr)
			if strings.HasSuffix(tc.stdout, "\n") {
				assert.Equal(t, tc.stdout, stdout)
			} else {
				assert.Contains(t, stdout, tc.stdout)
			}
			if tc.stderr != "" {
				assert.Contains(t, stderr, tc.stderr)
			}
		})
	}
}

func TestTerminalGetsTheClientsEnv(t *testing.T) {
	g := newGateway(t, clock.Real())
	stdout, stderr, code := g.openSSH(t, g.opener.token, "", "-tt", "-o", "SetEnv=GREETING=hello", "echo $GREETING")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "hello")
}

// A connection counts as its sandbox's activity when it opens and then
// every 45 s while it stays open, and no more once it closes.
func TestConnectionIsActivity(t *testing.T) {
	clk := clocktest.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	g := newGateway(t, clk)
	conn, err := ssh.Dial("tcp", g.addr, &ssh.ClientConfig{
		User: g.opener.token, HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: time.Minute,
	})
	require.NoError(t, err)
	<-g.opener.touched
	assert.Equal(t, 1, g.opener.count(), "on connect")
	ctx := context.Background()
	require.NoError(t, clk.BlockUntilWaiters(ctx, 1))
	for i := 2; i <= 3; i++ {
		clk.Advance(sshgw.ActivityInterval)
		<-g.opener.touched
		assert.Equal(t, i, g.opener.count(), "every 45 s while open")
	}
	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { return clk.Waiters() == 0 }, 10*time.Second, 10*time.Millisecond, "the ticker stops with the connection")
	clk.Advance(10 * sshgw.ActivityInterval)
	assert.Equal(t, 3, g.opener.count(), "nothing once closed")
}

// A Go client sees the exit status and a window change reaches the
// terminal.
func TestWindowChangeResizesTheTerminal(t *testing.T) {
	g := newGateway(t, clock.Real())
	conn, err := ssh.Dial("tcp", g.addr, &ssh.ClientConfig{
		User: g.opener.token, HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: time.Minute,
	})
	require.NoError(t, err)
	defer conn.Close()
	sess, err := conn.NewSession()
	require.NoError(t, err)
	defer sess.Close()
	require.NoError(t, sess.RequestPty("xterm", 24, 80, ssh.TerminalModes{}))
	stdin, err := sess.StdinPipe()
	require.NoError(t, err)
	var out syncBuffer
	sess.Stdout = &out
	require.NoError(t, sess.Shell())
	_, err = io.WriteString(stdin, "stty size\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "24 80") }, 30*time.Second, 20*time.Millisecond, out.String())
	require.NoError(t, sess.WindowChange(50, 132))
	require.Eventually(t, func() bool {
		_, _ = io.WriteString(stdin, "stty size\n")
		return strings.Contains(out.String(), "50 132")
	}, 30*time.Second, 200*time.Millisecond, out.String())
	_, err = io.WriteString(stdin, "exit 7\n")
	require.NoError(t, err)
	var exit *ssh.ExitError
	require.ErrorAs(t, sess.Wait(), &exit)
	assert.Equal(t, 7, exit.ExitStatus())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
