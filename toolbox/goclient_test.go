package toolbox

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	tb "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// TestOfficialGoClient drives the toolbox with Daytona's official Go
// toolbox client, every request and response checked against the spec.
func TestOfficialGoClient(t *testing.T) {
	requireTool(t, "python3")
	requireTool(t, "pylsp")
	isolateGit(t)
	ts := newTestServer(t, Options{Entrypoint: `echo entry-ready; read -r line; echo "entry got $line"`})
	v := newSpecValidator(t)
	cfg := tb.NewConfiguration()
	cfg.Servers = tb.ServerConfigurations{{URL: ts.url}}
	cfg.HTTPClient = &http.Client{Transport: v}
	cfg.AddDefaultHeader(TokenHeader, ts.opts.Token)
	c := tb.NewAPIClient(cfg)
	ctx := context.Background()
	ok := func(resp *http.Response, err error) *http.Response {
		t.Helper()
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300)
		return resp
	}

	t.Run("info and init", func(t *testing.T) {
		wd, _, err := c.InfoAPI.GetWorkDir(ctx).Execute()
		require.NoError(t, err)
		assert.Equal(t, ts.workDir, wd.Dir)
		_, _, err = c.InfoAPI.GetUserHomeDir(ctx).Execute()
		require.NoError(t, err)
		_, _, err = c.InfoAPI.GetVersion(ctx).Execute()
		require.NoError(t, err)
		_, _, err = c.ServerAPI.Initialize(ctx).Request(*tb.NewInitializeRequest("token")).Execute()
		require.NoError(t, err)
	})

	t.Run("file system", func(t *testing.T) {
		fs := c.FileSystemAPI
		ok(fs.CreateFolder(ctx).Path("docs").Mode("0755").Execute())
		f, err := os.CreateTemp(t.TempDir(), "up")
		require.NoError(t, err)
		_, err = f.WriteString("hello old world\n")
		require.NoError(t, err)
		_, err = f.Seek(0, 0)
		require.NoError(t, err)
		_, _, err = fs.UploadFile(ctx).Path("docs/a.txt").File(f).Execute()
		require.NoError(t, err)
		f.Close()

		list, _, err := fs.ListFiles(ctx).Path("docs").Execute()
		require.NoError(t, err)
		require.Len(t, list, 1)
		info, _, err := fs.GetFileInfo(ctx).Path("docs/a.txt").Execute()
		require.NoError(t, err)
		assert.Equal(t, int32(16), info.Size)

		matches, _, err := fs.FindInFiles(ctx).Path("docs").Pattern("old").Execute()
		require.NoError(t, err)
		require.Len(t, matches, 1)
		assert.Equal(t, int32(1), matches[0].Line)
		found, _, err := fs.SearchFiles(ctx).Path("docs").Pattern("*.txt").Execute()
		require.NoError(t, err)
		assert.Equal(t, []string{"docs/a.txt"}, found.Files)
		res, _, err := fs.ReplaceInFiles(ctx).Request(*tb.NewReplaceRequest([]string{"docs/a.txt"}, "new", "old")).Execute()
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.True(t, res[0].GetSuccess())
		ok(fs.SetFilePermissions(ctx).Path("docs/a.txt").Mode("0600").Execute())
		ok(fs.MoveFile(ctx).Source("docs/a.txt").Destination("docs/b.txt").Execute())

		dl, _, err := fs.DownloadFile(ctx).Path("docs/b.txt").Execute()
		require.NoError(t, err)
		b, err := os.ReadFile(dl.Name())
		require.NoError(t, err)
		dl.Close()
		os.Remove(dl.Name())
		assert.Equal(t, "hello new world\n", string(b))
		ok(fs.DeleteFile(ctx).Path("docs").Recursive(true).Execute())
	})

	t.Run("process and code-run", func(t *testing.T) {
		out, _, err := c.ProcessAPI.ExecuteCommand(ctx).Request(*tb.NewExecuteRequest("echo hi")).Execute()
		require.NoError(t, err)
		assert.Equal(t, "hi\n", out.Result)
		run, _, err := c.ProcessAPI.CodeRun(ctx).Request(*tb.NewCodeRunRequest("print(6*7)", "python")).Execute()
		require.NoError(t, err)
		assert.Equal(t, "42\n", run.GetResult())
		assert.Equal(t, int32(0), run.GetExitCode())
	})

	t.Run("sessions, input and the entrypoint", func(t *testing.T) {
		p := c.ProcessAPI
		ok(p.CreateSession(ctx).Request(*tb.NewCreateSessionRequest("go-sess")).Execute())
		out, _, err := p.SessionExecuteCommand(ctx, "go-sess").Request(*tb.NewSessionExecuteRequest(`a=(x y); [[ ${#a[@]} == 2 ]] && echo bash`)).Execute()
		require.NoError(t, err)
		assert.Equal(t, "bash\n", out.GetStdout())
		assert.Equal(t, int32(0), out.GetExitCode())

		out, _, err = p.SessionExecuteCommand(ctx, "go-sess").Request(*tb.NewSessionExecuteRequest("no-such-program-xyz")).Execute()
		require.NoError(t, err)
		assert.Equal(t, int32(127), out.GetExitCode())
		assert.Contains(t, out.GetStderr(), "no-such-program-xyz: command not found")

		req := tb.NewSessionExecuteRequest(`read -r name; echo "hi $name"`)
		req.SetRunAsync(true)
		req.SetSuppressInputEcho(true)
		started, resp, err := p.SessionExecuteCommand(ctx, "go-sess").Request(*req).Execute()
		require.NoError(t, err)
		assert.Equal(t, http.StatusAccepted, resp.StatusCode)
		ok(p.SendInput(ctx, "go-sess", started.CmdId).Request(*tb.NewSessionSendInputRequest("ada\n")).Execute())
		waitFor(t, "the async command to end", func() bool {
			cmd, _, err := p.GetSessionCommand(ctx, "go-sess", started.CmdId).Execute()
			require.NoError(t, err)
			return cmd.ExitCode != nil
		})
		logs, _, err := p.GetSessionCommandLogs(ctx, "go-sess", started.CmdId).Execute()
		require.NoError(t, err)
		assert.Equal(t, "hi ada\n", logs.Stdout)
		resp, err = p.SendInput(ctx, "go-sess", started.CmdId).Request(*tb.NewSessionSendInputRequest("late\n")).Execute()
		require.Error(t, err, "input to a command that has ended")
		assert.Equal(t, http.StatusGone, resp.StatusCode)
		var gone *tb.GenericOpenAPIError
		require.ErrorAs(t, err, &gone)
		var body wire.ErrorResponse
		require.NoError(t, json.Unmarshal(gone.Body(), &body))
		assert.Equal(t, wire.CodeCommandAlreadyCompleted, body.Code)
		assert.Equal(t, wire.SourceDaemon, body.Source)

		entry, _, err := p.GetEntrypointSession(ctx).Execute()
		require.NoError(t, err)
		assert.Equal(t, "entrypoint", entry.SessionId)
		require.Len(t, entry.Commands, 1)
		ok(p.SendInput(ctx, "entrypoint", entry.Commands[0].Id).Request(*tb.NewSessionSendInputRequest("go\n")).Execute())
		waitFor(t, "the entrypoint to end", func() bool {
			e, _, err := p.GetEntrypointSession(ctx).Execute()
			require.NoError(t, err)
			return e.Commands[0].ExitCode != nil
		})
		elogs, _, err := p.GetEntrypointLogs(ctx).Execute()
		require.NoError(t, err)
		assert.Equal(t, "entry-ready\ngo\nentry got go\n", elogs.Stdout)

		list, _, err := p.ListSessions(ctx).Execute()
		require.NoError(t, err)
		assert.Len(t, list, 2)
		sess, _, err := p.GetSession(ctx, "go-sess").Execute()
		require.NoError(t, err)
		assert.Len(t, sess.Commands, 3)
		ok(p.DeleteSession(ctx, "go-sess").Execute())
	})

	t.Run("pty", func(t *testing.T) {
		req := tb.NewPtyCreateRequest()
		req.SetId("go-client")
		req.SetCols(90)
		req.SetRows(20)
		created, _, err := c.ProcessAPI.CreatePtySession(ctx).Request(*req).Execute()
		require.NoError(t, err)
		assert.Equal(t, "go-client", created.SessionId)
		list, _, err := c.ProcessAPI.ListPtySessions(ctx).Execute()
		require.NoError(t, err)
		require.Len(t, list.Sessions, 1)
		info, _, err := c.ProcessAPI.ResizePtySession(ctx, "go-client").Request(*tb.NewPtyResizeRequest(120, 40)).Execute()
		require.NoError(t, err)
		assert.Equal(t, int32(120), info.Cols)
		info, _, err = c.ProcessAPI.GetPtySession(ctx, "go-client").Execute()
		require.NoError(t, err)
		assert.Equal(t, int32(40), info.Rows)
		_, _, err = c.ProcessAPI.DeletePtySession(ctx, "go-client").Execute()
		require.NoError(t, err)
	})

	t.Run("git against a local fixture", func(t *testing.T) {
		bare := filepath.Join(t.TempDir(), "origin.git")
		bareFixture(t, bare)
		g := c.GitAPI
		ok(g.CloneRepository(ctx).Request(*tb.NewGitCloneRequest("repo", "file://"+bare)).Execute())
		ok(g.CreateBranch(ctx).Request(*tb.NewGitBranchRequest("topic", "repo")).Execute())
		branches, _, err := g.ListBranches(ctx).Path("repo").Execute()
		require.NoError(t, err)
		assert.Equal(t, []string{"main", "topic"}, branches.Branches)
		require.NoError(t, os.WriteFile(filepath.Join(ts.workDir, "repo", "t.txt"), []byte("t"), 0o644))
		st, _, err := g.GetStatus(ctx).Path("repo").Execute()
		require.NoError(t, err)
		assert.Equal(t, "topic", st.CurrentBranch)
		require.Len(t, st.FileStatus, 1)
		assert.Equal(t, tb.STATUS_Untracked, st.FileStatus[0].Worktree)
		ok(g.AddFiles(ctx).Request(*tb.NewGitAddRequest([]string{"."}, "repo")).Execute())
		commit, _, err := g.CommitChanges(ctx).Request(*tb.NewGitCommitRequest("Ada", "ada@example.com", "add t", "repo")).Execute()
		require.NoError(t, err)
		history, _, err := g.GetCommitHistory(ctx).Path("repo").Execute()
		require.NoError(t, err)
		assert.Equal(t, commit.Hash, history[0].Hash)
		ok(g.PushChanges(ctx).Request(*tb.NewGitRepoRequest("repo")).Execute())
		ok(g.PullChanges(ctx).Request(*tb.NewGitRepoRequest("repo")).Execute())
		ok(g.CheckoutBranch(ctx).Request(*tb.NewGitCheckoutRequest("main", "repo")).Execute())
		ok(g.DeleteBranch(ctx).Request(*tb.NewGitDeleteBranchRequest("topic", "repo")).Execute())
	})

	t.Run("lsp", func(t *testing.T) {
		writeFiles(t, ts.workDir, map[string]string{"py/m.py": "import os\n\ndef hello():\n    return 1\n\nos.\n"})
		l := c.LspAPI
		srv := *tb.NewLspServerRequest("python", "py")
		ok(l.Start(ctx).Request(srv).Execute())
		ok(l.DidOpen(ctx).Request(*tb.NewLspDocumentRequest("python", "py", "file://m.py")).Execute())
		syms, _, err := l.DocumentSymbols(ctx).LanguageId("python").PathToProject("py").Uri("file://m.py").Execute()
		require.NoError(t, err)
		assert.Contains(t, symbolNames(toLspSymbols(syms)), "hello")
		list, _, err := l.Completions(ctx).Request(*tb.NewLspCompletionParams("python", "py", *tb.NewLspPosition(3, 3), "file://m.py")).Execute()
		require.NoError(t, err)
		assert.NotEmpty(t, list.Items)
		ws, _, err := l.WorkspaceSymbols(ctx).Query("hello").LanguageId("python").PathToProject("py").Execute()
		require.NoError(t, err)
		assert.Equal(t, []string{"hello"}, symbolNames(toLspSymbols(ws)))
		ok(l.DidClose(ctx).Request(*tb.NewLspDocumentRequest("python", "py", "file://m.py")).Execute())
		ok(l.Stop(ctx).Request(srv).Execute())
	})

	t.Run("interpreter contexts", func(t *testing.T) {
		ictx, _, err := c.InterpreterAPI.CreateInterpreterContext(ctx).Request(tb.CreateContextRequest{}).Execute()
		require.NoError(t, err)
		list, _, err := c.InterpreterAPI.ListInterpreterContexts(ctx).Execute()
		require.NoError(t, err)
		require.Len(t, list.Contexts, 1)
		assert.Equal(t, ictx.Id, list.Contexts[0].Id)
		_, _, err = c.InterpreterAPI.DeleteInterpreterContext(ctx, ictx.Id).Execute()
		require.NoError(t, err)
		_, resp, err := c.InterpreterAPI.DeleteInterpreterContext(ctx, ictx.Id).Execute()
		require.Error(t, err)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	})

	t.Run("ports", func(t *testing.T) {
		_, _, err := c.PortAPI.GetPorts(ctx).Execute()
		require.NoError(t, err)
		inUse, _, err := c.PortAPI.IsPortInUse(ctx, 3000).Execute()
		require.NoError(t, err)
		assert.False(t, inUse.GetIsInUse())
	})

	t.Run("computer use is not available", func(t *testing.T) {
		_, resp, err := c.ComputerUseAPI.GetComputerUseSystemStatus(ctx).Execute()
		require.Error(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	})

	t.Logf("operations exercised through the official client: %d", len(v.seen))
	for _, e := range specExceptions {
		t.Logf("spec exception: %s (status %d): %s, because %s", e.operation, e.status, e.what, e.why)
	}
}

func toLspSymbols(in []tb.LspSymbol) []wire.LspSymbol {
	out := make([]wire.LspSymbol, 0, len(in))
	for _, s := range in {
		out = append(out, wire.LspSymbol{Name: s.Name, Kind: int(s.Kind)})
	}
	return out
}
