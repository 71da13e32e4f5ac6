package toolbox

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// isolateGit gives git (the test's and the toolbox's) a private global
// config and no system config, and returns that config's path.
func isolateGit(t *testing.T) string {
	t.Helper()
	requireTool(t, "git")
	cfg := filepath.Join(t.TempDir(), "gitconfig")
	require.NoError(t, os.WriteFile(cfg, []byte("[init]\n\tdefaultBranch = main\n[user]\n\tname = Fixture\n\temail = fixture@example.com\n"), 0o644))
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	return cfg
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// bareFixture makes a bare repository at path with README.md on main and
// dev.txt on a second branch, dev.
func bareFixture(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	gitRun(t, filepath.Dir(path), "init", "--bare", "-q", path)
	seed := t.TempDir()
	gitRun(t, seed, "clone", "-q", path, ".")
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README.md"), []byte("# fixture\n"), 0o644))
	gitRun(t, seed, "add", "README.md")
	gitRun(t, seed, "commit", "-q", "-m", "initial")
	gitRun(t, seed, "push", "-q", "origin", "main")
	gitRun(t, seed, "checkout", "-q", "-b", "dev")
	require.NoError(t, os.WriteFile(filepath.Join(seed, "dev.txt"), []byte("dev\n"), 0o644))
	gitRun(t, seed, "add", "dev.txt")
	gitRun(t, seed, "commit", "-q", "-m", "dev work")
	gitRun(t, seed, "push", "-q", "origin", "dev")
}

func gitStatus(t *testing.T, ts *testServer, path string) wire.GitStatus {
	t.Helper()
	resp := ts.get(t, "/git/status?path="+q(path))
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	var st wire.GitStatus
	resp.json(t, &st)
	return st
}

func gitOK(t *testing.T, ts *testServer, method, path string, body any, want int) {
	t.Helper()
	resp := ts.do(t, method, path, jsonReader(t, body), "application/json")
	require.Equal(t, want, resp.status, "%s %s: %s", method, path, resp.body)
}

func TestGitWorkflow(t *testing.T) {
	isolateGit(t)
	bare := filepath.Join(t.TempDir(), "origin.git")
	bareFixture(t, bare)
	ts := newTestServer(t, Options{})
	repo := filepath.Join(ts.workDir, "repo")

	gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "file://" + bare, Path: "repo"}, 200)
	st := gitStatus(t, ts, "repo")
	assert.Equal(t, wire.GitStatus{CurrentBranch: "main", FileStatus: []wire.FileStatus{}, BranchPublished: true, Upstream: "origin/main"}, st)

	require.NoError(t, os.WriteFile(filepath.Join(repo, "new.txt"), []byte("new\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("# changed\n"), 0o644))
	st = gitStatus(t, ts, repo)
	assert.ElementsMatch(t, []wire.FileStatus{
		{Name: "README.md", Staging: "Unmodified", Worktree: "Modified"},
		{Name: "new.txt", Staging: "Untracked", Worktree: "Untracked"},
	}, st.FileStatus)

	gitOK(t, ts, http.MethodPost, "/git/add", wire.GitAddRequest{Path: "repo", Files: []string{"."}}, 200)
	st = gitStatus(t, ts, "repo")
	assert.ElementsMatch(t, []wire.FileStatus{
		{Name: "README.md", Staging: "Modified", Worktree: "Unmodified"},
		{Name: "new.txt", Staging: "Added", Worktree: "Unmodified"},
	}, st.FileStatus)

	resp := ts.postJSON(t, "/git/commit", wire.GitCommitRequest{Path: "repo", Message: "second\n\nwith a body", Author: "Ada", Email: "ada@example.com"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	var commit wire.GitCommitResponse
	resp.json(t, &commit)
	assert.Regexp(t, "^[0-9a-f]{40}$", commit.Hash)
	st = gitStatus(t, ts, "repo")
	assert.Equal(t, 1, st.Ahead)
	assert.Empty(t, st.FileStatus)

	var history []wire.GitCommitInfo
	ts.get(t, "/git/history?path=repo").json(t, &history)
	require.Len(t, history, 2)
	assert.Equal(t, commit.Hash, history[0].Hash)
	assert.Equal(t, "Ada", history[0].Author)
	assert.Equal(t, "ada@example.com", history[0].Email)
	assert.Equal(t, "second\n\nwith a body", history[0].Message)
	assert.NotEmpty(t, history[0].Timestamp)
	assert.Equal(t, "initial", history[1].Message)

	gitOK(t, ts, http.MethodPost, "/git/push", wire.GitRepoRequest{Path: "repo"}, 200)
	assert.Equal(t, commit.Hash, gitRun(t, bare, "rev-parse", "main"))
	assert.Equal(t, 0, gitStatus(t, ts, "repo").Ahead)

	t.Run("branches", func(t *testing.T) {
		gitOK(t, ts, http.MethodPost, "/git/branches", wire.GitBranchRequest{Path: "repo", Name: "feature"}, 201)
		assert.Equal(t, "feature", gitStatus(t, ts, "repo").CurrentBranch, "creating a branch switches to it")
		var list wire.ListBranchResponse
		ts.get(t, "/git/branches?path=repo").json(t, &list)
		assert.Equal(t, []string{"feature", "main"}, list.Branches)

		resp := ts.do(t, http.MethodDelete, "/git/branches", jsonReader(t, wire.GitBranchRequest{Path: "repo", Name: "feature"}), "application/json")
		require.Equal(t, http.StatusBadRequest, resp.status, "the current branch cannot go: %s", resp.body)
		resp.apiErr(t)

		gitOK(t, ts, http.MethodPost, "/git/checkout", wire.GitCheckoutRequest{Path: "repo", Branch: "main"}, 200)
		gitOK(t, ts, http.MethodDelete, "/git/branches", wire.GitBranchRequest{Path: "repo", Name: "feature"}, 204)
		ts.get(t, "/git/branches?path=repo").json(t, &list)
		assert.Equal(t, []string{"main"}, list.Branches)

		gitOK(t, ts, http.MethodPost, "/git/checkout", wire.GitCheckoutRequest{Path: "repo", Branch: "dev"}, 200)
		st := gitStatus(t, ts, "repo")
		assert.Equal(t, "dev", st.CurrentBranch, "a remote branch checks out as a tracking branch")
		assert.True(t, st.BranchPublished)
		_, err := os.Stat(filepath.Join(repo, "dev.txt"))
		assert.NoError(t, err)
		gitOK(t, ts, http.MethodPost, "/git/checkout", wire.GitCheckoutRequest{Path: "repo", Branch: "main"}, 200)
	})

	t.Run("pull", func(t *testing.T) {
		other := t.TempDir()
		gitRun(t, other, "clone", "-q", bare, ".")
		require.NoError(t, os.WriteFile(filepath.Join(other, "pulled.txt"), []byte("from elsewhere\n"), 0o644))
		gitRun(t, other, "add", ".")
		gitRun(t, other, "commit", "-q", "-m", "elsewhere")
		gitRun(t, other, "push", "-q", "origin", "main")

		gitOK(t, ts, http.MethodPost, "/git/pull", wire.GitRepoRequest{Path: "repo"}, 200)
		b, err := os.ReadFile(filepath.Join(repo, "pulled.txt"))
		require.NoError(t, err)
		assert.Equal(t, "from elsewhere\n", string(b))
	})

	t.Run("a new branch is published by push", func(t *testing.T) {
		gitOK(t, ts, http.MethodPost, "/git/branches", wire.GitBranchRequest{Path: "repo", Name: "topic"}, 201)
		assert.False(t, gitStatus(t, ts, "repo").BranchPublished)
		gitOK(t, ts, http.MethodPost, "/git/commit", wire.GitCommitRequest{Path: "repo", Message: "empty", Author: "Ada", Email: "ada@example.com", AllowEmpty: true}, 200)
		gitOK(t, ts, http.MethodPost, "/git/push", wire.GitRepoRequest{Path: "repo"}, 200)
		assert.True(t, gitStatus(t, ts, "repo").BranchPublished)
		assert.Equal(t, gitRun(t, repo, "rev-parse", "HEAD"), gitRun(t, bare, "rev-parse", "topic"))
	})

	t.Run("rename", func(t *testing.T) {
		gitRun(t, repo, "mv", "new.txt", "renamed.txt")
		st := gitStatus(t, ts, "repo")
		assert.Contains(t, st.FileStatus, wire.FileStatus{Name: "renamed.txt", Staging: "Renamed", Worktree: "Unmodified", Extra: "new.txt"})
	})

	t.Run("clone a branch, and a commit", func(t *testing.T) {
		gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "file://" + bare, Path: "dev-clone", Branch: "dev"}, 200)
		assert.Equal(t, "dev", gitStatus(t, ts, "dev-clone").CurrentBranch)

		first := gitRun(t, bare, "rev-list", "--max-parents=0", "main")
		gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: bare, Path: "old", CommitID: first}, 200)
		old := gitStatus(t, ts, "old")
		assert.Equal(t, "HEAD", old.CurrentBranch, "detached at the commit")
		assert.True(t, old.Detached)
		var list wire.ListBranchResponse
		ts.get(t, "/git/branches?path=old").json(t, &list)
		assert.Empty(t, list.Current, "no current branch when detached")
		assert.Equal(t, first, gitRun(t, filepath.Join(ts.workDir, "old"), "rev-parse", "HEAD"))
	})

	// What later toolbox releases added: shallow clones, and pushes and
	// pulls that name their branch and remote.
	t.Run("depth, branch and remote", func(t *testing.T) {
		gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "file://" + bare, Path: "shallow", Depth: 1}, 200)
		shallow := filepath.Join(ts.workDir, "shallow")
		assert.Equal(t, "1", gitRun(t, shallow, "rev-list", "--count", "HEAD"))
		assert.Contains(t, gitRun(t, shallow, "branch", "-r"), "origin/dev", "a shallow clone keeps every branch")

		gitOK(t, ts, http.MethodPost, "/git/branches", wire.GitBranchRequest{Path: "shallow", Name: "named"}, 201)
		gitOK(t, ts, http.MethodPost, "/git/commit", wire.GitCommitRequest{Path: "shallow", Message: "named", Author: "Ada", Email: "ada@example.com", AllowEmpty: true}, 200)
		gitOK(t, ts, http.MethodPost, "/git/push", wire.GitRepoRequest{Path: "shallow", Branch: "named", Remote: "origin"}, 200)
		assert.Equal(t, gitRun(t, shallow, "rev-parse", "HEAD"), gitRun(t, bare, "rev-parse", "named"))
		st := gitStatus(t, ts, "shallow")
		assert.False(t, st.BranchPublished, "no upstream unless asked")
		gitOK(t, ts, http.MethodPost, "/git/push", wire.GitRepoRequest{Path: "shallow", SetUpstream: true}, 200)
		st = gitStatus(t, ts, "shallow")
		assert.True(t, st.BranchPublished)
		assert.Equal(t, "origin/named", st.Upstream)
		var list wire.ListBranchResponse
		ts.get(t, "/git/branches?path=shallow").json(t, &list)
		assert.Equal(t, "named", list.Current)

		// A branch without an upstream pulls the branch named, from the
		// remote named.
		gitRun(t, bare, "branch", "-f", "ahead", "named")
		other := t.TempDir()
		gitRun(t, other, "clone", "-q", "-b", "ahead", bare, ".")
		gitRun(t, other, "commit", "-q", "--allow-empty", "-m", "ahead")
		gitRun(t, other, "push", "-q", "origin", "ahead")
		gitRun(t, shallow, "remote", "add", "second", bare)
		gitRun(t, shallow, "checkout", "-q", "-b", "local")
		gitOK(t, ts, http.MethodPost, "/git/pull", wire.GitRepoRequest{Path: "shallow", Branch: "ahead", Remote: "second"}, 200)
		assert.Equal(t, gitRun(t, bare, "rev-parse", "ahead"), gitRun(t, shallow, "rev-parse", "HEAD"))

		resp := ts.postJSON(t, "/git/push", wire.GitRepoRequest{Path: "shallow", Remote: "--exec=x"})
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
		resp = ts.postJSON(t, "/git/pull", wire.GitRepoRequest{Path: "shallow", Branch: "-x"})
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
		resp = ts.postJSON(t, "/git/clone", wire.GitCloneRequest{URL: "file://" + bare, Path: "neg", Depth: -1})
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
	})

	t.Run("errors", func(t *testing.T) {
		require.NoError(t, os.Mkdir(filepath.Join(ts.workDir, "plain"), 0o755))
		for _, tt := range []struct {
			name, method, path string
			body               any
			status             int
			code               string
		}{
			{"clone into a non-empty dir", http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: bare, Path: "repo"}, 400, "BAD_REQUEST"},
			{"clone a missing repo", http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "file:///no/such/repo.git", Path: "x"}, 404, "GIT_REPO_NOT_FOUND"},
			{"clone without url", http.MethodPost, "/git/clone", wire.GitCloneRequest{Path: "x"}, 400, "BAD_REQUEST"},
			{"option as url", http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "--upload-pack=touch /tmp/x", Path: "x"}, 400, "BAD_REQUEST"},
			{"status of a plain dir", http.MethodGet, "/git/status?path=" + q(filepath.Join(ts.workDir, "plain")), nil, 404, "GIT_REPO_NOT_FOUND"},
			{"status of a missing dir", http.MethodGet, "/git/status?path=nope", nil, 404, "NOT_FOUND"},
			{"history without path", http.MethodGet, "/git/history", nil, 400, "BAD_REQUEST"},
			{"nothing to commit", http.MethodPost, "/git/commit", wire.GitCommitRequest{Path: "dev-clone", Message: "m", Author: "a", Email: "e@x"}, 400, "BAD_REQUEST"},
			{"commit without author", http.MethodPost, "/git/commit", wire.GitCommitRequest{Path: "repo", Message: "m"}, 400, "BAD_REQUEST"},
			{"checkout unknown", http.MethodPost, "/git/checkout", wire.GitCheckoutRequest{Path: "repo", Branch: "nope"}, 404, "GIT_BRANCH_NOT_FOUND"},
			{"branch named like an option", http.MethodPost, "/git/branches", wire.GitBranchRequest{Path: "repo", Name: "-D"}, 400, "BAD_REQUEST"},
			{"add nothing", http.MethodPost, "/git/add", wire.GitAddRequest{Path: "repo"}, 400, "BAD_REQUEST"},
			{"pull without a remote", http.MethodPost, "/git/pull", wire.GitRepoRequest{Path: "plain"}, 404, "GIT_REPO_NOT_FOUND"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				var resp response
				if tt.body == nil {
					resp = ts.do(t, tt.method, tt.path, nil, "")
				} else {
					resp = ts.do(t, tt.method, tt.path, jsonReader(t, tt.body), "application/json")
				}
				require.Equal(t, tt.status, resp.status, "body: %s", resp.body)
				assert.Equal(t, tt.code, resp.apiErr(t).Code, "SDK 0.218 picks its error class by this code")
			})
		}
	})

	t.Run("a commit of nothing says why", func(t *testing.T) {
		resp := ts.postJSON(t, "/git/commit", wire.GitCommitRequest{Path: "dev-clone", Message: "m", Author: "a", Email: "e@x"})
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
		assert.Contains(t, resp.apiErr(t).Message, "nothing to commit", "git explains this on stdout")
	})

	t.Run("history of a repository without commits", func(t *testing.T) {
		empty := filepath.Join(ts.workDir, "empty")
		require.NoError(t, os.Mkdir(empty, 0o755))
		gitRun(t, empty, "init", "-q")
		resp := ts.get(t, "/git/history?path=empty")
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		assert.JSONEq(t, "[]", string(resp.body))
	})
}

func TestGitURLRewrites(t *testing.T) {
	cfg := isolateGit(t)
	fixtures := t.TempDir()
	bareFixture(t, filepath.Join(fixtures, "acme", "widget.git"))

	t.Run("the toolbox option", func(t *testing.T) {
		rw, err := ParseGitURLRewrite("https://github.com/=file://" + fixtures + "/")
		require.NoError(t, err)
		ts := newTestServer(t, Options{GitURLRewrites: []GitURLRewrite{rw}})
		gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "https://github.com/acme/widget.git", Path: "widget"}, 200)
		dir := filepath.Join(ts.workDir, "widget")
		assert.Equal(t, "https://github.com/acme/widget.git", gitRun(t, dir, "remote", "get-url", "origin"), "the clone keeps the public URL")
		require.NoError(t, os.WriteFile(filepath.Join(dir, "x.txt"), []byte("x"), 0o644))
		gitOK(t, ts, http.MethodPost, "/git/add", wire.GitAddRequest{Path: "widget", Files: []string{"x.txt"}}, 200)
		gitOK(t, ts, http.MethodPost, "/git/commit", wire.GitCommitRequest{Path: "widget", Message: "x", Author: "a", Email: "a@x"}, 200)
		gitOK(t, ts, http.MethodPost, "/git/push", wire.GitRepoRequest{Path: "widget"}, 200)
		gitOK(t, ts, http.MethodPost, "/git/pull", wire.GitRepoRequest{Path: "widget"}, 200)
		assert.Equal(t, gitRun(t, dir, "rev-parse", "HEAD"), gitRun(t, filepath.Join(fixtures, "acme", "widget.git"), "rev-parse", "main"))
	})

	t.Run("git's own insteadOf", func(t *testing.T) {
		f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("[url \"file://" + fixtures + "/\"]\n\tinsteadOf = https://git.example.invalid/\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		ts := newTestServer(t, Options{})
		gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "https://git.example.invalid/acme/widget.git", Path: "w"}, 200)
		_, err = os.Stat(filepath.Join(ts.workDir, "w", "README.md"))
		assert.NoError(t, err)
	})

	for _, bad := range []string{"no-equals", "=file:///x", "https://x/="} {
		_, err := ParseGitURLRewrite(bad)
		assert.Error(t, err, bad)
	}
}

// TestGitCredentials serves a fixture over smart HTTP (git http-backend as
// CGI on loopback) behind basic auth.
func TestGitCredentials(t *testing.T) {
	isolateGit(t)
	root := t.TempDir()
	bareFixture(t, filepath.Join(root, "private.git"))
	gitRun(t, filepath.Join(root, "private.git"), "config", "http.receivepack", "true")
	execPath := gitRun(t, root, "--exec-path")
	backend := &cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret-token" {
			w.Header().Set("WWW-Authenticate", `Basic realm="fixture"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/private.git"
	ts := newTestServer(t, Options{})

	for _, tt := range []struct {
		name, user, pass string
	}{{"no credentials", "", ""}, {"wrong password", "alice", "wrong-password"}} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/git/clone", wire.GitCloneRequest{URL: url, Path: "denied", Username: tt.user, Password: tt.pass})
			require.Equal(t, http.StatusUnauthorized, resp.status, "body: %s", resp.body)
			e := resp.apiErr(t)
			assert.Equal(t, wire.CodeGitAuthFailed, e.Code)
			assert.NotContains(t, e.Message, "wrong-password")
		})
	}

	gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: url, Path: "private", Username: "alice", Password: "s3cret-token"}, 200)
	dir := filepath.Join(ts.workDir, "private")
	cfg, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(cfg), "s3cret-token", "credentials never reach the repository's config")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.txt"), []byte("p"), 0o644))
	gitOK(t, ts, http.MethodPost, "/git/add", wire.GitAddRequest{Path: "private", Files: []string{"."}}, 200)
	gitOK(t, ts, http.MethodPost, "/git/commit", wire.GitCommitRequest{Path: "private", Message: "p", Author: "a", Email: "a@x"}, 200)
	resp := ts.postJSON(t, "/git/push", wire.GitRepoRequest{Path: "private"})
	require.Equal(t, http.StatusUnauthorized, resp.status, "a push without credentials is refused: %s", resp.body)
	assert.Equal(t, wire.CodeGitAuthFailed, resp.apiErr(t).Code)
	gitOK(t, ts, http.MethodPost, "/git/push", wire.GitRepoRequest{Path: "private", Username: "alice", Password: "s3cret-token"}, 200)
	gitOK(t, ts, http.MethodPost, "/git/pull", wire.GitRepoRequest{Path: "private", Username: "alice", Password: "s3cret-token"}, 200)
	assert.Equal(t, gitRun(t, dir, "rev-parse", "HEAD"), gitRun(t, filepath.Join(root, "private.git"), "rev-parse", "main"))
}

// Git reaches nothing the file API refuses: a hidden directory (the
// daemon's state, other sandboxes' secrets) is neither cloned into, nor
// read as a repository, nor initialised.
func TestGitRefusesHiddenDirectories(t *testing.T) {
	isolateGit(t)
	bare := filepath.Join(t.TempDir(), "origin.git")
	bareFixture(t, bare)
	hidden := t.TempDir()
	other := filepath.Join(hidden, "other-sandbox")
	require.NoError(t, os.MkdirAll(other, 0o700))
	ts := newTestServer(t, Options{Hidden: []string{hidden}})

	gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "file://" + bare, Path: filepath.Join(other, "repo")}, http.StatusForbidden)
	assert.NoDirExists(t, filepath.Join(other, "repo"))
	resp := ts.do(t, http.MethodGet, "/git/status?path="+url.QueryEscape(other), nil, "")
	assert.Equal(t, http.StatusForbidden, resp.status, resp.body)
	gitOK(t, ts, http.MethodPost, "/git/init", map[string]any{"path": other}, http.StatusForbidden)
	assert.NoDirExists(t, filepath.Join(other, ".git"))
	gitOK(t, ts, http.MethodPost, "/git/clone", wire.GitCloneRequest{URL: "file://" + bare, Path: "mine"}, http.StatusOK)
}

// hiddenRepoLayout is a work dir under a hidden directory that also holds
// another sandbox's git repository, with a secret committed: the file API
// refuses that repository's files, so git must not reach them either.
func hiddenRepoLayout(t *testing.T) (ts *testServer, other string) {
	isolateGit(t)
	root := t.TempDir()
	own := filepath.Join(root, "a", "work")
	other = filepath.Join(root, "b", "work")
	require.NoError(t, os.MkdirAll(own, 0o700))
	require.NoError(t, os.MkdirAll(other, 0o700))
	gitRun(t, other, "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(other, "secret.txt"), []byte("B-SECRET"), 0o600))
	gitRun(t, other, "add", "secret.txt")
	gitRun(t, other, "commit", "-q", "-m", "b private commit")
	ts = newTestServer(t, Options{WorkDir: own, Hidden: []string{root}})
	resp := ts.get(t, "/files/download?path="+url.QueryEscape(filepath.Join(other, "secret.txt")))
	require.Equal(t, http.StatusForbidden, resp.status, "the file API refuses the other repository")
	return ts, other
}

// A clone reads from no place the file API refuses, however its URL names it.
func TestGitCloneRefusesAHiddenSource(t *testing.T) {
	ts, other := hiddenRepoLayout(t)
	for i, u := range []string{other, "file://" + other, "../../b/work"} {
		dest := fmt.Sprintf("stolen%d", i)
		resp := ts.postJSON(t, "/git/clone", wire.GitCloneRequest{URL: u, Path: dest})
		assert.Equal(t, http.StatusForbidden, resp.status, "clone of %q: %s", u, resp.body)
		assert.NotEqual(t, http.StatusOK, ts.get(t, "/files/download?path="+dest+"/secret.txt").status)
	}
}

// A .git file in the work dir that points into a hidden repository opens
// nothing of it.
func TestGitRefusesARepositoryThatPointsIntoAHiddenOne(t *testing.T) {
	ts, other := hiddenRepoLayout(t)
	resp := ts.do(t, http.MethodPost, "/files/upload-v2?path=x/.git", strings.NewReader("gitdir: "+filepath.Join(other, ".git")+"\n"), "application/octet-stream")
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	h := ts.get(t, "/git/history?path=x")
	assert.Equal(t, http.StatusForbidden, h.status, "%s", h.body)
	assert.NotContains(t, string(h.body), "b private commit")
	r := ts.postJSON(t, "/git/restore", map[string]any{"path": "x", "files": []string{"secret.txt"}, "source": "HEAD"})
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.NotEqual(t, http.StatusOK, ts.get(t, "/files/download?path=x/secret.txt").status, "the hidden file reached the work dir")
}

// A remote that is a hidden repository, added through the API or written
// into the repository's config by hand, is neither fetched nor pulled nor
// pushed.
func TestGitRefusesAHiddenRemote(t *testing.T) {
	ts, other := hiddenRepoLayout(t)
	mine := filepath.Join(filepath.Dir(filepath.Dir(other)), "a", "work", "mine")
	require.NoError(t, os.MkdirAll(mine, 0o700))
	gitRun(t, mine, "init", "-q")
	resp := ts.postJSON(t, "/git/remotes", map[string]any{"path": "mine", "name": "stolen", "url": other, "fetch": true})
	assert.Equal(t, http.StatusForbidden, resp.status, "fetch from a hidden remote: %s", resp.body)
	gitRun(t, mine, "remote", "set-url", "stolen", "../../../b/work") // relative to the repository, as git reads it
	for _, op := range []string{"/git/pull", "/git/push"} {
		resp := ts.postJSON(t, op, map[string]any{"path": "mine", "remote": "stolen", "branch": "main"})
		assert.Equal(t, http.StatusForbidden, resp.status, "%s with a hidden remote: %s", op, resp.body)
	}
	gitRun(t, mine, "remote", "remove", "stolen")
	gitRun(t, mine, "config", "branch.main.remote", other) // a URL in place of a remote's name
	gitRun(t, mine, "config", "branch.main.merge", "refs/heads/main")
	resp = ts.postJSON(t, "/git/pull", map[string]any{"path": "mine"})
	assert.Equal(t, http.StatusForbidden, resp.status, "pull from a branch's hidden URL: %s", resp.body)
	assert.NotEqual(t, http.StatusOK, ts.get(t, "/files/download?path=mine/secret.txt").status, "the hidden file reached the work dir")
}
