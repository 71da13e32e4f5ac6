package toolbox

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestDetectShell(t *testing.T) {
	dir := t.TempDir()
	bash := filepath.Join(dir, "bash")
	require.NoError(t, os.WriteFile(bash, []byte("#!/bin/sh\n"), 0o755))
	notExec := filepath.Join(dir, "sub", "bash")
	require.NoError(t, os.MkdirAll(filepath.Dir(notExec), 0o755))
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))

	tests := []struct {
		name, shells, want string
	}{
		{"bash listed", "# comment\n/bin/sh\n" + bash + "\n", bash},
		{"first usable bash wins", "/no/such/bash\n" + notExec + "\n" + bash + "\n", bash},
		{"no bash listed", "/bin/sh\n/bin/dash\n", fallbackShell},
		{"listed bash is missing", "/no/such/bash\n", fallbackShell},
		{"relative names are not shells", "bash\n", fallbackShell},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "shells")
			require.NoError(t, os.WriteFile(f, []byte(tt.shells), 0o644))
			assert.Equal(t, tt.want, detectShell(f))
		})
	}
	t.Run("no shells file", func(t *testing.T) {
		assert.Equal(t, fallbackShell, detectShell(filepath.Join(dir, "none")))
	})
}

func TestShellJoin(t *testing.T) {
	argv := []string{"printf", "%s|", "it's", "$HOME", "a b", ""}
	out, err := exec.Command("/bin/sh", "-c", ShellJoin(argv)).Output()
	require.NoError(t, err)
	assert.Equal(t, "it's|$HOME|a b||", string(out))
}

// bashOnly skips where the system has no bash for the toolbox to pick.
func bashOnly(t *testing.T) {
	t.Helper()
	if detectShell(shellsFile) == fallbackShell {
		t.Skipf("%s lists no bash; the toolbox runs commands in %s here", shellsFile, fallbackShell)
	}
}

// bigCommand is a command longer than one argument of execve may be
// (MAX_ARG_STRLEN, 128 KiB): it prints the length of what it holds.
func bigCommand() (string, string) {
	payload := strings.Repeat("x", 128<<10)
	return "x='" + payload + "'; echo ${#x}", fmt.Sprintf("%d\n", len(payload))
}

// TestCommandsRunInBashFromStdin checks what the shell fed on stdin gives
// process execution and sessions alike: bash syntax, commands longer than
// an argument may be, and Daytona's "command not found".
func TestCommandsRunInBashFromStdin(t *testing.T) {
	bashOnly(t)
	ts := newTestServer(t, Options{})
	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "b"}).status)
	big, bigOut := bigCommand()

	tests := []struct {
		name, command      string
		wantExit           int
		wantStdout, wantIn string // wantIn: a substring of the combined output
	}{
		{name: "[[ ]]", command: `[[ "abc" == a* ]] && echo match`, wantStdout: "match\n"},
		{name: "arrays", command: `a=(one two three); echo "${#a[@]} ${a[1]}"`, wantStdout: "3 two\n"},
		{name: "process substitution", command: `cat <(echo sub)`, wantStdout: "sub\n"},
		{name: "multi-line with a heredoc", command: "cat <<EOF\nline $((1+1))\nEOF\necho after", wantStdout: "line 2\nafter\n"},
		{name: "a reader reads no script", command: "cat\necho after-cat", wantStdout: "after-cat\n"},
		{name: "128 KiB command", command: big, wantStdout: bigOut},
		{name: "command not found", command: "no-such-program-xyz --flag", wantExit: 127, wantIn: "bash: no-such-program-xyz: command not found\n"},
	}
	for _, tt := range tests {
		t.Run("execute/"+tt.name, func(t *testing.T) {
			var out wire.ExecuteResponse
			resp := ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: tt.command})
			require.Equal(t, http.StatusOK, resp.status, "body: %.300s", resp.body)
			resp.json(t, &out)
			assert.Equal(t, tt.wantExit, out.ExitCode)
			if tt.wantIn != "" {
				assert.Equal(t, tt.wantIn, out.Result)
			} else {
				assert.Equal(t, tt.wantStdout, out.Result)
			}
		})
		t.Run("session/"+tt.name, func(t *testing.T) {
			resp, out := ts.sessionExec(t, "b", wire.SessionExecuteRequest{Command: tt.command})
			require.Equal(t, http.StatusOK, resp.status, "body: %.300s", resp.body)
			require.NotNil(t, out.ExitCode)
			assert.Equal(t, tt.wantExit, *out.ExitCode)
			assert.Equal(t, tt.wantStdout, *out.Stdout)
			if tt.wantIn != "" {
				assert.Equal(t, tt.wantIn, *out.Stderr, "no line number, no eval: what Daytona's shell says")
			}
		})
	}
}

func TestCommandsFallBackToSh(t *testing.T) {
	ts := newTestServer(t, Options{Shell: fallbackShell})
	var out wire.ExecuteResponse
	ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: "no-such-program-xyz"}).json(t, &out)
	assert.Equal(t, 127, out.ExitCode)

	big, bigOut := bigCommand()
	ts.postJSON(t, "/process/execute", wire.ExecuteRequest{Command: big}).json(t, &out)
	assert.Equal(t, 0, out.ExitCode)
	assert.Equal(t, bigOut, out.Result)
}
