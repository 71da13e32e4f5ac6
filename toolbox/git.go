package toolbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// The git endpoints run the git CLI, so they behave as git does in the
// sandbox: its configuration applies (url.<base>.insteadOf included), and
// so do its transports (file://, ssh, http). Options.GitURLRewrites adds
// rewrites of the same kind on every command.

// GitURLRewrite makes git fetch from and push to To whatever URL starts
// with From, exactly as git's `url.<To>.insteadOf = <From>`. The URL a
// clone records stays the one the client gave.
type GitURLRewrite struct {
	From string
	To   string
}

// ParseGitURLRewrite reads the `FROM=TO` form of the --git-url-rewrite
// flag, split at the first '='.
func ParseGitURLRewrite(s string) (GitURLRewrite, error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok || from == "" || to == "" {
		return GitURLRewrite{}, fmt.Errorf("git URL rewrite %q: want FROM=TO, like https://github.com/=file:///srv/fixtures/", s)
	}
	return GitURLRewrite{From: from, To: to}, nil
}

// maxGitOutput bounds what one git command may print.
const maxGitOutput = 64 << 20

// gitCreds are sent to git through an askpass program, never on a command
// line or in a URL, so they reach neither the repository's config nor ps.
type gitCreds struct {
	username, password string
}

func credsOf(username, password string) *gitCreds {
	if username == "" && password == "" {
		return nil
	}
	return &gitCreds{username: username, password: password}
}

// askpassScript answers git's prompts from the environment of the git
// process that runs it.
const askpassScript = `#!/bin/sh
case "$1" in
Username*) printf '%s\n' "$SANDPLANE_GIT_USERNAME" ;;
*) printf '%s\n' "$SANDPLANE_GIT_PASSWORD" ;;
esac
`

// gitCmd is one run of git.
type gitCmd struct {
	dir   string
	creds *gitCreds
	env   []string
	args  []string
	// stdin is what git reads (the credential protocol); empty: nothing.
	stdin string
	// quietExit1 makes an exit status 1 with nothing on stderr
	// errQuietExit1 (git config --get of a key that is not set).
	quietExit1 bool
}

// errQuietExit1 is what a gitCmd with quietExit1 answers for git's silent
// exit status 1.
var errQuietExit1 = errors.New("git exited 1 without a message")

// git runs git in dir and returns its standard output. A failure is a 400
// whose message is git's own, credentials removed.
func (s *server) git(ctx context.Context, c gitCmd) (string, error) {
	args := []string{}
	for _, rw := range s.opts.GitURLRewrites {
		args = append(args, "-c", "url."+rw.To+".insteadOf="+rw.From)
	}
	env := append(s.opts.env.environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	if c.creds != nil {
		dir, err := os.MkdirTemp("", "sandplane-git-")
		if err != nil {
			return "", errorf(http.StatusInternalServerError, "git credentials: %v", err)
		}
		defer os.RemoveAll(dir)
		askpass := filepath.Join(dir, "askpass")
		if err := os.WriteFile(askpass, []byte(askpassScript), 0o700); err != nil {
			return "", errorf(http.StatusInternalServerError, "git credentials: %v", err)
		}
		// The given credentials win over any stored helper.
		args = append(args, "-c", "credential.helper=")
		env = append(env, "GIT_ASKPASS="+askpass,
			"SANDPLANE_GIT_USERNAME="+c.creds.username, "SANDPLANE_GIT_PASSWORD="+c.creds.password)
	}
	cmd := exec.CommandContext(ctx, "git", append(args, c.args...)...)
	cmd.Dir = c.dir
	cmd.Env = append(env, c.env...)
	if c.stdin != "" {
		cmd.Stdin = strings.NewReader(c.stdin)
	}
	stdout, stderr := &boundedBuffer{limit: maxGitOutput}, &boundedBuffer{limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if c.quietExit1 && errors.As(err, &ee) && ee.ExitCode() == 1 && len(bytes.TrimSpace(stderr.buf.Bytes())) == 0 {
			return "", errQuietExit1
		}
		why := stderr.buf.Bytes()
		if len(bytes.TrimSpace(why)) == 0 {
			// Some failures, like a commit with nothing to commit, are
			// explained on stdout only.
			why = lastBytes(stdout.buf.Bytes(), 4<<10)
		}
		return "", gitError(c.args, err, why)
	}
	return stdout.buf.String(), nil
}

// lastBytes is the end of b, at most n bytes of it.
func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

var urlUserinfo = regexp.MustCompile(`://[^/@\s]+@`)

func gitError(args []string, err error, stderr []byte) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if errors.Is(err, exec.ErrNotFound) {
			return errorf(http.StatusInternalServerError, "git is not installed in the sandbox")
		}
		return errorf(http.StatusInternalServerError, "running git: %v", err)
	}
	msg := strings.TrimSpace(string(stderr))
	msg = urlUserinfo.ReplaceAllString(msg, "://***@")
	if msg == "" {
		msg = ee.Error()
	}
	op := "git"
	if len(args) > 0 {
		op = "git " + args[0]
	}
	status, code := gitFailure(msg)
	return codedf(status, code, "%s failed: %s", op, msg)
}

// gitFailures classifies what git printed on a failure into the daemon's
// git codes, first match wins: a remote's refusal before a plain
// rejection, a merge conflict before a dirty worktree. Git's messages are
// stable across releases (scripts parse them); LC_ALL=C keeps them English.
var gitFailures = []struct {
	status int
	code   string
	says   []string
}{
	{http.StatusUnauthorized, wire.CodeGitAuthFailed, []string{"authentication failed", "could not read username",
		"could not read password", "terminal prompts disabled", "permission denied (publickey", "invalid username or password"}},
	{http.StatusNotFound, wire.CodeGitRepoNotFound, []string{"repository not found", "does not appear to be a git repository",
		"not a git repository"}},
	{http.StatusUnprocessableEntity, wire.CodeGitRemoteRejected, []string{"[remote rejected]", "pre-receive hook declined",
		"protected branch", "exceeds limit", "quota"}},
	{http.StatusConflict, wire.CodeGitPushRejected, []string{"[rejected]", "non-fast-forward", "failed to push some refs"}},
	{http.StatusConflict, wire.CodeGitMergeConflict, []string{"conflict (", "automatic merge failed", "unmerged files",
		"you have not concluded your merge", "fix conflicts"}},
	{http.StatusConflict, wire.CodeGitDirtyWorktree, []string{"would be overwritten", "please commit your changes or stash them",
		"untracked working tree files"}},
	{http.StatusConflict, wire.CodeGitBranchExists, []string{"a branch named"}},
	{http.StatusNotFound, wire.CodeGitBranchNotFound, []string{"did not match any file(s) known to git", "invalid reference",
		"not a valid branch name", "remote branch", "couldn't find remote ref", "unknown revision", "error: branch '"}},
	{http.StatusBadGateway, wire.CodeGitTransportFailed, []string{"could not resolve host", "unable to access", "connection refused",
		"connection timed out", "operation timed out", "ssl certificate", "ssl connect", "gnutls", "tls handshake", "could not read from remote repository", "network is unreachable"}},
}

// gitFailure is the status and code of a git failure that printed msg; a
// failure it cannot name is a 400 BAD_REQUEST, as before.
func gitFailure(msg string) (int, string) {
	low := strings.ToLower(msg)
	for _, f := range gitFailures {
		for _, say := range f.says {
			if strings.Contains(low, say) {
				return f.status, f.code
			}
		}
	}
	return http.StatusBadRequest, wire.ErrorCode(http.StatusBadRequest)
}

// gitPath resolves a path a git operation names as the file API does, so
// that git reaches nothing the file API refuses (the daemon's state
// directory, what lies outside the toolbox root).
func (s *server) gitPath(p string) (string, error) {
	t, err := s.fs.resolve(p)
	if err != nil {
		return "", err
	}
	return t.abs, nil
}

// repoDir resolves a repository path against the work dir and checks that
// it exists, and that the repository git finds there (through a .git file,
// core.worktree or a parent directory) is one the file API would show.
func (s *server) repoDir(ctx context.Context, p string) (string, error) {
	dir, _, err := s.repoAt(ctx, p)
	return dir, err
}

// repoAt is repoDir, with the top of the repository found there: where git
// resolves a remote's relative URL ("" when dir is in none).
func (s *server) repoAt(ctx context.Context, p string) (dir, top string, err error) {
	if strings.TrimSpace(p) == "" {
		return "", "", errorf(http.StatusBadRequest, "path is required")
	}
	if dir, err = s.gitPath(p); err != nil {
		return "", "", err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", "", errorf(http.StatusNotFound, "repository path %s does not exist", dir)
		}
		return "", "", errorf(http.StatusBadRequest, "repository path %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return "", "", errorf(http.StatusBadRequest, "repository path %s is not a directory", dir)
	}
	if top, err = s.repoReach(ctx, dir); err != nil {
		return "", "", err
	}
	return dir, top, nil
}

// repoReach refuses a repository at dir whose git directory, common
// directory or work tree the file API refuses, and returns its top: the
// work tree's, or the git directory of a bare one. Not a repository: ""
// and nothing to check, the operation itself says so (or makes one).
func (s *server) repoReach(ctx context.Context, dir string) (string, error) {
	out, err := s.git(ctx, gitCmd{dir: dir, args: []string{"rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"}})
	if err != nil {
		return "", nil
	}
	paths := strings.Split(strings.TrimSpace(out), "\n")
	top := paths[0] // a bare repository has no work tree
	if tree, err := s.git(ctx, gitCmd{dir: dir, args: []string{"rev-parse", "--show-toplevel"}}); err == nil {
		top = strings.TrimSpace(tree)
		paths = append(paths, top)
	}
	for _, p := range paths {
		if _, err := s.gitPath(p); err != nil {
			return "", errorf(http.StatusForbidden, "repository %s: git would use %s, which the file API refuses", dir, p)
		}
	}
	return top, nil
}

// gitSource is a URL git reads from or writes to: a remote one as given, a
// local one (a path, or file://) resolved as the file API does, relative to
// base as git resolves it, so that git reaches nothing the file API
// refuses.
func (s *server) gitSource(base, u string) (string, error) {
	path, isFile := strings.CutPrefix(u, "file://")
	if !isFile && !localGitURL(u) {
		return u, nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(base, path)
	}
	abs, err := s.gitPath(path)
	if err != nil {
		return "", err
	}
	if isFile {
		return "file://" + abs, nil
	}
	return abs, nil
}

// localGitURL reports whether git reads u as a local path: no scheme, and
// no colon before the first slash (git's host:path for ssh).
func localGitURL(u string) bool {
	if strings.Contains(u, "://") {
		return false
	}
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	return colon < 0 || (slash >= 0 && slash < colon)
}

// noOption refuses a value git would take for an option.
func noOption(what, v string) error {
	if strings.HasPrefix(v, "-") || strings.IndexByte(v, 0) >= 0 {
		return errorf(http.StatusBadRequest, "invalid %s %q", what, v)
	}
	return nil
}

func (s *server) handleGitClone(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitCloneRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if req.URL == "" || strings.TrimSpace(req.Path) == "" {
		return errorf(http.StatusBadRequest, "url and path are required")
	}
	for _, v := range [][2]string{{"url", req.URL}, {"branch", req.Branch}, {"commit_id", req.CommitID}} {
		if err := noOption(v[0], v[1]); err != nil {
			return err
		}
	}
	if req.Depth < 0 {
		return errorf(http.StatusBadRequest, "depth must not be negative")
	}
	dest, err := s.gitPath(req.Path)
	if err != nil {
		return err
	}
	source, err := s.gitSource(s.opts.WorkDir, req.URL) // clone runs in the work dir
	if err != nil {
		return err
	}
	args := []string{}
	if req.InsecureSkipTLS {
		args = append(args, "-c", "http.sslVerify=false")
	}
	args = append(args, "clone")
	if req.Branch != "" {
		args = append(args, "--branch", req.Branch)
	}
	if req.Depth > 0 {
		// git's --depth implies --single-branch; the daemon's shallow
		// clone keeps every branch, as a full one does.
		args = append(args, "--depth", strconv.Itoa(req.Depth), "--no-single-branch")
	}
	args = append(args, "--", source, dest)
	creds := credsOf(req.Username, req.Password)
	if _, err := s.git(r.Context(), gitCmd{dir: s.opts.WorkDir, creds: creds, args: args}); err != nil {
		return err
	}
	if req.CommitID != "" {
		if _, err := s.git(r.Context(), gitCmd{dir: dest, args: []string{"checkout", "--detach", req.CommitID, "--"}}); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *server) handleGitStatus(w http.ResponseWriter, r *http.Request) error {
	dir, err := s.repoDir(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	out, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all"}})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, parseGitStatus(out))
	return nil
}

// gitStatusCodes maps git's XY letters to Daytona's Status enum.
var gitStatusCodes = map[byte]string{
	'.': "Unmodified",
	'M': "Modified",
	'T': "Modified",
	'A': "Added",
	'D': "Deleted",
	'R': "Renamed",
	'C': "Copied",
	'U': "Updated but unmerged",
	'?': "Untracked",
}

// parseGitStatus reads `git status --porcelain=v2 --branch -z`.
func parseGitStatus(out string) wire.GitStatus {
	st := wire.GitStatus{FileStatus: []wire.FileStatus{}}
	recs := strings.Split(out, "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		switch {
		case strings.HasPrefix(rec, "# branch.head "):
			st.CurrentBranch = strings.TrimPrefix(rec, "# branch.head ")
			if st.CurrentBranch == "(detached)" {
				st.CurrentBranch, st.Detached = "HEAD", true
			}
		case strings.HasPrefix(rec, "# branch.upstream "):
			st.BranchPublished = true
			st.Upstream = strings.TrimPrefix(rec, "# branch.upstream ")
		case strings.HasPrefix(rec, "# branch.ab "):
			f := strings.Fields(strings.TrimPrefix(rec, "# branch.ab "))
			if len(f) == 2 {
				st.Ahead, _ = strconv.Atoi(strings.TrimPrefix(f[0], "+"))
				st.Behind, _ = strconv.Atoi(strings.TrimPrefix(f[1], "-"))
			}
		case strings.HasPrefix(rec, "1 "):
			if f := strings.SplitN(rec, " ", 9); len(f) == 9 {
				st.FileStatus = append(st.FileStatus, fileStatus(f[1], f[8], ""))
			}
		case strings.HasPrefix(rec, "2 "):
			// The original path follows as its own record.
			if f := strings.SplitN(rec, " ", 10); len(f) == 10 && i+1 < len(recs) {
				i++
				st.FileStatus = append(st.FileStatus, fileStatus(f[1], f[9], recs[i]))
			}
		case strings.HasPrefix(rec, "u "):
			if f := strings.SplitN(rec, " ", 11); len(f) == 11 {
				st.FileStatus = append(st.FileStatus, wire.FileStatus{Name: f[10], Staging: "Updated but unmerged", Worktree: "Updated but unmerged"})
			}
		case strings.HasPrefix(rec, "? "):
			st.FileStatus = append(st.FileStatus, wire.FileStatus{Name: rec[2:], Staging: "Untracked", Worktree: "Untracked"})
		}
	}
	return st
}

// fileStatus reads a record's XY letters; one that is missing or unknown
// reads as Unmodified, so no record, however cut, fails the listing.
func fileStatus(xy, name, orig string) wire.FileStatus {
	code := func(i int) string {
		if i < len(xy) {
			if s, ok := gitStatusCodes[xy[i]]; ok {
				return s
			}
		}
		return "Unmodified"
	}
	return wire.FileStatus{Name: name, Staging: code(0), Worktree: code(1), Extra: orig}
}

func (s *server) handleGitBranches(w http.ResponseWriter, r *http.Request) error {
	dir, err := s.repoDir(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	out, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"for-each-ref", "--format=%(refname:short)", "refs/heads/"}})
	if err != nil {
		return err
	}
	branches := []string{}
	for _, b := range strings.Split(strings.TrimSpace(out), "\n") {
		if b != "" {
			branches = append(branches, b)
		}
	}
	// Detached, or on a branch without commits yet: no current branch.
	current, _ := s.git(r.Context(), gitCmd{dir: dir, args: []string{"symbolic-ref", "--quiet", "--short", "HEAD"}})
	writeJSON(w, http.StatusOK, wire.ListBranchResponse{Branches: branches, Current: strings.TrimSpace(current)})
	return nil
}

// branchRequest decodes and checks a {path, name} body.
func (s *server) branchRequest(w http.ResponseWriter, r *http.Request) (string, string, error) {
	var req wire.GitBranchRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return "", "", err
	}
	if strings.TrimSpace(req.Name) == "" {
		return "", "", errorf(http.StatusBadRequest, "name is required")
	}
	if err := noOption("branch name", req.Name); err != nil {
		return "", "", err
	}
	dir, err := s.repoDir(r.Context(), req.Path)
	return dir, req.Name, err
}

// handleGitCreateBranch creates the branch at HEAD and switches to it, as
// the daemon's checkout-with-create does.
func (s *server) handleGitCreateBranch(w http.ResponseWriter, r *http.Request) error {
	dir, name, err := s.branchRequest(w, r)
	if err != nil {
		return err
	}
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"checkout", "-b", name}}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (s *server) handleGitDeleteBranch(w http.ResponseWriter, r *http.Request) error {
	dir, name, err := s.branchRequest(w, r)
	if err != nil {
		return err
	}
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"branch", "-D", "--", name}}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) handleGitCheckout(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitCheckoutRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Branch) == "" {
		return errorf(http.StatusBadRequest, "branch is required")
	}
	if err := noOption("branch", req.Branch); err != nil {
		return err
	}
	dir, err := s.repoDir(r.Context(), req.Path)
	if err != nil {
		return err
	}
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"checkout", req.Branch, "--"}}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *server) handleGitAdd(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitAddRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Files) == 0 {
		return errorf(http.StatusBadRequest, "files is required (use [\".\"] for everything)")
	}
	dir, err := s.repoDir(r.Context(), req.Path)
	if err != nil {
		return err
	}
	args := append([]string{"add", "--"}, req.Files...)
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: args}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *server) handleGitCommit(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitCommitRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Message) == "" || strings.TrimSpace(req.Author) == "" || strings.TrimSpace(req.Email) == "" {
		return errorf(http.StatusBadRequest, "message, author and email are required")
	}
	dir, err := s.repoDir(r.Context(), req.Path)
	if err != nil {
		return err
	}
	args := []string{"commit", "--no-verify", "-m", req.Message}
	if req.AllowEmpty {
		args = append(args, "--allow-empty")
	}
	who := []string{
		"GIT_AUTHOR_NAME=" + req.Author, "GIT_AUTHOR_EMAIL=" + req.Email,
		"GIT_COMMITTER_NAME=" + req.Author, "GIT_COMMITTER_EMAIL=" + req.Email,
	}
	if _, err := s.git(r.Context(), gitCmd{dir: dir, env: who, args: args}); err != nil {
		return err
	}
	hash, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"rev-parse", "HEAD"}})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.GitCommitResponse{Hash: strings.TrimSpace(hash)})
	return nil
}

// handleGitHistory lists the commits reachable from HEAD, newest first.
func (s *server) handleGitHistory(w http.ResponseWriter, r *http.Request) error {
	dir, err := s.repoDir(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	// A repository without commits has no history, not a broken HEAD.
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"rev-parse", "--verify", "--quiet", "HEAD"}}); err != nil {
		if _, rerr := s.git(r.Context(), gitCmd{dir: dir, args: []string{"rev-parse", "--git-dir"}}); rerr != nil {
			return rerr
		}
		writeJSON(w, http.StatusOK, []wire.GitCommitInfo{})
		return nil
	}
	out, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"log", "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%B%x1e", "HEAD"}})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, parseGitLog(out))
	return nil
}

func parseGitLog(out string) []wire.GitCommitInfo {
	commits := []wire.GitCommitInfo{}
	for _, rec := range strings.Split(out, "\x1e") {
		f := strings.Split(strings.TrimLeft(rec, "\n"), "\x1f")
		if len(f) != 5 {
			continue
		}
		commits = append(commits, wire.GitCommitInfo{
			Hash: f[0], Author: f[1], Email: f[2], Timestamp: f[3],
			Message: strings.TrimRight(f[4], "\n"),
		})
	}
	return commits
}

// repoRequest decodes a push or pull body.
func (s *server) repoRequest(w http.ResponseWriter, r *http.Request) (string, wire.GitRepoRequest, error) {
	var req wire.GitRepoRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return "", req, err
	}
	for _, v := range [][2]string{{"branch", req.Branch}, {"remote", req.Remote}} {
		if err := noOption(v[0], v[1]); err != nil {
			return "", req, err
		}
	}
	dir, top, err := s.repoAt(r.Context(), req.Path)
	if err == nil {
		err = s.checkRemotes(r.Context(), dir, top)
	}
	return dir, req, err
}

// checkRemotes refuses a repository one of whose remotes (fetch or push
// URL, rewrites applied, or a URL a branch or remote.pushDefault names in
// place of a remote) is a local path the file API refuses: a push or pull
// there would read or write another sandbox's repository. top is the
// repository's, from repoAt: git resolves a relative URL against it.
func (s *server) checkRemotes(ctx context.Context, dir, top string) error {
	check := func(what, u string) error {
		if _, err := s.gitSource(top, u); err != nil {
			return errorf(http.StatusForbidden, "%s of %s: %s", what, dir, err.Error())
		}
		return nil
	}
	names, err := s.git(ctx, gitCmd{dir: dir, args: []string{"remote"}})
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, name := range strings.Fields(names) {
		known[name] = true
		for _, push := range []bool{false, true} {
			args := []string{"remote", "get-url", "--all"}
			if push {
				args = append(args, "--push")
			}
			urls, err := s.git(ctx, gitCmd{dir: dir, args: append(args, "--", name)})
			if err != nil {
				return err
			}
			for _, u := range strings.Split(strings.TrimSpace(urls), "\n") {
				if err := check("remote "+name, u); err != nil {
					return err
				}
			}
		}
	}
	named, err := s.git(ctx, gitCmd{dir: dir, quietExit1: true,
		args: []string{"config", "--get-regexp", `^(branch\..*\.(remote|pushremote)|remote\.pushdefault)$`}})
	if err != nil && !errors.Is(err, errQuietExit1) {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(named), "\n") {
		key, u, ok := strings.Cut(line, " ")
		if !ok || known[u] {
			continue
		}
		if err := check(key, u); err != nil {
			return err
		}
	}
	return nil
}

// hasUpstream reports whether the current branch tracks a remote branch.
func (s *server) hasUpstream(ctx context.Context, dir string) bool {
	_, err := s.git(ctx, gitCmd{dir: dir, args: []string{"rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"}})
	return err == nil
}

// handleGitPush pushes the current branch; one that tracks nothing yet is
// published to origin under its own name and tracks it from then on.
func (s *server) handleGitPush(w http.ResponseWriter, r *http.Request) error {
	dir, req, err := s.repoRequest(w, r)
	if err != nil {
		return err
	}
	args := []string{"push"}
	switch {
	case req.Branch != "" || req.Remote != "" || req.SetUpstream:
		if req.SetUpstream {
			args = append(args, "--set-upstream")
		}
		args = append(args, "--", orDefault(req.Remote, "origin"), orDefault(req.Branch, "HEAD"))
	case !s.hasUpstream(r.Context(), dir):
		args = append(args, "--set-upstream", "origin", "HEAD")
	}
	if _, err := s.git(r.Context(), gitCmd{dir: dir, creds: credsOf(req.Username, req.Password), args: args}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// handleGitPull fast-forwards the current branch, as the daemon's pull
// does: from the upstream, or from Remote's Branch when either is given
// or there is no upstream (origin and the current branch's name standing
// in for what is missing).
func (s *server) handleGitPull(w http.ResponseWriter, r *http.Request) error {
	dir, req, err := s.repoRequest(w, r)
	if err != nil {
		return err
	}
	args := []string{"pull", "--ff-only"}
	if req.Branch != "" || req.Remote != "" || !s.hasUpstream(r.Context(), dir) {
		branch := req.Branch
		if branch == "" {
			out, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"symbolic-ref", "--short", "HEAD"}})
			if err != nil {
				return err
			}
			branch = strings.TrimSpace(out)
		}
		args = append(args, "--", orDefault(req.Remote, "origin"), branch)
	}
	if _, err := s.git(r.Context(), gitCmd{dir: dir, creds: credsOf(req.Username, req.Password), args: args}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// boundedBuffer keeps the first limit bytes written to it and drops the
// rest, so a chatty command cannot exhaust memory.
type boundedBuffer struct {
	limit int
	buf   bytes.Buffer
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
