package toolbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// parseExecuteRequest decodes and validates an execute body.
func parseExecuteRequest(body []byte) (wire.ExecuteRequest, error) {
	var req wire.ExecuteRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	if err := validCommand(req.Command); err != nil {
		return req, err
	}
	if req.Cwd != nil && strings.IndexByte(*req.Cwd, 0) >= 0 {
		return req, errorf(http.StatusBadRequest, "cwd must not contain NUL bytes")
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		return req, errorf(http.StatusBadRequest, "timeout must not be negative")
	}
	if err := validateEnv(req.Envs); err != nil {
		return req, err
	}
	return req, nil
}

func validCommand(command string) error {
	if strings.TrimSpace(command) == "" {
		return errorf(http.StatusBadRequest, "command cannot be empty or whitespace-only")
	}
	if strings.IndexByte(command, 0) >= 0 {
		return errorf(http.StatusBadRequest, "command must not contain NUL bytes")
	}
	return nil
}

// validateEnv rejects names the kernel would mangle. Values are never echoed.
func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			// Not quoted: a name sent as KEY=value would echo the value.
			return errorf(http.StatusBadRequest, "invalid environment variable name: a name must be non-empty, without '=' or NUL bytes")
		}
		if strings.IndexByte(v, 0) >= 0 {
			return errorf(http.StatusBadRequest, "environment variable %s has a NUL byte in its value", k)
		}
	}
	return nil
}

// timeoutDuration turns seconds into a duration; 0 and values too large to
// represent mean no timeout.
func timeoutDuration(seconds *int64) time.Duration {
	if seconds == nil || *seconds <= 0 || *seconds > math.MaxInt64/int64(time.Second) {
		return 0
	}
	return time.Duration(*seconds) * time.Second
}

func (s *server) handleExecute(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, defaultMaxJSONBodyBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := parseExecuteRequest(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var cwd string
	if req.Cwd != nil {
		cwd = *req.Cwd
	}
	res := s.run(r.Context(), runSpec{
		command: req.Command,
		dir:     s.absPath(cwd),
		env:     s.envList(req.Envs),
		timeout: timeoutDuration(req.Timeout),
	})
	switch {
	case res.canceled:
		// The client is gone; nobody reads an answer.
		return
	case res.timedOut:
		s.fail(w, r, codedf(http.StatusRequestTimeout, wire.CodeProcessExecutionTimeout, "command execution timeout"))
		return
	}
	// Streamed, as ExecuteResponse: the output is at most MaxOutputBytes and
	// is never copied or escaped whole.
	writeJSONStream(w, http.StatusOK,
		field{"exitCode", res.exitCode},
		field{"result", text{res.output, []byte(res.note)}})
}

// absPath anchors a relative path at the work dir; empty is the work dir.
func (s *server) absPath(p string) string {
	if p == "" {
		return s.opts.WorkDir
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.opts.WorkDir, p)
	}
	return mapHome(filepath.Clean(p), s.opts.HomeAlias, s.opts.HomeDir)
}

// envList is the environment of a command given env: the toolbox's
// (POST /env included), env on top.
func (s *server) envList(env map[string]string) []string {
	return appendEnv(s.opts.env.environ(), env)
}

// appendEnv appends env to out in name order; exec keeps the last of
// duplicate names, so these override what out had.
func appendEnv(out []string, env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

type runSpec struct {
	command string
	dir     string
	env     []string // nil inherits the toolbox's environment
	timeout time.Duration
}

type runResult struct {
	exitCode int
	output   []byte
	note     string // what was dropped from output, if anything
	timedOut bool
	canceled bool
}

// run executes spec in the shell, in its own process group, with stdout and
// stderr on one pipe, so the output keeps the order it was written in. The
// command reaches the shell on its stdin (see evalLine) and reads
// /dev/null itself. On timeout or when ctx ends, the whole group is
// killed. When the shell exits but background children still hold the
// pipe, output is collected for OutputGrace more and the children are left
// running.
func (s *server) run(ctx context.Context, spec runSpec) runResult {
	pr, pw, err := os.Pipe()
	if err != nil {
		return runResult{exitCode: -1, output: []byte(err.Error())}
	}
	cmd := shellCommand(s.opts.Shell)
	cmd.Stdin = strings.NewReader(shellPrelude(s.opts.Shell) + evalLine(spec.command, os.DevNull))
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	// The same *os.File for both makes the child share one descriptor.
	cmd.Stdout, cmd.Stderr = pw, pw
	setProcessGroup(cmd)
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return runResult{exitCode: -1, output: []byte(startError(err, spec.dir))}
	}

	out := &cappedBuffer{limit: s.opts.MaxOutputBytes}
	readDone := make(chan struct{})
	go func() {
		io.Copy(out, pr)
		close(readDone)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		killProcessGroup(cmd)
		<-exited
		pr.Close()
		<-readDone
	}

	var timeout <-chan time.Time
	if spec.timeout > 0 {
		t := s.opts.Clock.NewTimer(spec.timeout)
		defer t.Stop()
		timeout = t.C()
	}
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-timeout:
		stop()
		return runResult{timedOut: true}
	case <-ctx.Done():
		stop()
		return runResult{canceled: true}
	}

	select {
	case <-readDone:
	default:
		grace := s.opts.Clock.NewTimer(s.opts.OutputGrace)
		select {
		case <-readDone:
		case <-grace.C():
		case <-ctx.Done():
		}
		grace.Stop()
	}
	pr.Close()
	<-readDone
	return runResult{exitCode: exitCode(cmd, waitErr), output: out.buf, note: out.note()}
}

func exitCode(cmd *exec.Cmd, waitErr error) int {
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return ee.ExitCode()
	}
	if waitErr != nil || cmd.ProcessState == nil {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

func startError(err error, dir string) string {
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return fmt.Sprintf("cannot start command: working directory %s: %v", dir, serr)
		}
	}
	return "cannot start command: " + err.Error()
}
