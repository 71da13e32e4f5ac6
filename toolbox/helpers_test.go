package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// testServer is a toolbox behind a real loopback HTTP server. Its requests
// carry the token.
type testServer struct {
	*server
	url     string
	workDir string
}

// testToken is the token of test servers that were not given one.
const testToken = "test-token-0123456789abcdefghijklmnopqrstuvwxyz"

func newTestServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	if opts.HomeDir == "" {
		opts.HomeDir = t.TempDir()
	}
	s, err := newServer(opts)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return &testServer{server: s, url: hs.URL, workDir: s.opts.WorkDir}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

// apiErr decodes an error body and checks that it has the daemon's shape.
func (r response) apiErr(t *testing.T) wire.ErrorResponse {
	t.Helper()
	var raw map[string]any
	r.json(t, &raw)
	for _, k := range []string{"statusCode", "message", "code", "timestamp", "path", "method"} {
		assert.Contains(t, raw, k, "error body %s", r.body)
	}
	var e wire.ErrorResponse
	r.json(t, &e)
	assert.Equal(t, r.status, e.StatusCode)
	return e
}

func (ts *testServer) do(t *testing.T, method, path string, body io.Reader, contentType string) response {
	t.Helper()
	return ts.doCtx(t, context.Background(), method, path, body, contentType)
}

func (ts *testServer) doCtx(t *testing.T, ctx context.Context, method, path string, body io.Reader, contentType string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.url+path, body)
	require.NoError(t, err)
	ts.authorize(req, contentType)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// authorize adds the token and, unless empty, the Content-Type.
func (ts *testServer) authorize(req *http.Request, contentType string) {
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set(TokenHeader, ts.opts.Token)
}

func (ts *testServer) get(t *testing.T, path string) response {
	t.Helper()
	return ts.do(t, http.MethodGet, path, nil, "")
}

func (ts *testServer) postJSON(t *testing.T, path string, v any) response {
	t.Helper()
	var body []byte
	switch v := v.(type) {
	case string:
		body = []byte(v)
	default:
		var err error
		body, err = json.Marshal(v)
		require.NoError(t, err)
	}
	return ts.do(t, http.MethodPost, path, bytes.NewReader(body), "application/json")
}

// waitFor polls cond until it holds; the deadline only prevents hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // a poll of cond; the deadline only stops a hang
	}
}

// processAlive reports whether pid names a live (not zombie) process.
func processAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] != 'Z'
}

// readPID waits for a command to write its pid into path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "pid file "+filepath.Base(path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

func killPID(t *testing.T, pid int) {
	t.Helper()
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func jsonReader(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}
