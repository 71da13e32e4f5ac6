package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/sshgw"
)

// sshGateway serves h's SSH gateway on loopback and returns its port.
func (h *harness) sshGateway() int {
	h.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(h.t, err)
	served := make(chan error, 1)
	go func() { served <- h.sim.ServeSSH(ln) }()
	h.t.Cleanup(func() {
		require.NoError(h.t, h.sim.Close())
		require.NoError(h.t, <-served)
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// sshAccess creates an SSH access token of sandbox id through the API.
func (h *harness) sshAccess(id string, minutes int) (token, command string) {
	h.t.Helper()
	code, body, hdr := h.raw("POST", "/api/sandbox/"+id+"/ssh-access?expiresInMinutes="+strconv.Itoa(minutes), nil)
	require.Equal(h.t, http.StatusOK, code, string(body))
	assert.Empty(h.t, hdr.Values(warningHeader), "a gateway serves")
	var a sshAccessDTO
	require.NoError(h.t, json.Unmarshal(body, &a))
	return a.Token, a.SSHCommand
}

// openSSH runs the OpenSSH client with the words of an sshCommand, then
// args, and returns its output and exit code.
func openSSH(t *testing.T, sshCommand, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("the OpenSSH client is not installed: apt-get install openssh-client")
	}
	words := strings.Fields(sshCommand)
	require.Equal(t, "ssh", words[0], sshCommand)
	all := append([]string{"-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes"}, words[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(all, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errOut.String(), 0
}

// The sshCommand an SSH access answers logs in with the OpenSSH client:
// the token opens its own sandbox, for commands, a terminal and its ports,
// and counts as activity; a revoked or expired token opens nothing.
func TestSSHGatewayWithOpenSSH(t *testing.T) {
	h := nativeHarness(t)
	port := h.sshGateway()
	sb := h.create(apiclient.CreateSandbox{Env: &map[string]string{"GREETING": "hello"}})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	other := h.create(apiclient.CreateSandbox{})
	token, command := h.sshAccess(sb.Id, 5)
	assert.Equal(t, "ssh -p "+strconv.Itoa(port)+" "+token+"@127.0.0.1", command)

	h.clk.Advance(time.Minute)
	stdout, stderr, code := openSSH(t, command, "", "echo $GREETING $DAYTONA_SANDBOX_ID; echo oops >&2; exit 5")
	assert.Equal(t, 5, code, stderr)
	assert.Equal(t, "hello "+sb.Id+"\n", stdout)
	assert.Contains(t, stderr, "oops\n")
	assert.True(t, h.lastActivityIsNow(sb.Id), "a connection is activity")

	stdout, stderr, code = openSSH(t, command, "", "-tt", "tty")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "/dev/pts/")

	// A server in the sandbox, reached through stdio forwarding (ssh -W).
	res := execOK(t, h, sb.Id, "PORT=8080 nohup "+toolboxBinary(t)+" >/dev/null 2>&1 &")
	require.Equal(t, 0, res.ExitCode, res.Result)
	require.Eventually(t, func() bool {
		stdout, _, code = openSSH(t, command, "GET /_test/headers HTTP/1.0\r\nHost: inside\r\n\r\n", "-W", "localhost:8080")
		return code == 0 && strings.Contains(stdout, "200 OK")
	}, 30*time.Second, 200*time.Millisecond, stdout)
	_, stderr, code = openSSH(t, command, "", "-W", "localhost:8081")
	assert.Equal(t, 255, code)
	assert.Contains(t, stderr, "no process of sandbox "+sb.Id+" listens on port 8081")

	// The token is its sandbox's alone, and ends when revoked or expired.
	otherToken, otherCommand := h.sshAccess(other.Id, 1)
	stdout, _, _ = openSSH(t, otherCommand, "", "echo $DAYTONA_SANDBOX_ID")
	assert.Equal(t, other.Id+"\n", stdout)
	code, body, _ := h.raw("DELETE", "/api/sandbox/"+sb.Id+"/ssh-access?token="+token, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	_, stderr, code = openSSH(t, command, "", "true")
	assert.Equal(t, 255, code)
	assert.Contains(t, stderr, "unknown, revoked or expired")
	h.clk.Advance(2 * time.Minute)
	_, stderr, code = openSSH(t, strings.Replace(command, token, otherToken, 1), "", "true")
	assert.Equal(t, 255, code, "expired")
	assert.Contains(t, stderr, "unknown, revoked or expired")
}

// execOK runs command in sandbox id through the toolbox proxy.
func execOK(t *testing.T, h *harness, id, command string) executeResponse {
	t.Helper()
	code, res, body := h.execute(id, map[string]any{"command": command})
	require.Equal(t, http.StatusOK, code, string(body))
	return res
}

// An open connection keeps bumping its sandbox's activity every 45 s (of
// the simulator's clock, shrunk by its minute), so an idle auto-stop
// never takes a sandbox someone is logged in to.
func TestSSHConnectionKeepsItsSandboxAlive(t *testing.T) {
	h := nativeHarness(t)
	h.sshGateway()
	sb := h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](1)})
	_, command := h.sshAccess(sb.Id, 60)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	words := strings.Fields(command)
	bin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("the OpenSSH client is not installed: apt-get install openssh-client")
	}
	held := exec.CommandContext(ctx, bin, append([]string{"-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-N"}, words[1:]...)...)
	require.NoError(t, held.Start())
	defer func() { cancel(); _ = held.Wait() }()
	touched := func() bool { return h.lastActivityIsNow(sb.Id) }
	require.Eventually(t, touched, 30*time.Second, 20*time.Millisecond, "on connect")
	for range 4 {
		h.clk.Advance(sshgw.ActivityInterval)
		require.Eventually(t, touched, 30*time.Second, 20*time.Millisecond, "every 45 s while open")
	}
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(sb.Id).GetState(), "3 minutes of open connection, auto-stop 1")
}

// lastActivityIsNow says whether sandbox id's activity was recorded at the
// simulator's present.
func (h *harness) lastActivityIsNow(id string) bool {
	h.sim.mu.Lock()
	defer h.sim.mu.Unlock()
	return h.sim.rows.Get(id).LastActivity.Equal(h.clk.Now())
}
