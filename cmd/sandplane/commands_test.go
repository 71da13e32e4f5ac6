package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
)

// These tests run the built binary, as a user would, against a daemon
// process and against a simulator process: every client command, its
// output and its exit code.

func TestUsageErrorsExitWithTwo(t *testing.T) {
	d := startCLIDaemon(t)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "here").code)
	tests := []struct {
		name string
		args []string
		say  string
	}{
		{"logs without an id", []string{"logs"}, "accepts 1 arg"},
		{"an unknown command", []string{"lss"}, `unknown command "lss" (did you mean`},
		{"an unknown flag", []string{"ls", "--nope"}, "unknown flag"},
		{"stop with an argument too many for a selector", []string{"stop", "--all", "here"}, "not both"},
		{"rm without sandboxes", []string{"rm"}, "--all or --label"},
		{"rm with both selectors", []string{"rm", "--all", "--label", "a=b"}, "one of the two"},
		{"exec without a command", []string{"exec", "here"}, "at least 2 arg"},
		{"exec with -- and no command", []string{"exec", "here", "--"}, "no COMMAND"},
		{"exec -it without a terminal", []string{"exec", "-it", "here", "--", "true"}, "needs a terminal on stdin"},
		{"exec -i alone", []string{"exec", "-i", "here", "--", "true"}, "-i and -t go together"},
		{"exec's flags after the sandbox", []string{"exec", "here", "--json", "--", "sh", "-c", "echo x"}, "flags go before the sandbox, and what follows it is the command to run: sandplane exec --json here -- sh -c 'echo x'"},
		{"exec's flag with a value after the sandbox", []string{"exec", "here", "--provider", "local://", "-it", "--", "sh"}, "sandplane exec --provider local:// -it here -- sh"},
		{"exec --help after the sandbox", []string{"exec", "here", "--help"}, "flags go before the sandbox, and what follows it is the command to run: for help, run sandplane exec --help"},
		{"ls -q with --json", []string{"ls", "-q", "--json"}, "do not go together"},
		{"version with an argument", []string{"version", "now"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := d.cli(t, tt.args...)
			assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stderr, tt.say)
		})
	}
}

func TestExec(t *testing.T) {
	d := startCLIDaemon(t)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "box").code)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "parked").code)
	require.Equal(t, 0, d.cli(t, "stop", "parked").code)
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"output and exit code", []string{"exec", "box", "--", "sh", "-c", "echo out; echo err >&2; exit 3"}, 3, "out\n", "err\n"},
		{"without --", []string{"exec", "box", "printf", "%s|", "a b", "it's"}, 0, "a b|it's|", ""},
		{"the command's own flags", []string{"exec", "box", "--", "ls", "-d", "/"}, 0, "/\n", ""},
		{"a missing program", []string{"exec", "box", "--", "no-such-program-here"}, 127, "", "sandplane: no-such-program-here: command not found\n"},
		{"a stopped sandbox", []string{"exec", "parked", "--", "true"}, 2, "", "start it first (sandplane start parked)"},
		{"a missing sandbox", []string{"exec", "nope", "--", "true"}, 3, "", "(sandplane ls lists the sandboxes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := d.cli(t, tt.args...)
			assert.Equal(t, tt.code, r.code, "stderr: %s", r.stderr)
			assert.Equal(t, tt.stdout, r.stdout)
			assert.Contains(t, r.stderr, tt.stderr)
			assert.NotContains(t, r.stderr, "eval", "no shell internals")
		})
	}

	t.Run("a flag of the command's after the sandbox without --", func(t *testing.T) {
		r := d.cli(t, "exec", "box", "ls", "--json")
		assert.Contains(t, r.stderr, "ls: unrecognized option '--json'", "ls's own flag, given to ls")
		assert.NotContains(t, r.stderr, "flags go before the sandbox")
	})

	// A sandbox that goes while its command runs takes the command with
	// it; exec says so, rather than relaying its toolbox's last answer.
	for _, tc := range []struct {
		lose   string
		code   int
		stderr string
	}{
		{"rm", 3, "sandbox lost was deleted while the command ran"},
		{"stop", 2, "sandbox lost is stopped: it stopped while the command ran, and the command with it; start it again with sandplane start lost"},
	} {
		t.Run("a sandbox that goes on "+tc.lose+" while the command runs", func(t *testing.T) {
			require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "lost").code)
			t.Cleanup(func() { d.cli(t, "rm", "lost") })
			r := d.start(t, "exec", "lost", "--", "sh", "-c", "echo running; sleep 100")
			require.Eventually(t, func() bool { return strings.Contains(r.stdout.String(), "running") }, 30*time.Second, 10*time.Millisecond)
			require.Equal(t, 0, d.cli(t, tc.lose, "lost").code)
			assert.Equal(t, tc.code, r.wait(t), "stderr: %s", r.stderr)
			assert.Contains(t, r.stderr.String(), tc.stderr)
			assert.NotContains(t, r.stderr.String(), "preview token")
		})
	}

	t.Run("--json", func(t *testing.T) {
		r := d.cli(t, "exec", "--json", "box", "--", "sh", "-c", "echo out; echo err >&2; exit 4")
		assert.Equal(t, 4, r.code, r.stderr)
		events := outputEvents(t, r.stdout)
		assert.Equal(t, []outputEvent{
			{Type: "stdout", Data: "out\n"},
			{Type: "stderr", Data: "err\n"},
			{Type: "exit", ExitCode: ptr(4)},
		}, events)
	})
}

func TestExecAndRunPassStdinOnAndEndIt(t *testing.T) {
	d := startCLIDaemon(t)
	// Never idle-stopped between the cases: the daemon's minute is short.
	require.Equal(t, 0, d.cli(t, "create", "--name", "box", "--auto-stop", "0").code)
	everyByte := make([]byte, 256) // each once: no marker of the followed logs
	for i := range everyByte {
		everyByte[i] = byte(i)
	}
	tests := []struct {
		name   string
		stdin  io.Reader
		args   []string
		code   int
		stdout string
	}{
		{"echo hi | exec -- cat", strings.NewReader("hi\n"), []string{"exec", "box", "--", "cat"}, 0, "hi\n"},
		{"exec -- cat </dev/null", nil, []string{"exec", "box", "--", "cat"}, 0, ""},
		{"exec -- sh -c 'read x' </dev/null", nil, []string{"exec", "box", "--", "sh", "-c", "read x; echo read:$?"}, 0, "read:1\n"},
		{"an empty pipe", strings.NewReader(""), []string{"exec", "box", "--", "sh", "-c", "read x; echo read:$?"}, 0, "read:1\n"},
		{"a line, then end of input", strings.NewReader("one\n"), []string{"exec", "box", "--", "sh", "-c", `while read -r l; do echo "got $l"; done; echo end`}, 0, "got one\nend\n"},
		{"bytes that are not text", bytes.NewReader(everyByte), []string{"exec", "box", "--", "cat"}, 0, string(everyByte)},
		{"output that is not UTF-8", nil, []string{"exec", "box", "--", "sh", "-c", `printf '\377\376 bin'`}, 0, "\xff\xfe bin"},
		{"echo hi | run -- cat", strings.NewReader("hi\n"), []string{"run", "--auto-stop", "0", "--rm", "--", "cat"}, 0, "hi\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := d.cliIn(t, tt.stdin, tt.args...)
			assert.Equal(t, tt.code, r.code, "stderr: %s", r.stderr)
			assert.Equal(t, []byte(tt.stdout), []byte(r.stdout), "byte for byte")
		})
	}

	t.Run("the command ends while stdin stays open", func(t *testing.T) {
		// (sleep 60) | sandplane exec box -- sh -c 'echo quick; exit 3'
		cmd := exec.Command(testdaemon.Binary(t), "exec", "box", "--", "sh", "-c", "echo quick; exit 3")
		cmd.Env = cliEnv(d.url)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		defer stdin.Close()
		var stdout, stderr testdaemon.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "stderr: %s", &stderr)
			assert.Equal(t, 3, ee.ExitCode(), "stderr: %s", &stderr)
			assert.Equal(t, "quick\n", stdout.String())
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("exec waited for the end of an input its command never read; stderr: %s", &stderr)
		}
	})
}

func TestExecOnATerminal(t *testing.T) {
	d := startCLIDaemon(t)
	require.Equal(t, 0, d.cli(t, "create", "--auto-stop", "0", "--name", "tty").code)
	// run starts the binary on a terminal of 101x33; the copy of its
	// output ends once it has exited and everything it wrote is read.
	type onTerminal struct {
		cmd    *exec.Cmd
		term   *os.File
		out    *testdaemon.Buffer
		copied chan struct{}
	}
	run := func(t *testing.T, args ...string) *onTerminal {
		r := &onTerminal{cmd: exec.Command(testdaemon.Binary(t), args...), out: &testdaemon.Buffer{}, copied: make(chan struct{})}
		r.cmd.Env = cliEnv(d.url)
		var err error
		r.term, err = pty.StartWithSize(r.cmd, &pty.Winsize{Rows: 33, Cols: 101})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.term.Close() })
		go func() { _, _ = io.Copy(r.out, r.term); close(r.copied) }()
		return r
	}
	exitCode := func(t *testing.T, r *onTerminal) int {
		done := make(chan error, 1)
		go func() { done <- r.cmd.Wait() }()
		select {
		case err := <-done:
			select {
			case <-r.copied:
			case <-time.After(10 * time.Second):
				t.Fatal("the terminal's output never ended")
			}
			var ee *exec.ExitError
			if err != nil {
				require.ErrorAs(t, err, &ee)
				return ee.ExitCode()
			}
			return 0
		case <-time.After(60 * time.Second):
			_ = r.cmd.Process.Kill()
			t.Fatal("exec -it did not end")
			return -1
		}
	}

	t.Run("input, size and exit code", func(t *testing.T) {
		r := run(t, "exec", "-it", "tty", "--", "sh", "-c", "stty size; read line; echo got:$line; exit 5")
		require.Eventually(t, func() bool { return strings.Contains(r.out.String(), "33 101") }, 30*time.Second, 10*time.Millisecond,
			"the remote terminal has this one's size: %q", r.out)
		_, err := r.term.Write([]byte("hello\r"))
		require.NoError(t, err)
		assert.Equal(t, 5, exitCode(t, r), "output: %q", r.out)
		assert.Contains(t, r.out.String(), "got:hello")
		assert.NotContains(t, r.out.String(), "__sandplane", "the shell's prompt and echo are hidden")
		assert.NotContains(t, r.out.String(), "exec ", "the command line is not shown")
	})
	t.Run("without -it, a terminal is no input", func(t *testing.T) {
		r := run(t, "exec", "tty", "--", "sh", "-c", "read x; echo read:$?")
		assert.Equal(t, 0, exitCode(t, r), "output: %q", r.out)
		assert.Equal(t, "read:1\r\n", r.out.String(), "end of input at once: typing is for -it")
	})
	t.Run("a missing program", func(t *testing.T) {
		r := run(t, "exec", "-it", "tty", "--", "no-such-program-here")
		assert.Equal(t, 127, exitCode(t, r), "output: %q", r.out)
		assert.Equal(t, "sandplane: no-such-program-here: command not found\r\n", r.out.String())
	})
}

func TestRunJSONAndItsWarnings(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "run", "--auto-stop", "0", "--rm", "--json", "--", "sh", "-c", "echo out; sleep 0.2; echo err >&2; exit 3")
	assert.Equal(t, 3, r.code, r.stderr)
	events := outputEvents(t, r.stdout)
	require.Len(t, events, 4, "sandbox, stdout, stderr, exit: %s", r.stdout)
	assert.Equal(t, "sandbox", events[0].Type)
	require.NotNil(t, events[0].Sandbox)
	assert.Equal(t, sandboxID(t, r.stderr), events[0].Sandbox.ID)
	assert.Equal(t, provider.StateStarted, events[0].Sandbox.State)
	assert.Equal(t, []outputEvent{{Type: "stdout", Data: "out\n"}, {Type: "stderr", Data: "err\n"}, {Type: "exit", ExitCode: ptr(3)}}, events[1:])

	r = d.cli(t, "run", "--auto-stop", "0", "--rm", "--snapshot", "exits-four")
	assert.Equal(t, 4, r.code, r.stderr)
	assert.Contains(t, r.stderr, "sandplane: no COMMAND given: following the snapshot's own workload until it ends")
	assert.Contains(t, r.stderr, "is stopped (exited: code 4)", "it says why it ended")
	d.assertNothingLeft(t)
}

func TestSelectorsQuietListAndStopReason(t *testing.T) {
	d := startCLIDaemon(t)
	ids := map[string]string{}
	for _, c := range []struct{ name, team string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}} {
		r := d.cli(t, "create", "--auto-stop", "0", "--name", c.name, "--label", "team="+c.team)
		require.Equal(t, 0, r.code, r.stderr)
		ids[c.name] = strings.TrimSpace(r.stdout)
	}
	r := d.cli(t, "ls", "-q")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, ids["a1"]+"\n"+ids["a2"]+"\n"+ids["b1"]+"\n", r.stdout, "ids only, oldest first")
	r = d.cli(t, "ls", "-q", "--label", "team=b")
	assert.Equal(t, ids["b1"]+"\n", r.stdout)

	r = d.cli(t, "stop", "--label", "team=a")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, ids["a1"]+"\n"+ids["a2"]+"\n", r.stdout, "each one stopped")
	r = d.cli(t, "ls", "--json")
	var list []provider.Sandbox
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	for _, s := range list {
		if s.Labels["team"] == "a" {
			assert.Equal(t, provider.StateStopped, s.State, s.Name)
			assert.Equal(t, "stopped", s.ErrorReason, "a manual stop says so")
		} else {
			assert.Equal(t, provider.StateStarted, s.State, s.Name)
		}
	}
	r = d.cli(t, "ls")
	assert.Regexp(t, `(?m)^`+ids["a1"]+`\s+a1\s+stopped\s+native\s+-\s+\S+\s+\S+\s+stopped\s+cli\s+-$`, r.stdout, "REASON shows it")

	r = d.cli(t, "rm", "--label", "team=nobody")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no sandbox matches")
	r = d.cli(t, "rm", "--label", "team=a", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `[{"id":"`+ids["a1"]+`"},{"id":"`+ids["a2"]+`"}]`, r.stdout)
	r = d.cli(t, "rm", "--all")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, ids["b1"]+"\n", r.stdout)
	d.assertNothingLeft(t)

	// Picking none deletes none, and that is no error: cleanup repeats.
	for _, args := range [][]string{{"rm", "--all"}, {"rm", "--label", "team=a"}, {"stop", "--all"}} {
		r = d.cli(t, args...)
		assert.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		assert.Empty(t, r.stdout, "%v", args)
		assert.Equal(t, "sandplane: no sandbox matches\n", r.stderr, "%v", args)
		r = d.cli(t, append(args, "--json")...)
		assert.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		assert.Equal(t, "[]\n", r.stdout, "%v --json", args)
	}
}

func TestLogsFollowSaysWhyItEnded(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "create", "--auto-stop", "0", "--name", "short", "--snapshot", "exits-four")
	require.Equal(t, 0, r.code, r.stderr)
	r = d.cli(t, "logs", "-f", "short")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "from-entrypoint\n", r.stdout)
	assert.Contains(t, r.stderr, "sandplane: sandbox short is stopped (exited: code 4)\n")
}

func TestHintsSpeakTheCommandLine(t *testing.T) {
	d := startCLIDaemon(t)
	r := d.cli(t, "logs", "nope")
	assert.Equal(t, 3, r.code)
	assert.Contains(t, r.stderr, "sandplane ls")
	assert.NotContains(t, r.stderr, "/v1/")

	locked := testdaemon.Start(t, testdaemon.Options{Token: "cli-token"})
	r = (&cliDaemon{url: locked.URL}).cli(t, "ls")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "set SANDPLANE_TOKEN to the token it was started with")
	assert.NotContains(t, r.stderr, "Authorization: Bearer")

	r = (&cliDaemon{url: locked.URL, env: []string{"SANDPLANE_TOKEN=wrong"}}).cli(t, "rm", "x")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Equal(t, "sandplane: the daemon refused the token in SANDPLANE_TOKEN: set it to the daemon's token, which is in the daemon's --token-file (or SANDPLANE_TOKEN_FILE), or was in SANDPLANE_TOKEN when the daemon started\n", r.stderr)
	r = (&cliDaemon{url: locked.URL, env: []string{"SANDPLANE_TOKEN=cli-token"}}).cli(t, "rm", "x")
	assert.Equal(t, 3, r.code, "the right token gets as far as the sandbox: %s", r.stderr)

	// info tells what a daemon tells anyone, and that the rest needs the
	// token, rather than empty lines that read as a daemon without
	// runtimes.
	r = (&cliDaemon{url: locked.URL}).cli(t, "info")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Regexp(t, `(?m)^name: +sandplane$`, r.stdout)
	assert.NotContains(t, r.stdout, "runtimes:")
	assert.Contains(t, r.stderr, "set SANDPLANE_TOKEN to the token it was started with (its --token-file); without it the daemon tells only its name and version")
	r = (&cliDaemon{url: locked.URL}).cli(t, "info", "--json")
	assert.Equal(t, 1, r.code, "as without --json: %s", r.stderr)
	assert.Contains(t, r.stdout, `"name": "sandplane"`)
	assert.Contains(t, r.stderr, "without it the daemon tells only its name and version")
	r = (&cliDaemon{url: locked.URL, env: []string{"SANDPLANE_TOKEN=cli-token"}}).cli(t, "info")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^runtimes: +\S`, r.stdout)
}

func TestVersion(t *testing.T) {
	d := startCLIDaemon(t)
	out, err := exec.Command("go", "version", "-m", testdaemon.Binary(t)).Output()
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\tmod\tgithub.com/sandplane/sandplane\t(\S+)`).FindSubmatch(out)
	require.NotNil(t, m, "go version -m: %s", out)
	want := string(m[1])
	if want == "(devel)" {
		want = "dev" // no module version, and this build stamps none
	}
	r := d.cli(t, "version")
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "sandplane "+want+"\n"), r.stdout)
	r = d.cli(t, "version", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	assert.Equal(t, want, v.Version)
	assert.Equal(t, "v1", v.APIVersion)
	r = d.cli(t, "--version")
	assert.Equal(t, "sandplane version "+want+"\n", r.stdout)
}

// cliSim is a `sandplane sim` process with native sandboxes.
type cliSim struct{ url string }

func startCLISim(t *testing.T) *cliSim {
	t.Helper()
	addr, root := testdaemon.FreeAddr(t), t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	cmd := exec.Command(testdaemon.Binary(t), "sim", "--listen", addr, "--root", root, "--admin-key", "cli-test-admin")
	stderr := &testdaemon.Buffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "export ") }, 30*time.Second, 10*time.Millisecond,
		"the simulator did not start: %s", stderr)
	return &cliSim{url: "http://" + addr + "/api"}
}

// cli runs the binary with the Daytona SDKs' settings pointing at s; the
// provider is the flag's when args give one, else $SANDBOX_PROVIDER's.
func (s *cliSim) cli(t *testing.T, args ...string) result {
	t.Helper()
	return s.cliIn(t, nil, args...)
}

// cliIn is cli with stdin as the binary's stdin (nil: /dev/null).
func (s *cliSim) cliIn(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testdaemon.Binary(t), args...)
	cmd.Env = append(cliEnv("http://127.0.0.1:1"), "DAYTONA_API_URL="+s.url, "DAYTONA_API_KEY=cli-test-key", provider.EnvProvider+"=daytona://")
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "sandplane %v: %s", args, stderr.String())
		code = ee.ExitCode()
	}
	return result{stdout.String(), stderr.String(), code}
}

func TestCommandsAgainstTheSimulator(t *testing.T) {
	s := startCLISim(t)

	r := s.cli(t, "run", "--provider", "daytona://", "--rm", "--", "sh", "-c", "echo hello from $DAYTONA_SANDBOX_ID; exit 6")
	assert.Equal(t, 6, r.code, r.stderr)
	assert.Equal(t, "hello from "+sandboxID(t, r.stderr)+"\n", r.stdout)

	r = s.cli(t, "create", "--name", "sim-box", "--label", "team=a")
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)
	r = s.cli(t, "ls", "-q")
	assert.Equal(t, id+"\n", r.stdout, "the run's sandbox is gone: %s", r.stderr)
	r = s.cli(t, "ls")
	assert.Regexp(t, `(?m)^`+id+`\s+sim-box\s+started\s`, r.stdout)

	r = s.cli(t, "exec", "sim-box", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Equal(t, "out\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)
	r = s.cliIn(t, strings.NewReader("through the toolbox proxy\n"), "exec", "sim-box", "--", "cat")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "through the toolbox proxy\n", r.stdout, "stdin passed on and ended")
	r = s.cli(t, "exec", "sim-box", "--", "sh", "-c", `printf '\377\376 bin'`)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, []byte("\xff\xfe bin"), []byte(r.stdout), "byte for byte")
	r = s.cli(t, "exec", "--json", "sim-box", "--", "no-such-program-here")
	assert.Equal(t, 127, r.code, r.stderr)
	assert.Equal(t, []outputEvent{{Type: "stderr", Data: "sandplane: no-such-program-here: command not found\n"}, {Type: "exit", ExitCode: ptr(127)}},
		outputEvents(t, r.stdout))
	r = s.cli(t, "run", "--rm", "--json", "--", "echo", "json")
	require.Equal(t, 0, r.code, r.stderr)
	events := outputEvents(t, r.stdout)
	require.Len(t, events, 3, r.stdout)
	assert.Equal(t, []outputEvent{{Type: "stdout", Data: "json\n"}, {Type: "exit", ExitCode: ptr(0)}}, events[1:])

	r = s.cli(t, "stop", "--label", "team=a")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, id+"\n", r.stdout)
	r = s.cli(t, "start", "sim-box")
	assert.Equal(t, 0, r.code, r.stderr)
	r = s.cli(t, "info")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^provider: +daytona$`, r.stdout)
	r = s.cli(t, "logs", "sim-box")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout, "the default entrypoint, sleep infinity, prints nothing")
	r = s.cli(t, "exec", "nope", "--", "true")
	assert.Equal(t, 3, r.code, r.stderr)
	r = s.cli(t, "rm", "--all")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, id+"\n", r.stdout)
	r = s.cli(t, "ls", "-q")
	assert.Empty(t, r.stdout)
}

// outputEvents parses JSON lines of run --json and exec --json.
func outputEvents(t *testing.T, stdout string) []outputEvent {
	t.Helper()
	var out []outputEvent
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var ev outputEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), "line %q", sc.Text())
		out = append(out, ev)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// status says whether the credentials work, from what the daemon answered.
func TestStatusCommand(t *testing.T) {
	locked := testdaemon.Start(t, testdaemon.Options{Token: "status-token"})
	tests := []struct {
		name      string
		env       []string
		code      int
		wantLines []string
	}{
		{"the daemon's token", []string{"SANDPLANE_TOKEN=status-token"}, 0, []string{"provider:     local", "credentials:  authenticated"}},
		{"another token", []string{"SANDPLANE_TOKEN=wrong"}, 1, []string{"credentials:  required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := (&cliDaemon{url: locked.URL, env: tt.env}).cli(t, "status")
			assert.Equal(t, tt.code, r.code, r.stderr)
			for _, l := range tt.wantLines {
				assert.Contains(t, r.stdout, l)
			}
		})
	}
	r := (&cliDaemon{url: locked.URL, env: []string{"SANDPLANE_TOKEN=status-token"}}).cli(t, "status", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st provider.Status
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, provider.AuthAuthenticated, st.Auth.State)
	assert.NotContains(t, r.stdout, "status-token", "the credential never shows")
}
