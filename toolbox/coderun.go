package toolbox

import (
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// codeRunner says how one language runs a program file. The interpreters
// are looked up in PATH by the shell, so a missing one fails the way a
// missing command does: exit code 127 and the shell's "not found".
type codeRunner struct {
	file    string // the program's file name; its extension matters
	command string // shell words before the file
}

// codeRunners are the languages the SDKs' codeRun sends. TypeScript runs
// through ts-node with CommonJS modules, as Daytona's TypeScript code
// toolbox runs it; --cwd-mode resolves tsconfig and @types from the work
// directory, as its `ts-node -e` does.
var codeRunners = map[string]codeRunner{
	"python":     {file: "main.py", command: "python3"},
	"javascript": {file: "main.js", command: "node"},
	"typescript": {file: "main.ts", command: `ts-node --cwd-mode --compiler-options '{"module":"CommonJS"}'`},
}

func supportedLanguages() string {
	names := make([]string, 0, len(codeRunners))
	for n := range codeRunners {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func parseCodeRunRequest(body []byte) (wire.CodeRunRequest, codeRunner, error) {
	var req wire.CodeRunRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, codeRunner{}, err
	}
	if strings.TrimSpace(req.Code) == "" {
		return req, codeRunner{}, errorf(http.StatusBadRequest, "code is required")
	}
	if req.Language == "" {
		return req, codeRunner{}, errorf(http.StatusBadRequest, "language is required (one of %s)", supportedLanguages())
	}
	runner, ok := codeRunners[strings.ToLower(req.Language)]
	if !ok {
		return req, codeRunner{}, errorf(http.StatusBadRequest, "unsupported language: %s (supported: %s)", req.Language, supportedLanguages())
	}
	for _, a := range req.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return req, codeRunner{}, errorf(http.StatusBadRequest, "argv must not contain NUL bytes")
		}
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		return req, codeRunner{}, errorf(http.StatusBadRequest, "timeout must not be negative")
	}
	if err := validateEnv(req.Envs); err != nil {
		return req, codeRunner{}, err
	}
	return req, runner, nil
}

// handleCodeRun writes the program to a private temporary directory and
// runs it there with the work directory as cwd, like process/execute.
func (s *server) handleCodeRun(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, defaultMaxJSONBodyBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, runner, err := parseCodeRunRequest(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	dir, err := os.MkdirTemp("", "sandplane-code-run-")
	if err != nil {
		s.fail(w, r, errorf(http.StatusInternalServerError, "creating a directory for the program: %v", err))
		return
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, runner.file)
	if err := os.WriteFile(file, []byte(req.Code), 0o600); err != nil {
		s.fail(w, r, errorf(http.StatusInternalServerError, "writing the program: %v", err))
		return
	}
	words := []string{"exec", runner.command, shellQuote(file)}
	for _, a := range req.Argv {
		words = append(words, shellQuote(a))
	}
	res := s.run(r.Context(), runSpec{
		command: strings.Join(words, " "),
		dir:     s.opts.WorkDir,
		env:     s.envList(req.Envs),
		timeout: timeoutDuration(req.Timeout),
	})
	switch {
	case res.canceled:
		return
	case res.timedOut:
		s.fail(w, r, codedf(http.StatusRequestTimeout, wire.CodeProcessExecutionTimeout, "command execution timeout"))
		return
	}
	writeJSON(w, http.StatusOK, wire.CodeRunResponse{ExitCode: res.exitCode, Result: string(res.output)})
}
