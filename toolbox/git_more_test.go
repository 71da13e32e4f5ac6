package toolbox

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// The git operations later toolbox releases added: init, remotes,
// configuration, reset and restore.
func TestGitLaterOperations(t *testing.T) {
	globalConfig := isolateGit(t)
	bare := filepath.Join(t.TempDir(), "origin.git")
	bareFixture(t, bare)
	ts := newTestServer(t, Options{})
	repo := filepath.Join(ts.workDir, "fresh")

	t.Run("init", func(t *testing.T) {
		gitOK(t, ts, http.MethodPost, "/git/init", wire.GitInitRequest{Path: "fresh", InitialBranch: "trunk"}, 200)
		assert.Equal(t, "trunk", gitStatus(t, ts, "fresh").CurrentBranch)
		gitOK(t, ts, http.MethodPost, "/git/init", wire.GitInitRequest{Path: "bare.git", Bare: true}, 200)
		assert.Equal(t, "true", gitRun(t, filepath.Join(ts.workDir, "bare.git"), "rev-parse", "--is-bare-repository"))
	})

	t.Run("remotes", func(t *testing.T) {
		var list wire.ListRemotesResponse
		ts.get(t, "/git/remotes?path=fresh").json(t, &list)
		assert.Equal(t, []wire.GitRemote{}, list.Remotes)

		gitOK(t, ts, http.MethodPost, "/git/remotes", wire.GitAddRemoteRequest{Path: "fresh", Name: "origin", URL: "file:///elsewhere.git"}, 200)
		resp := ts.postJSON(t, "/git/remotes", wire.GitAddRemoteRequest{Path: "fresh", Name: "origin", URL: "file://" + bare})
		require.Equal(t, http.StatusBadRequest, resp.status, "a remote that exists needs overwrite: %s", resp.body)
		assert.Contains(t, resp.apiErr(t).Message, "already exists")
		gitOK(t, ts, http.MethodPost, "/git/remotes", wire.GitAddRemoteRequest{Path: "fresh", Name: "origin", URL: "file://" + bare, Overwrite: true, Fetch: true}, 200)
		assert.Equal(t, gitRun(t, bare, "rev-parse", "main"), gitRun(t, repo, "rev-parse", "origin/main"), "fetched at once")
		gitOK(t, ts, http.MethodPost, "/git/remotes", wire.GitAddRemoteRequest{Path: "fresh", Name: "backup", URL: "file:///backup.git"}, 200)

		ts.get(t, "/git/remotes?path=fresh").json(t, &list)
		assert.Equal(t, []wire.GitRemote{{Name: "backup", URL: "file:///backup.git"}, {Name: "origin", URL: "file://" + bare}}, list.Remotes)
	})

	t.Run("config", func(t *testing.T) {
		var got wire.GitConfigResponse
		ts.get(t, "/git/config?key=sandplane.test").json(t, &got)
		assert.Nil(t, got.Value, "a key that is not set")

		gitOK(t, ts, http.MethodPost, "/git/config", wire.GitSetConfigRequest{Key: "sandplane.test", Value: "global value"}, 200)
		ts.get(t, "/git/config?key=sandplane.test").json(t, &got)
		require.NotNil(t, got.Value)
		assert.Equal(t, "global value", *got.Value)
		b, err := os.ReadFile(globalConfig)
		require.NoError(t, err)
		assert.Contains(t, string(b), "global value", "global is the user's config")

		gitOK(t, ts, http.MethodPost, "/git/config", wire.GitSetConfigRequest{Key: "sandplane.test", Value: "local", Scope: "local", Path: "fresh"}, 200)
		ts.get(t, "/git/config?key=sandplane.test&scope=local&path=fresh").json(t, &got)
		assert.Equal(t, "local", *got.Value)

		gitOK(t, ts, http.MethodPost, "/git/config/user", wire.GitConfigureUserRequest{Name: "Ada", Email: "ada@example.com", Scope: "local", Path: "fresh"}, 200)
		assert.Equal(t, "Ada ada@example.com", gitRun(t, repo, "config", "--local", "user.name")+" "+gitRun(t, repo, "config", "--local", "user.email"))
	})

	t.Run("reset and restore", func(t *testing.T) {
		gitRun(t, repo, "checkout", "-q", "-b", "main", "origin/main")
		readme := filepath.Join(repo, "README.md")
		require.NoError(t, os.WriteFile(readme, []byte("changed\n"), 0o644))
		gitOK(t, ts, http.MethodPost, "/git/add", wire.GitAddRequest{Path: "fresh", Files: []string{"README.md"}}, 200)

		gitOK(t, ts, http.MethodPost, "/git/reset", wire.GitResetRequest{Path: "fresh", Files: []string{"README.md"}}, 200)
		assert.Equal(t, []wire.FileStatus{{Name: "README.md", Staging: "Unmodified", Worktree: "Modified"}}, gitStatus(t, ts, "fresh").FileStatus,
			"a reset of a file unstages it")
		gitOK(t, ts, http.MethodPost, "/git/restore", wire.GitRestoreRequest{Path: "fresh", Files: []string{"README.md"}}, 200)
		assert.Empty(t, gitStatus(t, ts, "fresh").FileStatus, "restore brings back the index's content")

		first := gitRun(t, bare, "rev-list", "--max-parents=0", "main")
		gitOK(t, ts, http.MethodPost, "/git/restore", wire.GitRestoreRequest{Path: "fresh", Files: []string{"README.md"}, Source: first, Staged: true, Worktree: true}, 200)
		assert.Empty(t, gitStatus(t, ts, "fresh").FileStatus, "README.md is the same in the first commit")

		gitRun(t, repo, "commit", "-q", "--allow-empty", "-m", "second")
		gitOK(t, ts, http.MethodPost, "/git/reset", wire.GitResetRequest{Path: "fresh", Mode: "hard", Target: first}, 200)
		assert.Equal(t, first, gitRun(t, repo, "rev-parse", "HEAD"))
	})

	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			name, method, path string
			body               any
			status             int
		}{
			{"init without path", http.MethodPost, "/git/init", wire.GitInitRequest{}, 400},
			{"init with an option as branch", http.MethodPost, "/git/init", wire.GitInitRequest{Path: "x", InitialBranch: "--bare"}, 400},
			{"remotes of a missing repo", http.MethodGet, "/git/remotes?path=nope", nil, 404},
			{"remote without url", http.MethodPost, "/git/remotes", wire.GitAddRemoteRequest{Path: "fresh", Name: "x"}, 400},
			{"remote url as an option", http.MethodPost, "/git/remotes", wire.GitAddRemoteRequest{Path: "fresh", Name: "x", URL: "--mirror"}, 400},
			{"config key without a section", http.MethodGet, "/git/config?key=name", nil, 400},
			{"config of another scope", http.MethodGet, "/git/config?key=a.b&scope=worktree", nil, 400},
			{"local config without a repo", http.MethodPost, "/git/config", wire.GitSetConfigRequest{Key: "a.b", Value: "c", Scope: "local"}, 400},
			{"user without email", http.MethodPost, "/git/config/user", wire.GitConfigureUserRequest{Name: "x"}, 400},
			{"reset with an unknown mode", http.MethodPost, "/git/reset", wire.GitResetRequest{Path: "fresh", Mode: "all"}, 400},
			{"hard reset of files", http.MethodPost, "/git/reset", wire.GitResetRequest{Path: "fresh", Mode: "hard", Files: []string{"README.md"}}, 400},
			{"reset to an unknown revision", http.MethodPost, "/git/reset", wire.GitResetRequest{Path: "fresh", Target: "nope"}, 400},
			{"restore nothing", http.MethodPost, "/git/restore", wire.GitRestoreRequest{Path: "fresh"}, 400},
		} {
			t.Run(tt.name, func(t *testing.T) {
				var resp response
				if tt.body == nil {
					resp = ts.do(t, tt.method, tt.path, nil, "")
				} else {
					resp = ts.do(t, tt.method, tt.path, jsonReader(t, tt.body), "application/json")
				}
				require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
				resp.apiErr(t)
			})
		}
	})
}
