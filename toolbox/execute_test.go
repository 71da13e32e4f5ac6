package toolbox

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestExecute(t *testing.T) {
	ts := newTestServer(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "sub"), 0o755))

	tests := []struct {
		name     string
		body     any
		wantCode int
		wantExit int
		wantOut  string
		wantErr  string // substring of the error message
		errCode  string
	}{
		{name: "echo", body: wire.ExecuteRequest{Command: "echo hello"}, wantCode: 200, wantOut: "hello\n"},
		{name: "shell syntax", body: wire.ExecuteRequest{Command: "for i in 1 2 3; do printf $i; done | tr 1 x"}, wantCode: 200, wantOut: "x23"},
		{name: "non-zero exit is still 200", body: wire.ExecuteRequest{Command: "echo out; exit 3"}, wantCode: 200, wantExit: 3, wantOut: "out\n"},
		{
			name:     "stdout and stderr combined in write order",
			body:     wire.ExecuteRequest{Command: "echo one; echo two >&2; echo three; echo four >&2"},
			wantCode: 200, wantOut: "one\ntwo\nthree\nfour\n",
		},
		{name: "default cwd is the work dir", body: wire.ExecuteRequest{Command: "pwd"}, wantCode: 200, wantOut: "WORKDIR\n"},
		{name: "relative cwd", body: wire.ExecuteRequest{Command: "pwd", Cwd: ptr("sub")}, wantCode: 200, wantOut: "WORKDIR/sub\n"},
		{name: "absolute cwd", body: wire.ExecuteRequest{Command: "pwd", Cwd: ptr("/")}, wantCode: 200, wantOut: "/\n"},
		{
			name:     "envs are added to the environment",
			body:     wire.ExecuteRequest{Command: `printf '%s|%s' "$GREETING" "$HOME"`, Envs: map[string]string{"GREETING": "hi there", "HOME": "/nowhere"}},
			wantCode: 200, wantOut: "hi there|/nowhere",
		},
		{name: "stdin is empty", body: wire.ExecuteRequest{Command: "cat; echo done"}, wantCode: 200, wantOut: "done\n"},
		{name: "shell syntax error", body: wire.ExecuteRequest{Command: "if then"}, wantCode: 200, wantExit: 2},
		{name: "unknown program", body: wire.ExecuteRequest{Command: "no-such-program-xyz"}, wantCode: 200, wantExit: 127},
		{name: "missing cwd cannot start", body: wire.ExecuteRequest{Command: "true", Cwd: ptr("/no/such/dir")}, wantCode: 200, wantExit: -1, wantOut: "/no/such/dir"},
		{name: "timeout 0 means none", body: wire.ExecuteRequest{Command: "echo ok", Timeout: ptr[int64](0)}, wantCode: 200, wantOut: "ok\n"},
		{name: "unknown fields are ignored", body: `{"command":"echo x","language":"python"}`, wantCode: 200, wantOut: "x\n"},
		{name: "empty command", body: wire.ExecuteRequest{Command: ""}, wantCode: 400, errCode: "BAD_REQUEST", wantErr: "command cannot be empty"},
		{name: "whitespace command", body: wire.ExecuteRequest{Command: " \t\n "}, wantCode: 400, errCode: "BAD_REQUEST", wantErr: "command cannot be empty"},
		{name: "missing command", body: `{}`, wantCode: 400, errCode: "BAD_REQUEST", wantErr: "command cannot be empty"},
		{name: "not JSON", body: `command=ls`, wantCode: 400, errCode: "INVALID_REQUEST_BODY"},
		{name: "wrong type", body: `{"command":["ls"]}`, wantCode: 400, errCode: "INVALID_REQUEST_BODY"},
		{name: "fractional timeout", body: `{"command":"ls","timeout":1.5}`, wantCode: 400, errCode: "INVALID_REQUEST_BODY"},
		{name: "negative timeout", body: wire.ExecuteRequest{Command: "ls", Timeout: ptr[int64](-1)}, wantCode: 400, wantErr: "timeout"},
		{name: "NUL in command", body: wire.ExecuteRequest{Command: "echo a\x00b"}, wantCode: 400, wantErr: "NUL"},
		{name: "bad env name", body: wire.ExecuteRequest{Command: "ls", Envs: map[string]string{"A=B": "x"}}, wantCode: 400, wantErr: "environment variable name"},
		{name: "empty env name", body: wire.ExecuteRequest{Command: "ls", Envs: map[string]string{"": "x"}}, wantCode: 400, wantErr: "environment variable name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/process/execute", tt.body)
			require.Equal(t, tt.wantCode, resp.status, "body: %s", resp.body)
			if tt.wantCode != http.StatusOK {
				e := resp.apiErr(t)
				assert.Contains(t, e.Message, tt.wantErr)
				if tt.errCode != "" {
					assert.Equal(t, tt.errCode, e.Code)
				}
				assert.Equal(t, "/process/execute", e.Path)
				assert.Equal(t, http.MethodPost, e.Method)
				return
			}
			var got wire.ExecuteResponse
			resp.json(t, &got)
			assert.Equal(t, tt.wantExit, got.ExitCode, "result: %q", got.Result)
			want := strings.ReplaceAll(tt.wantOut, "WORKDIR", ts.workDir)
			if tt.wantExit == -1 {
				assert.Contains(t, got.Result, want)
			} else if tt.wantOut != "" {
				assert.Equal(t, want, got.Result)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestExecuteTimeoutKillsProcessGroup(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	ts := newTestServer(t, Options{Clock: clk})
	pidFile := filepath.Join(t.TempDir(), "child.pid")

	// The background child is in the command's process group; the timeout
	// must take it down along with the shell.
	cmd := "sleep 300 & echo $! > " + pidFile + "; wait"
	done := make(chan response, 1)
	go func() {
		done <- ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: cmd, Timeout: ptr[int64](5)})
	}()
	child := readPID(t, pidFile)
	t.Cleanup(func() { killPID(t, child) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, clk.BlockUntilWaiters(ctx, 1))

	clk.Advance(4 * time.Second)
	select {
	case resp := <-done:
		t.Fatalf("answered before the timeout: %d %s", resp.status, resp.body)
	default:
	}
	clk.Advance(time.Second)

	resp := <-done
	require.Equal(t, http.StatusRequestTimeout, resp.status, "body: %s", resp.body)
	e := resp.apiErr(t)
	assert.Equal(t, wire.CodeProcessExecutionTimeout, e.Code, "SDK 0.218 reads it as DaytonaProcessExecutionTimeoutError")
	assert.Equal(t, "command execution timeout", e.Message)
	waitFor(t, "background child to die", func() bool { return !processAlive(child) })
}

func TestExecuteRealTimeout(t *testing.T) {
	ts := newTestServer(t, Options{})
	resp := ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: "sleep 30", Timeout: ptr[int64](1)})
	require.Equal(t, http.StatusRequestTimeout, resp.status, "body: %s", resp.body)
}

func TestExecuteBackgroundChildDoesNotHoldTheAnswer(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	ts := newTestServer(t, Options{Clock: clk, OutputGrace: 2 * time.Second})
	pidFile := filepath.Join(t.TempDir(), "bg.pid")

	done := make(chan response, 1)
	go func() {
		done <- ts.postJSON(t, "/process/execute", wire.ExecuteRequest{
			Command: "echo started; sleep 300 & echo $! > " + pidFile,
		})
	}()
	bg := readPID(t, pidFile)
	t.Cleanup(func() { killPID(t, bg) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The shell has exited; the grace timer waits for the pipe that the
	// background sleep still holds.
	require.NoError(t, clk.BlockUntilWaiters(ctx, 1))
	clk.Advance(2 * time.Second)

	resp := <-done
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	var got wire.ExecuteResponse
	resp.json(t, &got)
	assert.Equal(t, 0, got.ExitCode)
	assert.Equal(t, "started\n", got.Result)
	assert.True(t, processAlive(bg), "a background job outlives its command, as with nohup")
}

func TestExecuteClientGoneKillsCommand(t *testing.T) {
	ts := newTestServer(t, Options{})
	pidFile := filepath.Join(t.TempDir(), "sh.pid")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/process/execute",
			strings.NewReader(`{"command":"echo $$ > `+pidFile+`; sleep 300"}`))
		ts.authorize(req, "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	pid := readPID(t, pidFile)
	t.Cleanup(func() { killPID(t, pid) })
	cancel()
	require.Error(t, <-errc)
	waitFor(t, "the command to be killed", func() bool { return !processAlive(pid) })
}

func TestExecuteOutputIsCapped(t *testing.T) {
	ts := newTestServer(t, Options{MaxOutputBytes: 10})
	resp := ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: "printf 0123456789abcdef"})
	require.Equal(t, http.StatusOK, resp.status)
	var got wire.ExecuteResponse
	resp.json(t, &got)
	assert.True(t, strings.HasPrefix(got.Result, "0123456789\n[sandplane: output truncated, 6 more bytes dropped]"), got.Result)
}

func TestExecuteBodyTooLarge(t *testing.T) {
	ts := newTestServer(t, Options{})
	big := `{"command":"` + strings.Repeat("x", int(defaultMaxJSONBodyBytes)) + `"}`
	resp := ts.postJSON(t, "/process/execute", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.status)
	resp.apiErr(t)
}

func TestTimeoutDuration(t *testing.T) {
	tests := []struct {
		in   *int64
		want time.Duration
	}{
		{nil, 0},
		{ptr[int64](0), 0},
		{ptr[int64](-5), 0},
		{ptr[int64](7), 7 * time.Second},
		{ptr[int64](1 << 62), 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, timeoutDuration(tt.in))
	}
}

func FuzzExecuteRequest(f *testing.F) {
	for _, s := range []string{
		`{"command":"ls"}`,
		`{"command":"ls","cwd":"/tmp","envs":{"A":"b"},"timeout":3}`,
		`{"command":" "}`,
		`{"command":"x","timeout":-1}`,
		`{"command":"x","envs":{"A=B":"c"}}`,
		`{"command":1}`,
		`[]`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseExecuteRequest(body)
		if err != nil {
			e := asAPIError(err)
			if e.status != http.StatusBadRequest {
				t.Fatalf("status %d for a bad body", e.status)
			}
			return
		}
		if strings.TrimSpace(req.Command) == "" || strings.ContainsRune(req.Command, 0) {
			t.Fatalf("accepted command %q", req.Command)
		}
		if req.Timeout != nil && *req.Timeout < 0 {
			t.Fatalf("accepted negative timeout")
		}
		if err := validateEnv(req.Envs); err != nil {
			t.Fatalf("accepted bad env: %v", err)
		}
		if d := timeoutDuration(req.Timeout); d < 0 {
			t.Fatalf("negative duration %v", d)
		}
	})
}
