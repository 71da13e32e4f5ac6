package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox"
	"github.com/sandplane/sandplane/toolbox/client"
)

// everyByte holds each byte value once, so no stream marker of the
// followed logs (three 0x01 or three 0x02) is among them.
func everyByte() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestExecStdinEndsWhereTheCallersEnds(t *testing.T) {
	big := strings.Repeat("0123456789abcdef-%\\\n", 1<<16) // 1.25 MiB, every escape
	tests := []struct {
		name           string
		command        string
		stdin          io.ReadSeeker
		code           int
		stdout, stderr string
	}{
		{"input then end of input", "cat", strings.NewReader("hi\n"), 0, "hi\n", ""},
		{"no stdin reads end of input", "cat", nil, 0, "", ""},
		{"an empty stdin", "cat", strings.NewReader(""), 0, "", ""},
		{"read sees end of input", "read x; echo $?", nil, 0, "1\n", ""},
		{"read takes a line", "read -r x; echo \"got:$x\"", strings.NewReader("it's \"%s\" -n \\ok\nnext\n"), 0, "got:it's \"%s\" -n \\ok\n", ""},
		{"the last line without a newline", "cat; echo", strings.NewReader("tail"), 0, "tail\n", ""},
		{"every byte", "cat", bytes.NewReader(everyByte()), 0, string(everyByte()), ""},
		{"much input", "wc -c | tr -d ' '", strings.NewReader(big), 0, "1310720\n", ""},
		{"the command's exit code", "cat >/dev/null; exit 3", strings.NewReader("x"), 3, "", ""},
		{"input to a missing program", "no-such-program-here", strings.NewReader("x"), 127, "", "not found"},
	}
	// The input travels as base64 frames where the sandbox has head and
	// base64, and as printf lines through sh's builtins where it has not.
	codecs := map[string]func(*client.Client) func(context.Context, string, client.Streams) (int, error){
		"base64": func(c *client.Client) func(context.Context, string, client.Streams) (int, error) { return c.Exec },
		"sh builtins": func(c *client.Client) func(context.Context, string, client.Streams) (int, error) {
			return c.ExecWithBuiltins
		},
	}
	for codec, execOf := range codecs {
		for _, tt := range tests {
			t.Run(codec+"/"+tt.name, func(t *testing.T) {
				if tt.stdin != nil {
					_, err := tt.stdin.Seek(0, io.SeekStart)
					require.NoError(t, err)
				}
				url, _, _ := newToolbox(t)
				c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				var stdout, stderr bytes.Buffer
				code, err := execOf(c)(ctx, tt.command, client.Streams{Stdin: tt.stdin, Stdout: &stdout, Stderr: &stderr})
				require.NoError(t, err)
				assert.Equal(t, tt.code, code, "stderr: %s", stderr.String())
				assert.Equal(t, tt.stdout, stdout.String(), "byte for byte, without the toolbox's echo")
				assert.Contains(t, stderr.String(), tt.stderr)
				assert.Empty(t, sessions(t, url), "Exec deletes its session")
			})
		}
	}
}

func TestExecEndsWithTheCommandWhileStdinStaysOpen(t *testing.T) {
	tests := []struct {
		name, command string
		code          int
		stdout        string
	}{
		{"a command that reads nothing", "echo done; exit 4", 4, "done\n"},
		{"a command that reads a part", "head -c 3; echo", 0, "abc\n"},
		{"a command that exits the shell", "exit 5", 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, _, _ := newToolbox(t)
			c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, w := io.Pipe()
			defer w.Close() // only now does the Read that Exec left end
			go func() { _, _ = w.Write([]byte("abcdef")) }()
			var stdout lockedBuffer
			code, err := c.Exec(ctx, tt.command, client.Streams{Stdin: r, Stdout: &stdout})
			require.NoError(t, err)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.stdout, stdout.String())
			assert.Empty(t, sessions(t, url))
		})
	}
}

func TestExecOutputIsBinarySafe(t *testing.T) {
	tests := []struct {
		name, command  string
		stdout, stderr string
	}{
		{"from the first byte", `printf '\377\376 bin'; printf '\200\300' >&2`, "\xff\xfe bin", "\x80\xc0"},
		{"after text", `echo text; echo note >&2; sleep 0.1; printf '\377 then '; printf '\376' >&2; sleep 0.1; echo more; echo again >&2`,
			"text\n\xff then more\n", "note\n\xfeagain\n"},
		{"a U+FFFD written as such", `printf '\357\277\275'`, "\uFFFD", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, _, _ := newToolbox(t)
			c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
			var stdout, stderr bytes.Buffer
			code, err := c.Run(context.Background(), tt.command, &stdout, &stderr)
			require.NoError(t, err)
			assert.Equal(t, 0, code)
			assert.Equal(t, []byte(tt.stdout), []byte(stdout.String()))
			assert.Equal(t, []byte(tt.stderr), []byte(stderr.String()))
		})
	}
}

func TestExecPollsAToolboxWithoutTheWebSocket(t *testing.T) {
	workDir := t.TempDir()
	h := toolbox.NewHandler(toolbox.Options{WorkDir: workDir, HomeDir: workDir})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		h.(io.Closer).Close()
	})
	c := client.New(ts.URL, nil, client.WithPollInterval(10*time.Millisecond))
	var stdout, stderr bytes.Buffer
	code, err := c.Exec(context.Background(), `cat; printf '\377\n'; echo err >&2; exit 2`, client.Streams{Stdin: strings.NewReader("in\n"), Stdout: &stdout, Stderr: &stderr})
	require.NoError(t, err)
	assert.Equal(t, 2, code)
	assert.Equal(t, "in\n\uFFFD\n", stdout.String(), "what JSON makes of it")
	assert.Equal(t, "err\n", stderr.String())
}

func TestRunGivesAnEmptyStdin(t *testing.T) {
	url, _, _ := newToolbox(t)
	c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout bytes.Buffer
	code, err := c.Run(ctx, "cat; read x; echo read:$?", &stdout, nil)
	require.NoError(t, err, "a command that reads stdin does not wait for input nobody can send")
	assert.Equal(t, 0, code)
	assert.Equal(t, "read:1\n", stdout.String())
}
