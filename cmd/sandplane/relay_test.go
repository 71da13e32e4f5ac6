package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	return r, "http://" + addr
}

// get sends a GET to the relay at base for host (empty: the relay's own).
func get(t *testing.T, base, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
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
	sb, err := d.p.Create(ctx, provider.CreateRequest{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.p.Delete(context.Background(), sb.Id) })
	r, base := startRelay(t, nil, "--provider", "local://"+strings.TrimPrefix(d.url, "http://"))
	assert.Contains(t, r.stderr.String(), "in front of local")

	label := strconv.Itoa(sb.Port) + "-" + sb.Id
	code, body := get(t, base, label+".localhost:1", "/api/info")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"sandboxId":"`+sb.Id+`"`, "the sandbox's own toolbox answered, by host")
	code, body = get(t, base, "", "/"+label+"/api/info")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, sb.Id, "and by path")

	_, metrics := get(t, base, "", "/metrics")
	assert.Contains(t, metrics, "sandplane_relay_requests_total 2")
	assert.Contains(t, metrics, "sandplane_relay_refreshes_sent_total 1")

	_, err = d.p.Stop(ctx, sb.Id)
	require.NoError(t, err)
	code, body = get(t, base, label+".localhost", "/api/info")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "is stopped: start it, then retry")

	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, r.wait(t), "SIGTERM ends the relay cleanly: %s", r.stderr)
}

func TestRelayCommandInFrontOfDaytona(t *testing.T) {
	// The simulator stands in for Daytona; its preview links are signed URLs
	// that it proxies to 127.0.0.1:<port>, where this test serves.
	simAddr := testdaemon.FreeAddr(t)
	sim := startProc(t, nil, "sim", "--listen", simAddr, "--backend", "native", "--root", t.TempDir())
	apiURL := "http://" + simAddr + "/api"
	p, err := daytona.New(daytona.Config{APIKey: "relay-test", APIURL: apiURL})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := p.Info(context.Background()); return err == nil },
		20*time.Second, 20*time.Millisecond, "the simulator did not come up: %s", sim.stderr)
	ctx := context.Background()
	sb, err := p.Create(ctx, provider.CreateRequest{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Delete(context.Background(), sb.Id) })

	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "app saw "+r.URL.Path)
	}))
	defer app.Close()
	u, _ := url.Parse(app.URL)
	port := u.Port()

	r, base := startRelay(t, []string{"DAYTONA_API_URL=" + apiURL, "DAYTONA_API_KEY=relay-test"}, "--provider", "daytona://")
	assert.Contains(t, r.stderr.String(), "in front of daytona")
	code, body := get(t, base, port+"-"+sb.Id+".localhost", "/hello")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "app saw /hello", body)
	require.Eventually(t, func() bool {
		_, m := get(t, base, "", "/metrics")
		return strings.Contains(m, "sandplane_relay_refreshes_sent_total 1") && strings.Contains(m, "sandplane_relay_refreshes_in_flight 0")
	}, 10*time.Second, 20*time.Millisecond)
	_, metrics := get(t, base, "", "/metrics")
	assert.Contains(t, metrics, "sandplane_relay_refreshes_failed_total 0", "Daytona's last-activity call succeeded")

	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, r.wait(t), "%s", r.stderr)
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
