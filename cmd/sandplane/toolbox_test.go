package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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

// startToolboxCmd runs the command and waits until it answers on port.
func startToolboxCmd(t *testing.T, ctx context.Context, port string, args ...string) (toolboxInfo, <-chan error) {
	t.Helper()
	cmd := newToolboxCmd()
	cmd.SetArgs(args)
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()

	var info toolboxInfo
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + port + "/api/info")
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
		time.Sleep(20 * time.Millisecond)
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
	cmd := newToolboxCmd()
	cmd.SetArgs(nil)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	assert.ErrorContains(t, cmd.ExecuteContext(context.Background()), "PORT")
}
