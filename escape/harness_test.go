package escape_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/escape"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
)

// secret is a value the test plants where no sandbox may read it; every
// secret is a word the probe's reader keeps whole.
func secret(kind string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "escape-" + kind + "-" + hex.EncodeToString(b)
}

// secrets are the planted values by what they belong to.
type secrets map[string]string

// found names the secrets s holds.
func (ss secrets) found(s string) []string {
	var out []string
	for name, v := range ss {
		if v != "" && strings.Contains(s, v) {
			out = append(out, name)
		}
	}
	return out
}

var probeBuild struct {
	once sync.Once
	path string
	err  error
}

// probeBinary is escape/probe, statically built, so that it runs in any
// container image.
func probeBinary(t *testing.T) []byte {
	t.Helper()
	probeBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "escape-probe-")
		if err != nil {
			probeBuild.err = err
			return
		}
		probeBuild.path = filepath.Join(dir, "probe")
		cmd := exec.Command("go", "build", "-o", probeBuild.path, "github.com/sandplane/sandplane/escape/probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeBuild.err = fmt.Errorf("%w\n%s", err, out)
		}
	})
	require.NoError(t, probeBuild.err, "build the probe")
	b, err := os.ReadFile(probeBuild.path)
	require.NoError(t, err)
	return b
}

// box is one sandbox and how to reach its toolbox.
type box struct {
	*provider.Sandbox
	d       *testdaemon.Daemon
	workDir string
}

// do calls b's toolbox as clients do: at its base URL with the header
// the provider gives, and returns the status and body.
func (b *box) do(t *testing.T, method, path, contentType string, body io.Reader) (int, []byte) {
	t.Helper()
	base, header, err := b.d.P.Toolbox(context.Background(), b.ID)
	require.NoError(t, err)
	req, err := http.NewRequest(method, base+path, body)
	require.NoError(t, err)
	req.Header = header
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// postJSON posts v as JSON to b's toolbox.
func (b *box) postJSON(t *testing.T, path string, v any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(v)
	require.NoError(t, err)
	return b.do(t, http.MethodPost, path, "application/json", bytes.NewReader(body))
}

// upload writes content at path through the toolbox's file API.
func (b *box) upload(t *testing.T, path string, content []byte) (int, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", filepath.Base(path))
	require.NoError(t, err)
	_, _ = fw.Write(content)
	require.NoError(t, mw.Close())
	return b.do(t, http.MethodPost, "/files/upload?path="+url.QueryEscape(path), mw.FormDataContentType(), &buf)
}

// exec runs command in the sandbox and returns its exit code and output.
func (b *box) exec(t *testing.T, command string) (int, string) {
	t.Helper()
	code, body := b.postJSON(t, "/process/execute", map[string]any{"command": command, "cwd": b.workDir, "timeout": 240})
	require.Equal(t, http.StatusOK, code, "%s", body)
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	return out.ExitCode, out.Result
}

// newBox creates a sandbox and learns its work dir.
func newBox(t *testing.T, d *testdaemon.Daemon, rt provider.Runtime, name string, env map[string]string) *box {
	t.Helper()
	zero := 0
	s, err := d.P.Create(context.Background(), provider.CreateRequest{Name: name, Runtime: rt, AutoStopInterval: &zero, EnvVars: env})
	require.NoError(t, err, "daemon log:\n%s", d.Stderr)
	b := &box{Sandbox: s, d: d}
	var info struct {
		WorkDir string `json:"workDir"`
	}
	require.Eventually(t, func() bool {
		code, body := b.do(t, http.MethodGet, "/api/info", "", nil)
		return code == http.StatusOK && json.Unmarshal(body, &info) == nil && info.WorkDir != ""
	}, 30*time.Second, 50*time.Millisecond, "the toolbox of %s never answered", name)
	b.workDir = info.WorkDir
	return b
}

// hostProcesses lists the host's processes whose file (environ, cmdline)
// holds needle.
func hostProcesses(t *testing.T, file, needle string) []int {
	t.Helper()
	return testdaemon.ProcessesWhere(t, file, func(b []byte) bool { return bytes.Contains(b, []byte(needle)) })
}

// startHostProcess runs a process of the host whose environment holds
// value, for the probe to look for; it ends with t.
func startHostProcess(t *testing.T, value string) {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	cmd.Env = []string{"ESCAPE_HOST_SECRET=" + value}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// startHostService serves value on a loopback port of the host.
func startHostService(t *testing.T, value string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, value) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// startSim runs `sandplane sim` on loopback with an API key and an admin
// key, as someone who uses both on the machine would; it ends with t.
func startSim(t *testing.T, apiKey, adminKey string) int {
	t.Helper()
	addr := testdaemon.FreeAddr(t)
	cmd := exec.Command(testdaemon.Binary(t), "sim", "--listen", addr, "--backend", "none", "--ssh-listen", "off", "--api-key", apiKey)
	cmd.Env = append(os.Environ(), "SANDPLANE_SIM_ADMIN_KEY="+adminKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr testdaemon.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/_sim/info")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "the simulator never answered: %s", &stderr)
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

// parseResults reads the probe's lines.
func parseResults(t *testing.T, out string) map[string]escape.Result {
	t.Helper()
	res := map[string]escape.Result{}
	for line := range strings.Lines(out) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r escape.Result
		require.NoError(t, json.Unmarshal([]byte(line), &r), "probe line %q", line)
		res[r.Entry] = r
	}
	return res
}

// jsonBytes is v as JSON.
func jsonBytes(v any) ([]byte, error) { return json.Marshal(v) }

// multipartFile writes a multipart body with content as the part "file"
// and returns its content type.
func multipartFile(t *testing.T, buf *bytes.Buffer, content string) string {
	t.Helper()
	mw := multipart.NewWriter(buf)
	fw, err := mw.CreateFormFile("file", "planted")
	require.NoError(t, err)
	_, _ = io.WriteString(fw, content)
	require.NoError(t, mw.Close())
	return mw.FormDataContentType()
}
