package toolboxcmd

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestToolboxListenAddr(t *testing.T) {
	tests := []struct {
		name, listen, port, want string
		wantErr                  bool
	}{
		{name: "flag wins", listen: "0.0.0.0:9000", port: "1234", want: "0.0.0.0:9000"},
		{name: "PORT on loopback", port: "1234", want: "127.0.0.1:1234"},
		{name: "neither", wantErr: true},
		{name: "PORT not a number", port: "http", wantErr: true},
		{name: "PORT out of range", port: "70000", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toolboxListenAddr(tt.listen, tt.port)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

type toolboxInfo struct {
	Name      string `json:"name"`
	SandboxID string `json:"sandboxId"`
	WorkDir   string `json:"workDir"`
	PID       int    `json:"pid"`
}

const cmdTestToken = "cmd-test-token-0123456789abcdefghijklmnop"

// startToolboxCmd runs the command and waits until it answers on port. It
// sets the token (cmdTestToken) unless the test set one.
func startToolboxCmd(t *testing.T, ctx context.Context, port string, args ...string) (toolboxInfo, <-chan error) {
	t.Helper()
	if _, ok := os.LookupEnv("SANDPLANE_SANDBOX_TOKEN"); !ok {
		t.Setenv("SANDPLANE_SANDBOX_TOKEN", cmdTestToken)
	}
	token := os.Getenv("SANDPLANE_SANDBOX_TOKEN")
	cmd := New("test")
	cmd.SetArgs(args)
	cmd.SetErr(io.Discard)
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()

	var info toolboxInfo
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/api/info", nil)
		require.NoError(t, err)
		req.Header.Set("X-Daytona-Preview-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
			resp.Body.Close()
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("toolbox exited early: %v", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "toolbox never answered: %v", err)
		time.Sleep(20 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
	}
	return info, errc
}

func TestToolboxCommandServesUntilCanceled(t *testing.T) {
	port := freePort(t)
	t.Setenv("PORT", port)
	t.Setenv("SANDPLANE_SANDBOX_ID", "sbx-cmd")
	dir := t.TempDir()
	t.Chdir(dir)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info, errc := startToolboxCmd(t, ctx, port)
	assert.Equal(t, "sandplane-toolbox", info.Name)
	assert.Equal(t, "sbx-cmd", info.SandboxID)
	assert.Equal(t, dir, info.WorkDir)
	assert.Equal(t, os.Getpid(), info.PID)

	cancel()
	select {
	case err := <-errc:
		assert.NoError(t, err, "a graceful stop is a clean exit")
	case <-time.After(30 * time.Second):
		t.Fatal("toolbox did not stop")
	}
}

// In a simulator's sandbox, the marker names the runtime's workload; the
// info names the sandbox as its user knows it.
func TestToolboxInfoNamesTheSandboxByItsDaytonaID(t *testing.T) {
	port := freePort(t)
	t.Setenv("PORT", port)
	t.Setenv("SANDPLANE_SANDBOX_ID", "workload-1")
	t.Setenv("DAYTONA_SANDBOX_ID", "daytona-sbx")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info, errc := startToolboxCmd(t, ctx, port)
	assert.Equal(t, "daytona-sbx", info.SandboxID)
	cancel()
	<-errc
}

func TestToolboxCommandStopsCleanlyOnSIGTERM(t *testing.T) {
	port := freePort(t)
	_, errc := startToolboxCmd(t, context.Background(), port, "--listen", "127.0.0.1:"+port)
	// The command has installed its handler before it began to answer, so
	// the signal cannot kill the test binary.
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case err := <-errc:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("toolbox did not stop on SIGTERM")
	}
}

func TestToolboxCommandNeedsAnAddress(t *testing.T) {
	t.Setenv("PORT", "")
	t.Setenv("SANDPLANE_SANDBOX_TOKEN", cmdTestToken)
	cmd := New("test")
	cmd.SetArgs(nil)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	assert.ErrorContains(t, cmd.ExecuteContext(context.Background()), "PORT")
}

func TestToolboxCommandRefusesToStartWithoutAToken(t *testing.T) {
	t.Setenv("PORT", freePort(t))
	t.Setenv("SANDPLANE_SANDBOX_TOKEN", "")
	cmd := New("test")
	cmd.SetArgs(nil)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--insecure-no-token")
}

func TestToolboxToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	good := file("good", "from-file\n", 0o600)
	open := file("open", "from-file", 0o644)
	empty := file("empty", " \n", 0o600)
	tests := []struct {
		name, env, file string
		noToken         bool
		want, wantErr   string
	}{
		{name: "environment", env: "from-env", want: "from-env"},
		{name: "file wins over the environment", env: "from-env", file: good, want: "from-file"},
		{name: "none", wantErr: "no token"},
		{name: "none, insecure on purpose", noToken: true, want: ""},
		{name: "insecure flag does not drop a token", env: "from-env", noToken: true, want: "from-env"},
		{name: "file readable by others", file: open, wantErr: "chmod 600"},
		{name: "empty file", file: empty, wantErr: "empty"},
		{name: "missing file", file: filepath.Join(dir, "missing"), wantErr: "token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SANDPLANE_SANDBOX_TOKEN", tt.env)
			got, err := toolboxToken(tt.file, tt.noToken)
			_, still := os.LookupEnv("SANDPLANE_SANDBOX_TOKEN")
			assert.False(t, still, "the commands the toolbox runs do not inherit the token")
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestToolboxCommandChecksTheToken(t *testing.T) {
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, errc := startToolboxCmd(t, ctx, port, "--listen", "127.0.0.1:"+port)
	exec := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+port+"/process/execute",
			strings.NewReader(`{"command":"echo \"token=$SANDPLANE_SANDBOX_TOKEN\""}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("X-Daytona-Preview-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	status, _ := exec("")
	assert.Equal(t, http.StatusUnauthorized, status)
	status, body := exec(cmdTestToken)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"token=\n"`, "commands do not see the token")
	cancel()
	require.NoError(t, <-errc)
}

func TestToolboxEntrypoint(t *testing.T) {
	tests := []struct {
		name, env string
		flag      bool
		argv      []string
		want      string
		wantErr   string
	}{
		{name: "none"},
		{name: "argv is quoted", flag: true, argv: []string{"sh", "-c", `echo "$0 it's"`, "x"}, want: `'sh' '-c' 'echo "$0 it'\''s"' 'x'`},
		{name: "environment", env: "  ./serve --port 3000 ", want: "./serve --port 3000"},
		{name: "flag without a command", flag: true, wantErr: "needs the command"},
		{name: "flag and environment", flag: true, argv: []string{"a"}, env: "b", wantErr: "both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(entrypointEnv, tt.env)
			got, err := toolboxEntrypoint(tt.flag, tt.argv)
			_, still := os.LookupEnv(entrypointEnv)
			assert.False(t, still, "commands do not inherit the entrypoint")
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestToolboxCommandRunsTheEntrypoint(t *testing.T) {
	t.Chdir(t.TempDir())
	get := func(port, path string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+path, nil)
		require.NoError(t, err)
		req.Header.Set("X-Daytona-Preview-Token", cmdTestToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	waitLogs := func(port, want string) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			status, body := get(port, "/process/session/entrypoint/logs")
			require.Equal(t, http.StatusOK, status, body)
			var logs struct{ Stdout string }
			require.NoError(t, json.Unmarshal([]byte(body), &logs))
			if logs.Stdout == want {
				return
			}
			require.True(t, time.Now().Before(deadline), "entrypoint logs: %s", body)
			time.Sleep(20 * time.Millisecond) // a poll of the condition; the deadline only stops a hang
		}
	}

	t.Run("argv after --entrypoint --", func(t *testing.T) {
		port := freePort(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, errc := startToolboxCmd(t, ctx, port, "--listen", "127.0.0.1:"+port, "--entrypoint", "--", "sh", "-c", `echo "entry $0 $SANDPLANE_ENTRYPOINT"`, "it's")
		waitLogs(port, "entry it's \n")
		cancel()
		require.NoError(t, <-errc)
	})
	t.Run("$SANDPLANE_ENTRYPOINT", func(t *testing.T) {
		t.Setenv(entrypointEnv, `echo "from env"`)
		port := freePort(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, errc := startToolboxCmd(t, ctx, port, "--listen", "127.0.0.1:"+port)
		waitLogs(port, "from env\n")
		cancel()
		require.NoError(t, <-errc)
	})
	t.Run("arguments need --entrypoint", func(t *testing.T) {
		t.Setenv("SANDPLANE_SANDBOX_TOKEN", cmdTestToken)
		cmd := New("test")
		cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "sleep", "1"})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		assert.ErrorContains(t, cmd.ExecuteContext(context.Background()), "--entrypoint")
	})
	t.Run("no entrypoint", func(t *testing.T) {
		port := freePort(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, errc := startToolboxCmd(t, ctx, port, "--listen", "127.0.0.1:"+port)
		status, body := get(port, "/process/session/entrypoint")
		assert.Equal(t, http.StatusNotFound, status, body)
		cancel()
		require.NoError(t, <-errc)
	})
}
