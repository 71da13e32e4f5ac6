package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/provider"
)

// eventLog collects the daemon's raw event stream.
type eventLog struct {
	mu   sync.Mutex
	text strings.Builder
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

func streamEvents(t *testing.T, url string) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	l := &eventLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			l.mu.Lock()
			l.text.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return l
}

func rawGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestToolboxNeedsTheSandboxToken runs the exploit against a real
// sandbox's toolbox: without the token it is refused, with the header
// local.Provider hands out it works, and the token shows up nowhere it must
// not.
func TestToolboxNeedsTheSandboxToken(t *testing.T) {
	d := startDaemon(t, "")
	ctx := context.Background()
	events := streamEvents(t, d.URL)
	s, err := d.P.Create(ctx, provider.CreateRequest{Name: "guarded", AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	preview, err := d.P.PreviewURL(ctx, s.ID, 0)
	require.NoError(t, err)
	token := preview.Token
	require.Len(t, token, 43, "32 random bytes, URL-safe")
	label := "4000-" + s.ID
	assert.Equal(t, d.URL+"/preview/"+label, preview.URL, "the workload's port, served by the daemon")
	_, daemonPort, err := net.SplitHostPort(d.Addr)
	require.NoError(t, err)
	assert.Equal(t, "http://"+label+".localhost:"+daemonPort, s.PreviewURL, "the browser's form")

	// At the toolbox's own port, where any local process can reach it: on
	// the sandbox's own loopback address when it is isolated.
	host := "127.0.0.1"
	if !s.Unisolated {
		host = launcher.OwnAddress(s.Port).String()
	}
	toolbox := "http://" + net.JoinHostPort(host, strconv.Itoa(s.Port))
	attack := func(host, origin, ctype, tok string) int {
		req, err := http.NewRequest(http.MethodPost, toolbox+"/process/execute", strings.NewReader(`{"command":"id"}`))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", ctype)
		if tok != "" {
			req.Header.Set(provider.PreviewTokenHeader, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusForbidden, attack("evil.com", "http://evil.com", "text/plain", ""), "the reproduced cross-site call")
	assert.Equal(t, http.StatusForbidden, attack("", "http://evil.com", "text/plain", ""), "a foreign Origin")
	assert.Equal(t, http.StatusUnauthorized, attack("", "", "application/json", ""), "any local process without the token")
	assert.Equal(t, http.StatusUnauthorized, attack("", "", "application/json", "not-"+token), "a wrong token")
	assert.Equal(t, http.StatusUnsupportedMediaType, attack("", "", "text/plain", token), "a form body, even with the token")

	// Through the daemon's preview, which wants the same token.
	req, err := http.NewRequest(http.MethodGet, preview.URL+"/api/info", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the preview without the token")
	req.Header.Set(provider.PreviewTokenHeader, token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the preview with it")

	// Through local.Provider's Toolbox, as `sandplane run` and the
	// conformance suite call it.
	resp = toolboxDo(t, d.P, s, http.MethodPost, "/process/execute",
		`{"command":"echo \"seen=${SANDPLANE_SANDBOX_TOKEN:-none}\"; echo \"tok=`+token+`\" >> /proc/$PPID/fd/1"}`)
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	require.Zero(t, out.ExitCode, out.Result)
	assert.Equal(t, "seen=none\n", out.Result, "the toolbox keeps its token from the commands it runs")

	t.Run("stored 0600 in the sandbox directory, nowhere else", func(t *testing.T) {
		file := filepath.Join(d.Root, s.ID, "sandbox-token")
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, token, strings.TrimSpace(string(b)))
		rec, err := os.ReadFile(filepath.Join(d.Root, s.ID, "sandbox.json"))
		require.NoError(t, err)
		assert.NotContains(t, string(rec), token)
	})
	t.Run("not in the API's answers, events or logs", func(t *testing.T) {
		assert.NotContains(t, rawGet(t, d.URL+"/v1/sandboxes"), token)
		assert.NotContains(t, rawGet(t, d.URL+"/v1/sandboxes/"+s.ID), token)
		logs, err := d.P.EntrypointLogs(ctx, s.ID)
		require.NoError(t, err)
		assert.Contains(t, logs.Output, "tok=[REDACTED]", "the workload printed it; the logs hide it")
		assert.NotContains(t, logs.Output, token)
	})

	t.Run("kept across stop and start", func(t *testing.T) {
		_, err := d.P.Stop(ctx, s.ID)
		require.NoError(t, err)
		started, err := d.P.Start(ctx, s.ID)
		require.NoError(t, err)
		again, err := d.P.PreviewURL(ctx, s.ID, 0)
		require.NoError(t, err)
		assert.Equal(t, token, again.Token)
		assert.Equal(t, provider.StateStarted, started.State)
		workloadPID(t, d.P, started) // the restarted toolbox takes the same token
	})

	require.Eventually(t, func() bool { return strings.Count(events.String(), "event: sandbox.started") >= 2 },
		10*time.Second, 10*time.Millisecond, "events: %s", events)
	assert.NotContains(t, events.String(), token, "events")
	assert.NotContains(t, d.Stderr.String(), token, "the daemon's log")

	t.Run("removed with the sandbox", func(t *testing.T) {
		require.NoError(t, d.P.Delete(ctx, s.ID))
		assert.NoDirExists(t, filepath.Join(d.Root, s.ID))
	})
}

// TestStatusChecksTheDaemonToken runs Status against a real daemon that
// requires a token: GET /v1/info answers without it, so only a call that
// needs the token tells a client that lacks it.
func TestStatusChecksTheDaemonToken(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Token: "the-daemon-token"})
	tests := []struct {
		name  string
		token string
		code  provider.ErrorCode
	}{
		{"the daemon's token", "the-daemon-token", ""},
		{"no token", "", provider.Unauthenticated},
		{"another token", "not-the-daemon-token", provider.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(local.EnvToken, "") // only the option counts
			p, err := local.New(d.URL, local.WithToken(tt.token))
			require.NoError(t, err)
			st := p.Status(context.Background())
			assert.Equal(t, tt.code, st.Code, st.Message)
			assert.Equal(t, tt.code == "", st.OK())
			if tt.code != "" {
				assert.Contains(t, st.Message, local.EnvToken, "it says what to set")
			}
		})
	}
}
