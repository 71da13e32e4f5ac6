package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
)

// The built binary is all `sandplane sim` needs: with no Go toolchain on
// PATH and an empty HOME (so no module cache either) it starts, validates
// requests against its embedded spec and runs native sandboxes.
func TestSimRunsWithoutGoOrHome(t *testing.T) {
	_, do := startBareSim(t)
	code, body := do("POST", "/api/sandbox", `{"autoStopInterval":"x"}`)
	assert.Equal(t, http.StatusBadRequest, code, "validated against the embedded spec: %s", body)
	assert.Contains(t, body, "autoStopInterval must be a number")
	code, body = do("POST", "/api/sandbox", `{"name":"nogo"}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"state":"started"`)
	code, body = do("POST", "/toolbox/"+idOf(t, body)+"/process/execute", `{"command":"echo hi"}`)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"result":"hi\n"`)
	code, body = do("DELETE", "/api/sandbox/nogo", "")
	assert.Equal(t, http.StatusOK, code, body)
}

// startBareSim runs `sandplane sim` with nothing in its environment but
// an empty PATH, HOME and TMPDIR, until the test ends, and returns it with
// a function that calls its API with an API key of its own.
func startBareSim(t *testing.T) (*exec.Cmd, func(method, path, body string) (int, string)) {
	t.Helper()
	bin := testdaemon.Binary(t)
	addr := testdaemon.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, bin, "sim", "--listen", addr, "--admin-key", "nogo-admin")
	// Nothing else: no PATH (so no go), no HOME, no GOMODCACHE or GOPATH.
	cmd.Env = []string{"PATH=", "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	for line := range lines {
		seen = append(seen, line)
		if strings.HasPrefix(line, "export ") {
			break
		}
	}
	require.NotEmpty(t, seen)
	require.True(t, strings.HasPrefix(seen[len(seen)-1], "export "), "the simulator did not start:\n%s", strings.Join(seen, "\n"))
	go func() {
		for range lines {
		}
	}()

	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer nogo-key")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	return cmd, do
}

// idOf reads the id out of a Sandbox body.
func idOf(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `"id":"`)
	require.True(t, ok, body)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}
