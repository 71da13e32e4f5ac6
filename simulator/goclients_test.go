package simulator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	tb "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOfficialGoClientsThroughTheSimulator drives a native sandbox as the
// Go SDK does: the official api-client creates it, and the official
// toolbox-api-client reaches its toolbox at toolboxProxyUrl/<id> with the
// API key, through fs, process, code-run, sessions (follow included), PTY,
// git against a local fixture, LSP, interpreter contexts and preview.
func TestOfficialGoClientsThroughTheSimulator(t *testing.T) {
	for _, tool := range []string{"python3", "git", "pylsp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the toolbox features run it", tool)
		}
	}
	h := nativeHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	base := strings.TrimRight(sb.ToolboxProxyUrl, "/") + "/" + sb.Id
	cfg := tb.NewConfiguration()
	cfg.Servers = tb.ServerConfigurations{{URL: base}}
	cfg.HTTPClient = h.srv.Client()
	cfg.AddDefaultHeader("Authorization", "Bearer "+testKey)
	c := tb.NewAPIClient(cfg)
	ctx := context.Background()
	ok := func(resp *http.Response, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300)
	}
	sh := func(command string) string {
		t.Helper()
		out, _, err := c.ProcessAPI.ExecuteCommand(ctx).Request(*tb.NewExecuteRequest(command)).Execute()
		require.NoError(t, err)
		require.Equal(t, int32(0), out.GetExitCode(), out.Result)
		return out.Result
	}

	t.Run("file system", func(t *testing.T) {
		wd, _, err := c.InfoAPI.GetWorkDir(ctx).Execute()
		require.NoError(t, err)
		ok(c.FileSystemAPI.CreateFolder(ctx).Path("docs").Mode("0755").Execute())
		f, err := os.CreateTemp(t.TempDir(), "up")
		require.NoError(t, err)
		_, _ = f.WriteString("through the proxy\n")
		_, _ = f.Seek(0, 0)
		_, _, err = c.FileSystemAPI.UploadFile(ctx).Path("docs/a.txt").File(f).Execute()
		f.Close()
		require.NoError(t, err)
		info, _, err := c.FileSystemAPI.GetFileInfo(ctx).Path(wd.Dir + "/docs/a.txt").Execute()
		require.NoError(t, err)
		assert.Equal(t, int32(18), info.Size)
		got, _, err := c.FileSystemAPI.DownloadFile(ctx).Path("docs/a.txt").Execute()
		require.NoError(t, err)
		b, err := io.ReadAll(got)
		require.NoError(t, err)
		assert.Equal(t, "through the proxy\n", string(b))
	})

	t.Run("process and code-run", func(t *testing.T) {
		assert.Equal(t, "hi\n", sh("echo hi"))
		run, _, err := c.ProcessAPI.CodeRun(ctx).Request(*tb.NewCodeRunRequest("print(6*7)", "python")).Execute()
		require.NoError(t, err)
		assert.Equal(t, "42\n", run.GetResult())
	})

	t.Run("sessions with followed logs", func(t *testing.T) {
		ok(c.ProcessAPI.CreateSession(ctx).Request(*tb.NewCreateSessionRequest("go-follow")).Execute())
		req := tb.NewSessionExecuteRequest(`for i in 1 2 3; do echo "line $i"; sleep 0.1; done; echo oops >&2`)
		req.SetRunAsync(true)
		started, _, err := c.ProcessAPI.SessionExecuteCommand(ctx, "go-follow").Request(*req).Execute()
		require.NoError(t, err)
		stdout, stderr := followLogs(t, h, sb.Id, "go-follow", started.CmdId)
		assert.Equal(t, "line 1\nline 2\nline 3\n", stdout)
		assert.Equal(t, "oops\n", stderr)
		ok(c.ProcessAPI.DeleteSession(ctx, "go-follow").Execute())
	})

	t.Run("pty", func(t *testing.T) {
		req := tb.NewPtyCreateRequest()
		req.SetId("go-pty")
		_, _, err := c.ProcessAPI.CreatePtySession(ctx).Request(*req).Execute()
		require.NoError(t, err)
		list, _, err := c.ProcessAPI.ListPtySessions(ctx).Execute()
		require.NoError(t, err)
		require.Len(t, list.Sessions, 1)
		_, _, err = c.ProcessAPI.DeletePtySession(ctx, "go-pty").Execute()
		require.NoError(t, err)
	})

	t.Run("git against a local fixture", func(t *testing.T) {
		repo := gitFixture(t)
		ok(c.GitAPI.CloneRepository(ctx).Request(*tb.NewGitCloneRequest("repo", repo)).Execute())
		st, _, err := c.GitAPI.GetStatus(ctx).Path("repo").Execute()
		require.NoError(t, err)
		assert.Equal(t, "main", st.CurrentBranch)
		history, _, err := c.GitAPI.GetCommitHistory(ctx).Path("repo").Execute()
		require.NoError(t, err)
		assert.Len(t, history, 2)
		assert.Equal(t, "fixture\n", sh("cat repo/README.md"))
	})

	t.Run("lsp", func(t *testing.T) {
		sh("mkdir -p py && printf 'def hello():\\n    return 1\\n' > py/m.py")
		srv := *tb.NewLspServerRequest("python", "py")
		ok(c.LspAPI.Start(ctx).Request(srv).Execute())
		ok(c.LspAPI.DidOpen(ctx).Request(*tb.NewLspDocumentRequest("python", "py", "file://m.py")).Execute())
		_, _, err := c.LspAPI.DocumentSymbols(ctx).LanguageId("python").PathToProject("py").Uri("file://m.py").Execute()
		require.NoError(t, err)
		ok(c.LspAPI.Stop(ctx).Request(srv).Execute())
	})

	t.Run("interpreter contexts", func(t *testing.T) {
		ictx, _, err := c.InterpreterAPI.CreateInterpreterContext(ctx).Request(tb.CreateContextRequest{}).Execute()
		require.NoError(t, err)
		list, _, err := c.InterpreterAPI.ListInterpreterContexts(ctx).Execute()
		require.NoError(t, err)
		require.Len(t, list.Contexts, 1)
		_, _, err = c.InterpreterAPI.DeleteInterpreterContext(ctx, ictx.Id).Execute()
		require.NoError(t, err)
	})

	t.Run("preview", func(t *testing.T) {
		port, err := freePort()
		require.NoError(t, err)
		ok(c.ProcessAPI.CreateSession(ctx).Request(*tb.NewCreateSessionRequest("web")).Execute())
		sh("mkdir -p site && echo preview-ok > site/index.html")
		req := tb.NewSessionExecuteRequest(fmt.Sprintf("cd site && python3 -m http.server %d --bind 127.0.0.1", port))
		req.SetRunAsync(true)
		_, _, err = c.ProcessAPI.SessionExecuteCommand(ctx, "web").Request(*req).Execute()
		require.NoError(t, err)
		link, _, err := h.api.SandboxAPI.GetPortPreviewUrl(h.ctx, sb.Id, float32(port)).Execute()
		require.NoError(t, err)
		var body string
		require.Eventually(t, func() bool {
			r, err := http.NewRequest("GET", link.Url+"/index.html", nil)
			require.NoError(t, err)
			r.Header.Set(previewTokenHeader, link.Token)
			resp, err := h.srv.Client().Do(r)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == http.StatusOK
		}, 15*time.Second, 50*time.Millisecond)
		assert.Equal(t, "preview-ok\n", body)
		ok(c.ProcessAPI.DeleteSession(ctx, "web").Execute())
	})
}

// followLogs reads a session command's logs over the WebSocket the SDKs
// follow them on, through the simulator's toolbox proxy, until the
// toolbox closes it: each binary message is a 3-byte stream marker (01 01
// 01 stdout, 02 02 02 stderr) and that stream's bytes.
func followLogs(t *testing.T, h *harness, sandboxID, session, cmdID string) (stdout, stderr string) {
	t.Helper()
	return followToolboxLogs(t, h, sandboxID, "/process/session/"+session+"/command/"+cmdID+"/logs")
}

// followToolboxLogs is followLogs of the toolbox's logs at path (a
// command's, or the entrypoint's).
func followToolboxLogs(t *testing.T, h *harness, sandboxID, path string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/toolbox/" + sandboxID + path + "?follow=true"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + testKey}},
	})
	require.NoError(t, err)
	defer conn.CloseNow()
	var out, errs strings.Builder
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "the stream ends normally: %v", err)
			return out.String(), errs.String()
		}
		require.GreaterOrEqual(t, len(msg), 3, "a marker leads every message")
		switch string(msg[:3]) {
		case "\x01\x01\x01":
			out.Write(msg[3:])
		case "\x02\x02\x02":
			errs.Write(msg[3:])
		default:
			t.Fatalf("a message without a stream marker: %q", msg)
		}
	}
}
