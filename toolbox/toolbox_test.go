package toolbox

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

func TestInfoAndDirs(t *testing.T) {
	work, home := t.TempDir(), t.TempDir()
	ts := newTestServer(t, Options{WorkDir: work, HomeDir: home, Version: "v1.2.3", SandboxID: "sbx-1"})

	tests := []struct {
		path string
		want map[string]any
	}{
		{"/api/info", map[string]any{
			"name": "sandplane-toolbox", "version": "v1.2.3", "pid": float64(os.Getpid()),
			"sandboxId": "sbx-1", "workDir": work,
		}},
		{"/version", map[string]any{"version": "v1.2.3"}},
		{"/work-dir", map[string]any{"dir": work}},
		{"/user-home-dir", map[string]any{"dir": home}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := ts.get(t, tt.path)
			require.Equal(t, http.StatusOK, resp.status)
			assert.Contains(t, resp.header.Get("Content-Type"), "application/json")
			var got map[string]any
			resp.json(t, &got)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDefaults(t *testing.T) {
	s, err := newServer(Options{WorkDir: "."})
	require.NoError(t, err)
	defer s.Close()
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, wd, s.opts.WorkDir, "the work dir is made absolute")
	assert.NotEmpty(t, s.opts.HomeDir)
	assert.NotNil(t, s.opts.Clock)
}

func TestBrokenRoot(t *testing.T) {
	h := NewHandler(Options{WorkDir: t.TempDir(), Root: filepath.Join(t.TempDir(), "missing")})
	srv := newHTTPTest(t, h)
	resp, err := http.Get(srv + "/version")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)

	err = Serve(context.Background(), "127.0.0.1:0", Options{Root: filepath.Join(t.TempDir(), "missing")})
	assert.ErrorContains(t, err, "root")
}

func newHTTPTest(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	err = Serve(context.Background(), ln.Addr().String(), Options{WorkDir: t.TempDir()})
	assert.Error(t, err, "the address is taken")
}

// startServe runs serve on a loopback listener and returns its URL and the
// channel its result arrives on.
func startServe(t *testing.T, ctx context.Context, opts Options) (string, <-chan error) {
	t.Helper()
	s, err := newServer(opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer s.Close()
		errc <- s.serve(ctx, ln)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not return")
		}
	})
	return "http://" + ln.Addr().String(), errc
}

func TestServeGracefulShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	url, errc := startServe(t, ctx, Options{WorkDir: t.TempDir()})

	resp, err := http.Get(url + "/version")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-errc)
	_, err = http.Get(url + "/version")
	assert.Error(t, err, "the listener is closed")
}

func TestServeShutdownLetsRequestsFinishThenCutsThemOff(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	url, errc := startServe(t, ctx, Options{WorkDir: dir, Clock: clk, ShutdownGrace: 3 * time.Second})

	pidFile := filepath.Join(dir, "pid")
	reqErr := make(chan error, 1)
	go func() {
		resp, err := http.Post(url+"/process/execute", "application/json",
			strings.NewReader(`{"command":"echo $$ > `+pidFile+`; sleep 300"}`))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = errors.New("unexpected answer " + resp.Status)
			}
		}
		reqErr <- err
	}()
	pid := readPID(t, pidFile)
	t.Cleanup(func() { killPID(t, pid) })

	cancel()
	waitCtx, waitCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer waitCancel()
	require.NoError(t, clk.BlockUntilWaiters(waitCtx, 1), "the shutdown grace timer")
	select {
	case err := <-errc:
		t.Fatalf("serve returned during the grace period: %v", err)
	default:
	}
	clk.Advance(3 * time.Second)

	require.NoError(t, <-errc)
	assert.Error(t, <-reqErr, "the running request is cut off")
	waitFor(t, "the command to be killed", func() bool { return !processAlive(pid) })
}

func TestPartialMarker(t *testing.T) {
	m := []byte("__end_x")
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"hello\n", 0},
		{"hello_", 1},
		{"hello__en", 4},
		{"__end_", 6},
		{"x__end", 5},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, partialMarker([]byte(tt.in), m), tt.in)
	}
}
