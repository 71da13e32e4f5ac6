package toolbox

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestWriteJSON(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		v          any
		wantStatus int
		wantBody   string // a substring
	}{
		{"a value", http.StatusCreated, map[string]int{"n": 1}, http.StatusCreated, `{"n":1}`},
		{"a value JSON cannot hold", http.StatusOK, math.NaN(), http.StatusInternalServerError, "could not encode its answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeJSON(rec, tt.status, tt.v)
			assert.Equal(t, tt.wantStatus, rec.Code)
			assert.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"))
			assert.Contains(t, rec.Body.String(), tt.wantBody)
			if tt.wantStatus == http.StatusInternalServerError {
				var e wire.ErrorResponse
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "Daytona's error shape")
				assert.Equal(t, http.StatusInternalServerError, e.StatusCode)
				assert.Equal(t, wire.ErrorCode(http.StatusInternalServerError), e.Code)
			}
		})
	}
}

// TestGitFailure is the table from what git prints to the daemon's git
// codes, each with the status of the SDK class it names.
func TestGitFailure(t *testing.T) {
	tests := []struct {
		says   string
		status int
		code   string
	}{
		{"fatal: Authentication failed for 'https://example.com/r.git/'", 401, wire.CodeGitAuthFailed},
		{"fatal: could not read Username for 'https://example.com': terminal prompts disabled", 401, wire.CodeGitAuthFailed},
		{"remote: Repository not found.\nfatal: repository 'https://example.com/r.git/' not found", 404, wire.CodeGitRepoNotFound},
		{"fatal: '/no/such.git' does not appear to be a git repository\nfatal: Could not read from remote repository.", 404, wire.CodeGitRepoNotFound},
		{"fatal: not a git repository (or any of the parent directories): .git", 404, wire.CodeGitRepoNotFound},
		{"fatal: invalid reference: nope", 404, wire.CodeGitBranchNotFound},
		{"error: pathspec 'nope' did not match any file(s) known to git", 404, wire.CodeGitBranchNotFound},
		{"fatal: couldn't find remote ref nope", 404, wire.CodeGitBranchNotFound},
		{"error: branch 'nope' not found.", 404, wire.CodeGitBranchNotFound},
		{"fatal: a branch named 'dev' already exists", 409, wire.CodeGitBranchExists},
		{" ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs", 409, wire.CodeGitPushRejected},
		{" ! [remote rejected] main -> main (pre-receive hook declined)\nerror: failed to push some refs", 422, wire.CodeGitRemoteRejected},
		{"CONFLICT (content): Merge conflict in a.txt\nAutomatic merge failed; fix conflicts and then commit the result.", 409, wire.CodeGitMergeConflict},
		{"error: Your local changes to the following files would be overwritten by checkout:\n\ta.txt", 409, wire.CodeGitDirtyWorktree},
		{"fatal: unable to access 'https://nowhere.invalid/r.git/': Could not resolve host: nowhere.invalid", 502, wire.CodeGitTransportFailed},
		{"error: remote origin already exists.", 400, "BAD_REQUEST"},
		{"fatal: destination path 'repo' already exists and is not an empty directory.", 400, "BAD_REQUEST"},
		{"error: Cannot delete branch 'feature' checked out at '/w/repo'", 400, "BAD_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.code+" "+tt.says, func(t *testing.T) {
			status, code := gitFailure(tt.says)
			assert.Equal(t, tt.status, status)
			assert.Equal(t, tt.code, code)
		})
	}
}
