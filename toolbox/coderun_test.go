package toolbox

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestCodeRun(t *testing.T) {
	requireTool(t, "python3")
	requireTool(t, "node")
	withNodeTools(t)
	ts := newTestServer(t, Options{})

	tests := []struct {
		name     string
		req      wire.CodeRunRequest
		exitCode int
		result   []string
	}{
		{
			name:   "python with argv and envs",
			req:    wire.CodeRunRequest{Language: "python", Code: "import os, sys\nprint(sys.argv[1:], os.environ['GREETING'])\nprint(os.getcwd())", Argv: []string{"a b", "c"}, Envs: map[string]string{"GREETING": "hi"}},
			result: []string{"['a b', 'c'] hi\n", ts.workDir + "\n"},
		},
		{
			name:     "python exception",
			req:      wire.CodeRunRequest{Language: "python", Code: "print('before')\nraise ValueError('boom')"},
			exitCode: 1,
			result:   []string{"before\n", "ValueError: boom"},
		},
		{
			name:   "javascript",
			req:    wire.CodeRunRequest{Language: "javascript", Code: "console.log(process.argv.slice(2).join(','), 6*7)", Argv: []string{"x", "y"}},
			result: []string{"x,y 42\n"},
		},
		{
			name:   "typescript",
			req:    wire.CodeRunRequest{Language: "typescript", Code: "interface P { n: number }\nconst p: P = { n: 41 };\nconsole.log(p.n + 1);\nexport {};"},
			result: []string{"42\n"},
		},
		{
			name:     "typescript type error",
			req:      wire.CodeRunRequest{Language: "typescript", Code: "const x: number = 'not a number';\nconsole.log(x);"},
			exitCode: 1,
			result:   []string{"TS2322"},
		},
		{
			name:     "exit code",
			req:      wire.CodeRunRequest{Language: "python", Code: "import sys; sys.exit(3)"},
			exitCode: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/process/code-run", tt.req)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			var out wire.CodeRunResponse
			resp.json(t, &out)
			assert.Equal(t, tt.exitCode, out.ExitCode, "result: %s", out.Result)
			for _, want := range tt.result {
				assert.Contains(t, out.Result, want)
			}
		})
	}

	t.Run("no program files are left behind", func(t *testing.T) {
		left, err := filepath.Glob(filepath.Join(os.TempDir(), "sandplane-code-run-*"))
		require.NoError(t, err)
		assert.Empty(t, left)
	})

	t.Run("timeout", func(t *testing.T) {
		timeout := int64(1)
		resp := ts.postJSON(t, "/process/code-run", wire.CodeRunRequest{Language: "python", Code: "import time\ntime.sleep(60)", Timeout: &timeout})
		require.Equal(t, http.StatusRequestTimeout, resp.status, "body: %s", resp.body)
		assert.Equal(t, "command execution timeout", resp.apiErr(t).Message)
	})

	t.Run("a missing interpreter fails like a missing command", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		resp := ts.postJSON(t, "/process/code-run", wire.CodeRunRequest{Language: "typescript", Code: "console.log(1)"})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		var out wire.CodeRunResponse
		resp.json(t, &out)
		assert.Equal(t, 127, out.ExitCode)
		assert.Contains(t, out.Result, "ts-node")
		assert.Contains(t, out.Result, "not found")
	})

	for _, tt := range []struct {
		name string
		body any
	}{
		{"unsupported language", wire.CodeRunRequest{Language: "ruby", Code: "puts 1"}},
		{"no language", wire.CodeRunRequest{Code: "print(1)"}},
		{"no code", wire.CodeRunRequest{Language: "python", Code: "  "}},
		{"negative timeout", map[string]any{"language": "python", "code": "1", "timeout": -1}},
		{"bad env name", wire.CodeRunRequest{Language: "python", Code: "1", Envs: map[string]string{"A=B": "x"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.postJSON(t, "/process/code-run", tt.body)
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			resp.apiErr(t)
		})
	}
}
