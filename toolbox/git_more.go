package toolbox

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// The git operations later toolbox releases added (SDKs after 0.190):
// init, remotes, configuration, reset and restore. Like the others they
// run the sandbox's git CLI.

func (s *server) handleGitInit(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitInitRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Path) == "" {
		return errorf(http.StatusBadRequest, "path is required")
	}
	if err := noOption("initial_branch", req.InitialBranch); err != nil {
		return err
	}
	args := []string{"init", "--quiet"}
	if req.Bare {
		args = append(args, "--bare")
	}
	if req.InitialBranch != "" {
		args = append(args, "--initial-branch="+req.InitialBranch)
	}
	dest, err := s.gitPath(req.Path)
	if err != nil {
		return err
	}
	args = append(args, "--", dest)
	if _, err := s.git(r.Context(), gitCmd{dir: s.opts.WorkDir, args: args}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *server) handleGitListRemotes(w http.ResponseWriter, r *http.Request) error {
	dir, err := s.repoDir(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	names, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"remote"}})
	if err != nil {
		return err
	}
	remotes := []wire.GitRemote{}
	for _, name := range strings.Fields(names) {
		url, err := s.gitConfigValue(r.Context(), dir, "--local", "remote."+name+".url")
		if err != nil {
			return err
		}
		if url != nil {
			remotes = append(remotes, wire.GitRemote{Name: name, URL: *url})
		}
	}
	sort.Slice(remotes, func(i, j int) bool { return remotes[i].Name < remotes[j].Name })
	writeJSON(w, http.StatusOK, wire.ListRemotesResponse{Remotes: remotes})
	return nil
}

func (s *server) handleGitAddRemote(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitAddRemoteRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if req.Name == "" || req.URL == "" {
		return errorf(http.StatusBadRequest, "name and url are required")
	}
	for _, v := range [][2]string{{"name", req.Name}, {"url", req.URL}} {
		if err := noOption(v[0], v[1]); err != nil {
			return err
		}
	}
	dir, top, err := s.repoAt(r.Context(), req.Path)
	if err != nil {
		return err
	}
	exists, err := s.gitConfigValue(r.Context(), dir, "--local", "remote."+req.Name+".url")
	if err != nil {
		return err
	}
	// Without overwrite, git refuses a name that exists.
	args := []string{"remote", "add", "--", req.Name, req.URL}
	if exists != nil && req.Overwrite {
		args = []string{"remote", "set-url", "--", req.Name, req.URL}
	}
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: args}); err != nil {
		return err
	}
	if req.Fetch {
		if err := s.checkRemotes(r.Context(), dir, top); err != nil {
			return err
		}
		if _, err := s.git(r.Context(), gitCmd{dir: dir, args: []string{"fetch", "--quiet", "--", req.Name}}); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// configScope turns a request's scope into git config's option and the
// directory to run it in; local needs a repository.
func (s *server) configScope(ctx context.Context, scope, path string) (flag, dir string, err error) {
	switch scope {
	case "", "global":
		return "--global", s.opts.WorkDir, nil
	case "system":
		return "--system", s.opts.WorkDir, nil
	case "local":
		dir, err := s.repoDir(ctx, path)
		return "--local", dir, err
	}
	return "", "", errorf(http.StatusBadRequest, "scope must be global, local or system, not %q", scope)
}

// gitConfigKey checks a configuration key the way git names them:
// section.name, or section.subsection.name.
func gitConfigKey(key string) error {
	if strings.Count(key, ".") < 1 || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") {
		return errorf(http.StatusBadRequest, "key %q is not a git config key like user.name", key)
	}
	return noOption("key", key)
}

// gitConfigValue reads key at scope, nil when it is not set.
func (s *server) gitConfigValue(ctx context.Context, dir, scope, key string) (*string, error) {
	out, err := s.git(ctx, gitCmd{dir: dir, quietExit1: true, args: []string{"config", scope, "--get", "--", key}})
	switch {
	case errors.Is(err, errQuietExit1):
		return nil, nil
	case err != nil:
		return nil, err
	}
	v := strings.TrimSuffix(out, "\n")
	return &v, nil
}

func (s *server) handleGitGetConfig(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	key := q.Get("key")
	if err := gitConfigKey(key); err != nil {
		return err
	}
	flag, dir, err := s.configScope(r.Context(), q.Get("scope"), q.Get("path"))
	if err != nil {
		return err
	}
	v, err := s.gitConfigValue(r.Context(), dir, flag, key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.GitConfigResponse{Value: v})
	return nil
}

// setConfig writes key=value pairs at scope.
func (s *server) setConfig(ctx context.Context, scope, path string, kv ...string) error {
	flag, dir, err := s.configScope(ctx, scope, path)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if _, err := s.git(ctx, gitCmd{dir: dir, args: []string{"config", flag, "--", kv[i], kv[i+1]}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) handleGitSetConfig(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitSetConfigRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if err := gitConfigKey(req.Key); err != nil {
		return err
	}
	if err := s.setConfig(r.Context(), req.Scope, req.Path, req.Key, req.Value); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *server) handleGitConfigureUser(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitConfigureUserRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Name) == "" || strings.TrimSpace(req.Email) == "" {
		return errorf(http.StatusBadRequest, "name and email are required")
	}
	if err := s.setConfig(r.Context(), req.Scope, req.Path, "user.name", req.Name, "user.email", req.Email); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

var resetModes = []string{"soft", "mixed", "hard", "merge", "keep"}

func (s *server) handleGitReset(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitResetRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if req.Mode != "" && !slices.Contains(resetModes, req.Mode) {
		return errorf(http.StatusBadRequest, "mode must be one of %s, not %q", strings.Join(resetModes, ", "), req.Mode)
	}
	if len(req.Files) > 0 && req.Mode != "" && req.Mode != "mixed" {
		return errorf(http.StatusBadRequest, "a reset of files resets the index only: mode %s does not apply", req.Mode)
	}
	if err := noOption("target", req.Target); err != nil {
		return err
	}
	dir, err := s.repoDir(r.Context(), req.Path)
	if err != nil {
		return err
	}
	args := []string{"reset", "--quiet"}
	if len(req.Files) == 0 {
		args = append(args, "--"+orDefault(req.Mode, "mixed"))
	}
	args = append(args, orDefault(req.Target, "HEAD"), "--")
	args = append(args, req.Files...)
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: args}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *server) handleGitRestore(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitRestoreRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Files) == 0 {
		return errorf(http.StatusBadRequest, "files is required (use [\".\"] for everything)")
	}
	if err := noOption("source", req.Source); err != nil {
		return err
	}
	dir, err := s.repoDir(r.Context(), req.Path)
	if err != nil {
		return err
	}
	args := []string{"restore"}
	if req.Staged {
		args = append(args, "--staged")
	}
	if req.Worktree {
		args = append(args, "--worktree")
	}
	if req.Source != "" {
		args = append(args, "--source="+req.Source)
	}
	args = append(append(args, "--"), req.Files...)
	if _, err := s.git(r.Context(), gitCmd{dir: dir, args: args}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// handleGitCredentials stores credentials for a host in git's credential
// store (~/.git-credentials, 0600, in plain text as the SDK warns), with
// the store as the user's global helper, so that later clones, pulls and
// pushes to that host authenticate without being given them.
func (s *server) handleGitCredentials(w http.ResponseWriter, r *http.Request) error {
	var req wire.GitAuthenticateRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		return err
	}
	if req.Username == "" || req.Password == "" {
		return errorf(http.StatusBadRequest, "username and password are required")
	}
	if req.Host == "" {
		req.Host = "github.com"
	}
	if req.Protocol == "" {
		req.Protocol = "https"
	}
	// The credential protocol is one attribute a line.
	for _, v := range []string{req.Username, req.Password, req.Host, req.Protocol} {
		if strings.ContainsAny(v, "\n\r\x00") {
			return errorf(http.StatusBadRequest, "credentials must not contain line breaks or NUL bytes")
		}
	}
	// The store is the sandbox's own file (in its working directory, which
	// goes with it), named to every git the toolbox starts from now on: a
	// native sandbox's HOME may be the user's, whose git configuration and
	// ~/.git-credentials must not change.
	store := filepath.Join(s.opts.WorkDir, ".git-credentials")
	s.opts.env.gitConfig("credential.helper", "store --file="+store)
	in := "protocol=" + req.Protocol + "\nhost=" + req.Host + "\nusername=" + req.Username + "\npassword=" + req.Password + "\n\n"
	if _, err := s.git(r.Context(), gitCmd{dir: s.opts.WorkDir, stdin: in, args: []string{"credential", "approve"}}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
