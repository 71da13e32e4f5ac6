package wire

// CodeRunRequest is the body of POST /process/code-run.
type CodeRunRequest struct {
	Code     string            `json:"code"`
	Language string            `json:"language"`
	Argv     []string          `json:"argv,omitempty"`
	Envs     map[string]string `json:"envs,omitempty"`
	// Timeout is in seconds; absent or 0 means none.
	Timeout *int64 `json:"timeout,omitempty"`
}

// CodeRunResponse answers a code run. Result is stdout and stderr
// interleaved, as for process/execute. Artifacts (matplotlib charts) are
// never produced: the sandbox's python is plain.
type CodeRunResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// ExecuteRequest is the body of POST /process/execute.
type ExecuteRequest struct {
	Command string            `json:"command"`
	Cwd     *string           `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	// Timeout is in seconds; absent or 0 means none.
	Timeout *int64 `json:"timeout,omitempty"`
}

// ExecuteResponse is the answer of POST /process/execute. Result holds
// stdout and stderr interleaved as the command wrote them.
type ExecuteResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// SessionCommand is a command as GET /process/session lists it.
type SessionCommand struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// CreateSessionRequest is the body of POST /process/session.
type CreateSessionRequest struct {
	SessionID string `json:"sessionId"`
}

// Session is the answer of GET /process/session/{sessionId}.
type Session struct {
	SessionID string           `json:"sessionId"`
	Commands  []SessionCommand `json:"commands"`
}

// SessionExecuteRequest is the body of POST /process/session/{id}/exec.
// Async is the older spelling of RunAsync; either makes the call return at
// once with only the command id, and gives the command a stdin that
// POST .../command/{commandId}/input writes to (a sync command reads
// /dev/null). Input is echoed into the command's stdout unless
// SuppressInputEcho.
type SessionExecuteRequest struct {
	Command           string `json:"command"`
	RunAsync          bool   `json:"runAsync"`
	Async             bool   `json:"async"`
	SuppressInputEcho bool   `json:"suppressInputEcho"`
}

// SessionExecuteResponse answers a session exec. Output is stdout and stderr
// interleaved in arrival order.
type SessionExecuteResponse struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output,omitempty"`
	Stdout   *string `json:"stdout,omitempty"`
	Stderr   *string `json:"stderr,omitempty"`
	ExitCode *int    `json:"exitCode,omitempty"`
}

// SessionCommandLogs answers GET .../command/{commandId}/logs.
type SessionCommandLogs struct {
	Output string `json:"output"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// SessionSendInputRequest is the body of POST
// /process/session/{sessionId}/command/{commandId}/input.
type SessionSendInputRequest struct {
	Data *string `json:"data"`
}

// PtyCreateRequest is the body of POST /process/pty.
type PtyCreateRequest struct {
	ID        string            `json:"id"`
	Cwd       string            `json:"cwd"`
	Envs      map[string]string `json:"envs"`
	Cols      *int              `json:"cols"`
	Rows      *int              `json:"rows"`
	LazyStart bool              `json:"lazyStart"`
}

// PtyCreateResponse answers a create.
type PtyCreateResponse struct {
	SessionID string `json:"sessionId"`
}

// PtySessionInfo describes a PTY session. Envs lists the names of the
// variables it was given; their values are never reported.
type PtySessionInfo struct {
	ID        string            `json:"id"`
	Cwd       string            `json:"cwd"`
	Envs      map[string]string `json:"envs"`
	Cols      int               `json:"cols"`
	Rows      int               `json:"rows"`
	CreatedAt string            `json:"createdAt"`
	Active    bool              `json:"active"`
	LazyStart bool              `json:"lazyStart"`
}

// PtyListResponse answers GET /process/pty.
type PtyListResponse struct {
	Sessions []PtySessionInfo `json:"sessions"`
}

// PtyResizeRequest is the body of POST /process/pty/{sessionId}/resize.
type PtyResizeRequest struct {
	Cols *int `json:"cols"`
	Rows *int `json:"rows"`
}

// CreateContextRequest is the body of POST /process/interpreter/context.
type CreateContextRequest struct {
	Cwd      string `json:"cwd"`
	Language string `json:"language"`
}

// InterpreterContext describes a context.
type InterpreterContext struct {
	ID        string `json:"id"`
	Cwd       string `json:"cwd"`
	Language  string `json:"language"`
	CreatedAt string `json:"createdAt"`
	Active    bool   `json:"active"`
}

// ListContextsResponse answers GET /process/interpreter/context.
type ListContextsResponse struct {
	Contexts []InterpreterContext `json:"contexts"`
}
