package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
)

// sim is a `sandplane sim` process on loopback, and what reaches its API.
type sim struct {
	base string
	hc   *http.Client
}

// startSim runs `sandplane sim` with native workloads until the test ends.
func startSim(t *testing.T) *sim {
	t.Helper()
	addr := testdaemon.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, testdaemon.Binary(t), "sim", "--listen", addr, "--ssh-listen", "off", "--root", t.TempDir())
	var logs testdaemon.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sandplane sim:\n%s", logs.String())
		}
	})
	s := &sim{base: "http://" + addr, hc: &http.Client{Timeout: 45 * time.Second}}
	require.Eventually(t, func() bool {
		resp, err := s.hc.Get(s.base + "/api/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "sandplane sim never answered:\n%s", logs.String())
	return s
}

// call sends an API request with the any-key of a loopback simulator and
// decodes a JSON answer into out.
func (s *sim) call(t *testing.T, method, path string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sim")
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, b)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), string(b))
	}
}

// A signed preview URL opens the sandbox's page in a browser, without the
// API key or the preview token, until it is expired.
func TestSignedPreviewURLInABrowser(t *testing.T) {
	ctx := browser(t)
	s := startSim(t)
	var sb struct{ ID string }
	s.call(t, "POST", "/api/sandbox", map[string]any{}, &sb)
	t.Cleanup(func() { s.call(t, "DELETE", "/api/sandbox/"+sb.ID, nil, nil) })
	page := `<title>signed preview</title><h1 id=msg>served inside ` + sb.ID + `</h1>`
	var run struct {
		ExitCode int
		Result   string
	}
	s.call(t, "POST", "/toolbox/"+sb.ID+"/process/execute", map[string]any{"command": fmt.Sprintf(
		`sh -c 'mkdir -p site && printf %%s "%s" > site/index.html && (nohup python3 -m http.server 8080 -b 127.0.0.1 -d site >/dev/null 2>&1 &)'`, page)}, &run)
	require.Equal(t, 0, run.ExitCode, run.Result)

	var signed struct{ URL, Token string }
	s.call(t, "GET", "/api/sandbox/"+sb.ID+"/ports/8080/signed-preview-url?expiresInSeconds=300", nil, &signed)
	require.Eventually(t, func() bool {
		resp, err := s.hc.Get(signed.URL + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the page server in the sandbox never answered")

	step(t, ctx, "open the signed URL", chromedp.Navigate(signed.URL+"/"), present("#msg"))
	assert.Equal(t, "signed preview", eval[string](t, ctx, `document.title`))
	assert.Equal(t, "served inside "+sb.ID, eval[string](t, ctx, `document.querySelector("#msg").textContent`))

	s.call(t, "POST", "/api/sandbox/"+sb.ID+"/ports/8080/signed-preview-url/"+signed.Token+"/expire", nil, nil)
	step(t, ctx, "open it once expired", chromedp.Navigate(signed.URL+"/"), absent("#msg"))
	assert.Contains(t, eval[string](t, ctx, `document.body.innerText`), `"statusCode":404`, "an expired URL opens nothing")
}
