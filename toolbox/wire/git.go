package wire

// GitCloneRequest is the body of POST /git/clone.
type GitCloneRequest struct {
	URL             string `json:"url"`
	Path            string `json:"path"`
	Branch          string `json:"branch"`
	CommitID        string `json:"commit_id"`
	Username        string `json:"username"`
	Password        string `json:"password"`
	InsecureSkipTLS bool   `json:"insecure_skip_tls"`
	// Depth makes a shallow clone of that many commits (later toolbox
	// releases); 0 clones everything.
	Depth int `json:"depth"`
}

// GitRepoRequest is the body of push and pull. Branch, Remote and
// SetUpstream come from later toolbox releases: without them a push
// publishes the current branch to origin (setting the upstream when it has
// none) and a pull fast-forwards from the upstream (else origin's branch
// of the same name).
type GitRepoRequest struct {
	Path     string `json:"path"`
	Username string `json:"username"`
	Password string `json:"password"`
	// Branch is the branch to push, or the remote branch to pull; the
	// current branch by default.
	Branch string `json:"branch"`
	// Remote is the remote to push to or pull from; origin by default.
	Remote string `json:"remote"`
	// SetUpstream makes a push record the pushed branch as the upstream.
	SetUpstream bool `json:"set_upstream"`
}

// GitBranchRequest names a branch of the repository at Path.
type GitBranchRequest struct {
	Path string `json:"path"`
	Name string `json:"name"`
}

// GitCheckoutRequest is the body of POST /git/checkout.
type GitCheckoutRequest struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
}

// GitAddRequest is the body of POST /git/add.
type GitAddRequest struct {
	Path  string   `json:"path"`
	Files []string `json:"files"`
}

// GitCommitRequest is the body of POST /git/commit.
type GitCommitRequest struct {
	Path       string `json:"path"`
	Message    string `json:"message"`
	Author     string `json:"author"`
	Email      string `json:"email"`
	AllowEmpty bool   `json:"allow_empty"`
}

// GitCommitResponse answers a commit.
type GitCommitResponse struct {
	Hash string `json:"hash"`
}

// GitCommitInfo is one commit of GET /git/history.
type GitCommitInfo struct {
	Hash      string `json:"hash"`
	Author    string `json:"author"`
	Email     string `json:"email"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"`
}

// ListBranchResponse answers GET /git/branches.
type ListBranchResponse struct {
	Branches []string `json:"branches"`
	// Current is the checked-out branch, empty when HEAD is detached
	// (later toolbox releases).
	Current string `json:"current,omitempty"`
}

// FileStatus is one file of GitStatus. Staging and Worktree take the
// values of Daytona's Status enum.
type FileStatus struct {
	Name     string `json:"name"`
	Staging  string `json:"staging"`
	Worktree string `json:"worktree"`
	Extra    string `json:"extra"`
}

// GitStatus answers GET /git/status.
type GitStatus struct {
	CurrentBranch   string       `json:"currentBranch"`
	FileStatus      []FileStatus `json:"fileStatus"`
	Ahead           int          `json:"ahead"`
	Behind          int          `json:"behind"`
	BranchPublished bool         `json:"branchPublished"`
	// Detached and Upstream (like "origin/main") come from later toolbox
	// releases.
	Detached bool   `json:"detached"`
	Upstream string `json:"upstream,omitempty"`
}

// GitInitRequest is the body of POST /git/init.
type GitInitRequest struct {
	Path          string `json:"path"`
	Bare          bool   `json:"bare"`
	InitialBranch string `json:"initial_branch"`
}

// GitRemote is one remote of a repository.
type GitRemote struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// ListRemotesResponse answers GET /git/remotes.
type ListRemotesResponse struct {
	Remotes []GitRemote `json:"remotes"`
}

// GitAddRemoteRequest is the body of POST /git/remotes.
type GitAddRemoteRequest struct {
	Path string `json:"path"`
	Name string `json:"name"`
	URL  string `json:"url"`
	// Fetch fetches from the remote once it is added.
	Fetch bool `json:"fetch"`
	// Overwrite replaces the URL of a remote of the same name.
	Overwrite bool `json:"overwrite"`
}

// GitSetConfigRequest is the body of POST /git/config.
type GitSetConfigRequest struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Scope is global (the default), local (of the repository at Path) or
	// system.
	Scope string `json:"scope"`
	Path  string `json:"path"`
}

// GitConfigResponse answers GET /git/config; Value is null when the key is
// not set.
type GitConfigResponse struct {
	Value *string `json:"value"`
}

// GitConfigureUserRequest is the body of POST /git/config/user.
type GitConfigureUserRequest struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Scope string `json:"scope"`
	Path  string `json:"path"`
}

// GitResetRequest is the body of POST /git/reset.
type GitResetRequest struct {
	Path string `json:"path"`
	// Mode is soft, mixed (the default), hard, merge or keep.
	Mode string `json:"mode"`
	// Target is the revision to reset to, HEAD by default.
	Target string `json:"target"`
	// Files limits the reset to these paths (of the index only).
	Files []string `json:"files"`
}

// GitRestoreRequest is the body of POST /git/restore.
type GitRestoreRequest struct {
	Path  string   `json:"path"`
	Files []string `json:"files"`
	// Staged restores the index, Worktree the working tree (the default
	// when neither is set).
	Staged   bool `json:"staged"`
	Worktree bool `json:"worktree"`
	// Source restores from this revision instead of the index.
	Source string `json:"source"`
}

// GitAuthenticateRequest is the body of POST /git/credentials (toolbox
// releases after v0.190.0; the SDK's git.dangerouslyAuthenticate).
type GitAuthenticateRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	// Host defaults to github.com, Protocol to https.
	Host     string `json:"host"`
	Protocol string `json:"protocol"`
}
