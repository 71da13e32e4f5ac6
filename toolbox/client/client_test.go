package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/toolbox"
	"github.com/sandplane/sandplane/toolbox/client"
	"github.com/sandplane/sandplane/toolbox/wire"
)

// newToolbox serves the real toolbox on loopback and counts the requests
// each path pattern gets.
func newToolbox(t testing.TB) (url, workDir string, hits *counter) {
	t.Helper()
	workDir = t.TempDir()
	h := toolbox.NewHandler(toolbox.Options{WorkDir: workDir, HomeDir: workDir})
	hits = &counter{n: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.add(r.Method, r.URL.Path)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		h.(io.Closer).Close()
	})
	return ts.URL, workDir, hits
}

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(method, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := method + " " + path
	switch {
	case strings.HasSuffix(path, "/logs"):
		key = method + " logs"
	case strings.Contains(path, "/command/"):
		key = method + " command"
	}
	c.n[key]++
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// lockedBuffer is written by Run while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func sessions(t *testing.T, url string) []wire.Session {
	t.Helper()
	resp, err := http.Get(url + "/process/session")
	require.NoError(t, err)
	defer resp.Body.Close()
	var out []wire.Session
	require.NoError(t, jsonDecode(resp.Body, &out))
	return out
}

func TestRunReturnsExitCodeAndSeparatesStreams(t *testing.T) {
	tests := []struct {
		name           string
		command        string
		code           int
		stdout, stderr string
	}{
		{"success", "echo out; echo err >&2", 0, "out\n", "err\n"},
		{"exit code", "echo partial; exit 3", 3, "partial\n", ""},
		{"failing command", "false", 1, "", ""},
		{"missing program", "no-such-program-here", 127, "", "not found"},
		{"quotes survive", `printf '%s\n' "it's" 'a "b"'`, 0, "it's\na \"b\"\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, _, _ := newToolbox(t)
			c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
			var stdout, stderr bytes.Buffer
			code, err := c.Run(context.Background(), tt.command, &stdout, &stderr)
			require.NoError(t, err)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.stdout, stdout.String())
			assert.Contains(t, stderr.String(), tt.stderr)
			assert.Empty(t, sessions(t, url), "Run deletes its session")
		})
	}
}

func TestRunStreamsBeforeTheCommandEnds(t *testing.T) {
	url, dir, _ := newToolbox(t)
	c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
	var stdout lockedBuffer
	done := make(chan int, 1)
	go func() {
		code, err := c.Run(context.Background(), "echo first; while [ ! -e release ]; do sleep 0.01; done; echo second; exit 7", &stdout, io.Discard)
		assert.NoError(t, err)
		done <- code
	}()
	require.Eventually(t, func() bool { return stdout.String() == "first\n" }, 20*time.Second, 5*time.Millisecond)
	select {
	case <-done:
		t.Fatal("Run returned before the command ended")
	default:
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o600))
	select {
	case code := <-done:
		assert.Equal(t, 7, code)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the command ended")
	}
	assert.Equal(t, "first\nsecond\n", stdout.String())
}

func TestCancelKillsTheCommandAndItsSession(t *testing.T) {
	url, _, _ := newToolbox(t)
	c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout lockedBuffer
	errc := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, "sh -c 'echo $$; exec sleep 30'", &stdout, io.Discard)
		errc <- err
	}()
	var pid int
	require.Eventually(t, func() bool {
		n, err := strconv.Atoi(strings.TrimSpace(stdout.String()))
		pid = n
		return err == nil
	}, 20*time.Second, 5*time.Millisecond)
	require.True(t, alive(pid))
	cancel()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	assert.Empty(t, sessions(t, url))
	assert.Eventually(t, func() bool { return !alive(pid) }, 20*time.Second, 10*time.Millisecond, "sleep %d still runs", pid)
}

func TestRunPollsOnTheClock(t *testing.T) {
	url, dir, hits := newToolbox(t)
	clk := clocktest.NewFake(time.Time{})
	c := client.New(url, nil, client.WithClock(clk), client.WithPollInterval(time.Second))
	var stdout lockedBuffer
	done := make(chan int, 1)
	go func() {
		code, err := c.Run(context.Background(), "while [ ! -e release ]; do sleep 0.01; done; echo done", &stdout, io.Discard)
		assert.NoError(t, err)
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, clk.BlockUntilWaiters(ctx, 1))
	assert.Equal(t, 1, hits.get("GET command"), "one poll, then a wait on the clock")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o600))
	require.Eventually(t, func() bool {
		for _, s := range sessions(t, url) {
			for _, cmd := range s.Commands {
				if cmd.ExitCode != nil {
					return true
				}
			}
		}
		return false
	}, 20*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, hits.get("GET command"), "no poll until the clock moves")
	assert.Empty(t, stdout.String())

	clk.Advance(time.Second)
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return once the clock moved")
	}
	assert.Equal(t, 2, hits.get("GET command"))
	assert.Equal(t, "done\n", stdout.String())
}

func TestErrorsAreCoded(t *testing.T) {
	url, _, _ := newToolbox(t)
	c := client.New(url, nil)
	ctx := context.Background()
	require.NoError(t, c.CreateSession(ctx, "s1"))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadURL := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	tests := []struct {
		name string
		call func() error
		code provider.ErrorCode
	}{
		{"duplicate session", func() error { return c.CreateSession(ctx, "s1") }, provider.AlreadyExists},
		{"bad session id", func() error { return c.CreateSession(ctx, " ") }, provider.InvalidArgument},
		{"delete missing session", func() error { return c.DeleteSession(ctx, "nope") }, provider.NotFound},
		{"exec in missing session", func() error { _, err := c.ExecAsync(ctx, "nope", "true"); return err }, provider.NotFound},
		{"empty command", func() error { _, err := c.ExecAsync(ctx, "s1", "  "); return err }, provider.InvalidArgument},
		{"missing command", func() error { _, err := c.Command(ctx, "s1", "nope"); return err }, provider.NotFound},
		{"logs of missing command", func() error { _, err := c.Logs(ctx, "s1", "nope"); return err }, provider.NotFound},
		{"nobody listening", func() error { _, err := client.New(deadURL, nil).Run(ctx, "true", nil, nil); return err }, provider.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			require.Error(t, err)
			assert.Equal(t, tt.code, provider.Code(err), "%v", err)
		})
	}
}

func TestHeadersReachTheToolbox(t *testing.T) {
	var got atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(ts.Close)
	c := client.New(ts.URL+"/", http.Header{"Authorization": {"Bearer k"}})
	require.NoError(t, c.CreateSession(context.Background(), "s"))
	assert.Equal(t, "Bearer k", got.Load())
}

// alive reports whether pid runs; a zombie waiting for a reaper that never
// comes (no init in a container) counts as dead.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func TestRunCancelledDuringSessionCreateLeavesNoSession(t *testing.T) {
	workDir := t.TempDir()
	h := toolbox.NewHandler(toolbox.Options{WorkDir: workDir, HomeDir: workDir})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/process/session" {
			// The session is made, but Ctrl-C lands before the answer.
			h.ServeHTTP(httptest.NewRecorder(), r)
			cancel()
			<-r.Context().Done()
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		h.(io.Closer).Close()
	})

	_, err := client.New(ts.URL, nil).Run(ctx, "true", nil, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, sessions(t, ts.URL), "the session's shell does not outlive Run")
}

func TestRunPrintsTheTruncationNoteOnce(t *testing.T) {
	workDir := t.TempDir()
	h := toolbox.NewHandler(toolbox.Options{WorkDir: workDir, HomeDir: workDir, MaxOutputBytes: 10})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		h.(io.Closer).Close()
	})
	c := client.New(ts.URL, nil, client.WithPollInterval(10*time.Millisecond))
	// Polls see the log cut while the count of dropped bytes still grows.
	var stdout bytes.Buffer
	code, err := c.Run(context.Background(), "printf 0123456789abcdefghij; sleep 0.3; printf %0200d 0", &stdout, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Equal(t, "0123456789\n[sandplane: output truncated, 210 more bytes dropped]\n", stdout.String())
}
