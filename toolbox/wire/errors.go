package wire

import (
	"net/http"
	"time"
)

// ErrorResponse is the daemon's error body (Daytona's common-go
// ErrorResponse), which every failure of the toolbox answers with:
//
//	{"statusCode":400,"message":"...","code":"BAD_REQUEST","source":"DAYTONA_DAEMON",
//	 "timestamp":"...","path":"/process/execute","method":"POST"}
//
// SDK 0.218 turns a body into its error class by (source, code) first (a
// DAYTONA_DAEMON body with code GIT_AUTH_FAILED is a
// DaytonaGitAuthFailedError) and by status after that; an older SDK reads
// statusCode and message only, so the fields it knows stay.
//
// Bodies that say more (a bulk upload's partial failure, computer use's
// 503) embed it, so that a client reading only these fields finds them.
type ErrorResponse struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
	Code       string `json:"code"`
	// Source names the service that answered: SourceDaemon for the
	// toolbox, SourceProxy for the simulator's proxies.
	Source    string    `json:"source"`
	Timestamp time.Time `json:"timestamp"`
	Path      string    `json:"path"`
	Method    string    `json:"method"`
}

// NewErrorResponse is the body that answers r with status, code and
// message at now, which it gives in UTC. Code is usually ErrorCode(status);
// the daemon names some failures more precisely (INVALID_REQUEST_BODY).
func NewErrorResponse(r *http.Request, now time.Time, status int, code, message string) ErrorResponse {
	return ErrorResponse{
		StatusCode: status,
		Message:    message,
		Code:       code,
		Source:     SourceDaemon,
		Timestamp:  now.UTC(),
		Path:       r.URL.Path,
		Method:     r.Method,
	}
}

// The services an error body names as its source, as the SDKs spell them.
const (
	SourceAPI    = "DAYTONA_API"
	SourceDaemon = "DAYTONA_DAEMON"
	SourceProxy  = "DAYTONA_PROXY"
)

// The daemon's domain codes (DaemonErrorCode of the toolbox document),
// which SDK 0.218 maps to classes of their own; each goes with the status
// the comment gives, the status of the class's parent.
const (
	CodeGitAuthFailed           = "GIT_AUTH_FAILED"            // 401
	CodeGitRepoNotFound         = "GIT_REPO_NOT_FOUND"         // 404
	CodeGitBranchNotFound       = "GIT_BRANCH_NOT_FOUND"       // 404
	CodeGitBranchExists         = "GIT_BRANCH_EXISTS"          // 409
	CodeGitPushRejected         = "GIT_PUSH_REJECTED"          // 409
	CodeGitDirtyWorktree        = "GIT_DIRTY_WORKTREE"         // 409
	CodeGitMergeConflict        = "GIT_MERGE_CONFLICT"         // 409
	CodeGitTransportFailed      = "GIT_TRANSPORT_FAILED"       // 502
	CodeGitRemoteRejected       = "GIT_REMOTE_REJECTED"        // 422
	CodeFileNotFound            = "FILE_NOT_FOUND"             // 404
	CodeFileAccessDenied        = "FILE_ACCESS_DENIED"         // 403
	CodeInvalidFilePath         = "INVALID_FILE_PATH"          // 400
	CodeFileReadFailed          = "FILE_READ_FAILED"           // 500
	CodeLspServerNotInitialized = "LSP_SERVER_NOT_INITIALIZED" // 400
	CodeProcessExecutionTimeout = "PROCESS_EXECUTION_TIMEOUT"  // 408
	CodeProcessNotFound         = "PROCESS_NOT_FOUND"          // 404
	CodeSessionEnded            = "SESSION_ENDED"              // 410
	CodeCommandAlreadyCompleted = "COMMAND_ALREADY_COMPLETED"  // 410
)

// ErrorCode is the daemon's code for status (the simulator's proxies use
// it too); a status it has no name for
// is INTERNAL_SERVER_ERROR, as the daemon's own fallback says.
func ErrorCode(status int) string {
	if code, ok := errorCodes[status]; ok {
		return code
	}
	return "INTERNAL_SERVER_ERROR"
}

var errorCodes = map[int]string{
	http.StatusBadRequest:            "BAD_REQUEST",
	http.StatusUnauthorized:          "UNAUTHORIZED",
	http.StatusForbidden:             "FORBIDDEN",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusRequestTimeout:        "REQUEST_TIMEOUT",
	http.StatusConflict:              "CONFLICT",
	http.StatusGone:                  "GONE",
	http.StatusRequestEntityTooLarge: "PAYLOAD_TOO_LARGE",
	http.StatusUnsupportedMediaType:  "UNSUPPORTED_MEDIA_TYPE",
	http.StatusUnprocessableEntity:   "UNPROCESSABLE_ENTITY",
	// The toolbox never answers 429; the simulator's proxies do, for a
	// rate-limit fault, and a client reads the code.
	http.StatusTooManyRequests: "TOO_MANY_REQUESTS",
}
