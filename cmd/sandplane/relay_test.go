package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/daytona"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
)

// startProc runs the binary with env added to this process's environment
// (less the provider settings); Cleanup kills it if the test did not stop it.
func startProc(t *testing.T, env []string, args ...string) *running {
	t.Helper()
	r := &running{stdout: &testdaemon.Buffer{}, stderr: &testdaemon.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(testdaemon.Binary(t), args...)
	r.cmd.Env = append(cliEnv(""), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	require.NoError(t, r.cmd.Start())
	go func() {
		err := r.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// startRelay runs `sandplane relay` and waits until it answers.
func startRelay(t *testing.T, env []string, args ...string) (*running, string) {
	t.Helper()
	addr := testdaemon.FreeAddr(t)
	r := startProc(t, env, append([]string{"relay", "--listen", addr}, args...)...)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "the relay did not come up: %s", r.stderr)
	// The relay prints its banner before it serves, but the copy of its
	// stderr into r.stderr may lag behind the answer.
	require.Eventually(t, func() bool { return strings.Contains(r.stderr.String(), "sandplane relay in front of") },
		10*time.Second, 10*time.Millisecond, "the relay served without its banner: %s", r.stderr)
	return r, "http://" + addr
}

// get sends a GET to the relay at base for host (empty: the relay's own),
// with the preview token when one is given.
func get(t *testing.T, base, host, path string, token ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for _, tok := range token {
		req.Header.Set(provider.PreviewTokenHeader, tok)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestRelayCommandInFrontOfTheLocalDaemon(t *testing.T) {
	d := startCLIDaemon(t)
	ctx := context.Background()
	// An hour of the daemon's 200ms minutes (12 s): long enough that the
	// sandbox does not stop before the relay's first request on a loaded
	// machine, and not 0, which would leave the relay nothing to refresh.
	sb, err := d.p.Create(ctx, provider.CreateRequest{AutoStopInterval: ptr(60)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.p.Delete(context.Background(), sb.ID) })
	r, base := startRelay(t, nil, "--provider", "local://"+strings.TrimPrefix(d.url, "http://"))
	assert.Contains(t, r.stderr.String(), "in front of local")

	// The workload's port inside the sandbox, as a preview names it.
	pv, err := d.p.PreviewURL(ctx, sb.ID, 4000)
	require.NoError(t, err)
	label := "4000-" + sb.ID
	code, body := get(t, base, label+".localhost:1", "/api/info")
	assert.Equal(t, http.StatusUnauthorized, code, "a local sandbox is private: %s", body)
	assert.NotContains(t, body, pv.Token)
	code, body = get(t, base, label+".localhost:1", "/api/info", pv.Token)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"sandboxId":"`+sb.ID+`"`, "the sandbox's own toolbox answered (it needs the token, which the relay passed on), by host")
	code, body = get(t, base, "", "/"+label+"/api/info", pv.Token)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, sb.ID, "and by path")

	_, metrics := get(t, base, "", "/metrics")
	assert.Contains(t, metrics, "sandplane_relay_requests_total 3")
	assert.Contains(t, metrics, "sandplane_relay_refreshes_sent_total 1")

	_, err = d.p.Stop(ctx, sb.ID)
	require.NoError(t, err)
	code, body = get(t, base, label+".localhost", "/api/info", pv.Token)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "is stopped: start it, then retry")

	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, r.wait(t), "SIGTERM ends the relay cleanly: %s", r.stderr)
}

func TestRelayCommandInFrontOfDaytona(t *testing.T) {
	// The simulator stands in for Daytona: its preview links are signed URLs
	// that it proxies to a port the sandbox's own processes listen on.
	simAddr := testdaemon.FreeAddr(t)
	// Unisolated: the simulator's previews reach a port the workload opens
	// on the host's loopback; an isolated sandbox's own network is reached
	// only on its toolbox port so far.
	sim := startProc(t, nil, "sim", "--listen", simAddr, "--backend", "native", "--isolation", "none", "--root", t.TempDir())
	apiURL := "http://" + simAddr + "/api"
	p, err := daytona.New(daytona.WithAPIKey("relay-test"), daytona.WithAPIURL(apiURL))
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := p.Info(context.Background()); return err == nil },
		20*time.Second, 20*time.Millisecond, "the simulator did not come up: %s", sim.stderr)
	ctx := context.Background()
	sb, err := p.Create(ctx, provider.CreateRequest{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Delete(context.Background(), sb.ID) })
	port := serveInSandbox(t, p, sb.ID, "hello from the sandbox")

	r, base := startRelay(t, []string{"DAYTONA_API_URL=" + apiURL, "DAYTONA_API_KEY=relay-test"}, "--provider", "daytona://")
	assert.Contains(t, r.stderr.String(), "in front of daytona")
	code, body := get(t, base, strconv.Itoa(port)+"-"+sb.ID+".localhost", "/hello.txt")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hello from the sandbox\n", body, "a signed preview URL needs no token")
	require.Eventually(t, func() bool {
		_, m := get(t, base, "", "/metrics")
		return strings.Contains(m, "sandplane_relay_refreshes_sent_total 1") && strings.Contains(m, "sandplane_relay_refreshes_in_flight 0")
	}, 10*time.Second, 20*time.Millisecond)
	_, metrics := get(t, base, "", "/metrics")
	assert.Contains(t, metrics, "sandplane_relay_refreshes_failed_total 0", "Daytona's last-activity call succeeded")

	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, r.wait(t), "%s", r.stderr)
}

// serveInSandbox starts a static web server inside the sandbox through its
// toolbox, serving hello.txt, and returns the port it picked.
func serveInSandbox(t *testing.T, p provider.Provider, id, hello string) int {
	t.Helper()
	_, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 serves the sandbox's web page (as in the conformance preview scenario)")
	tb, ok := p.(provider.Toolboxer)
	require.True(t, ok)
	base, hdr, err := tb.Toolbox(context.Background(), id)
	require.NoError(t, err)
	cmd := "echo '" + hello + "' > hello.txt && " +
		"nohup python3 -u -m http.server 0 --bind 127.0.0.1 </dev/null >server.log 2>&1 & " +
		"for i in $(seq 100); do grep -o 'port [0-9]*' server.log 2>/dev/null && exit 0; sleep 0.1; done; cat server.log; exit 1"
	body, err := json.Marshal(map[string]string{"command": cmd})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/process/execute", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		ExitCode int
		Result   string
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Zero(t, out.ExitCode, out.Result)
	var port int
	_, err = fmt.Sscanf(strings.TrimSpace(out.Result), "port %d", &port)
	require.NoError(t, err, out.Result)
	return port
}

func TestRelayCommandRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a network address", []string{"--listen", "0.0.0.0:0"}, "is not loopback"},
		{"no port", []string{"--listen", "127.0.0.1"}, "--listen"},
		{"a negative idle limit", []string{"--idle-keepalive", "-1s"}, "--idle-keepalive"},
		{"an unknown provider", []string{"--provider", "nope://"}, "unknown provider"},
		{"an empty domain", []string{"--domain", ""}, `--domain "" is not a domain`},
		{"a URL for a domain", []string{"--domain", "http://x"}, "is not a domain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := newRootCmd()
			root.SetArgs(append([]string{"relay"}, tt.args...))
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			err := root.ExecuteContext(context.Background())
			require.Error(t, err)
			assert.Equal(t, 2, exitCode(err), "%v", err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
