package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/client"
)

type execFlags struct {
	interactive, tty bool
}

func newExecCmd() *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] ID|NAME [--] COMMAND [ARG...]",
		Short: "Run a command in a started sandbox, stream its output, exit with its code",
		Long: `Run COMMAND in the sandbox ID|NAME, stream its stdout and stderr, and exit
with its exit code, keeping the sandbox from auto-stopping meanwhile. The
arguments are passed as they are, one word each; for shell syntax, run
sh -c '...'. A COMMAND that does not exist exits with 127 and "command not
found"; Ctrl-C ends the command and exits with 130. exec's own flags go
before ID|NAME: what follows it is the command's.

What is piped into exec, or redirected from a file, is the command's stdin,
byte for byte, and the command reads end of input where exec's stdin ends,
as it would locally (echo hi | sandplane exec ID -- cat); exec ends when the
command does, whatever it left unread. From a terminal or /dev/null the
command reads end of input at once: -it is for typing. Its output passes
byte for byte too.

-it runs it on a terminal of the sandbox with this one's input, as a shell
would (a REPL, an editor); the command's output then comes as the terminal
shows it, stdout and stderr together. It needs a terminal on stdin.

--json prints {"type":"stdout","data":"..."}, {"type":"stderr","data":"..."}
and a last {"type":"exit","exitCode":N} as JSON lines instead of the output;
JSON strings hold text, so there bytes that are not UTF-8 become U+FFFD.

What the command starts ends with it, background jobs included (nohup
does not save them): exec leaves nothing running behind it. To leave a
server running in the sandbox, detach it from the command's session:
  sandplane exec ID -- sh -c 'setsid my-server >server.log 2>&1 &'
It then runs until the sandbox stops.

Commands run through the sandbox's toolbox API (its session API, or its
terminal API for -it), so it works on any provider whose sandboxes serve one:
the local daemon's default snapshot, Daytona.`,
		Args: cobra.MinimumNArgs(2),
	}
	// exec ID ls -l: the flags after ID are the command's.
	cmd.Flags().SetInterspersed(false)
	o := newClientOptions(cmd, true)
	cmd.Flags().BoolVarP(&f.interactive, "interactive", "i", false, "send this terminal's input (with -t)")
	cmd.Flags().BoolVarP(&f.tty, "tty", "t", false, "run on a terminal of the sandbox (with -i)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.bind(cmd)
		id, command, err := execArgs(cmd, args)
		if err != nil {
			return err
		}
		if err := f.check(o); err != nil {
			return err
		}
		o.streamJSON()
		code, err := execInSandbox(cmd.Context(), o, id, command, f.tty)
		return exitWith(o, code, err)
	}
	return cmd
}

// execArgs splits exec's arguments into the sandbox and the command; a "--"
// between them is dropped. exec's own flags after the sandbox are refused
// (see misplacedFlags).
func execArgs(cmd *cobra.Command, args []string) (id string, command []string, err error) {
	id, command = args[0], args[1:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	} else if err := misplacedFlags(cmd, id, command); err != nil {
		return "", nil, err
	}
	if len(command) == 0 {
		return "", nil, provider.Errorf(provider.InvalidArgument, "no COMMAND to run in %s (see sandplane exec --help)", id)
	}
	return id, command, nil
}

// misplacedFlags refuses, as a usage error that shows the command line
// meant, exec's own flags after the sandbox: flags stop at the sandbox (the
// command's own come after it), so "exec ID --json -- CMD" would run --json.
// It answers when what follows the sandbox starts with a flag of exec's and
// a "--" comes later, or is --help; a command that merely starts with a dash
// still runs.
func misplacedFlags(cmd *cobra.Command, id string, rest []string) error {
	if len(rest) == 0 {
		return nil
	}
	if _, ok := flagOf(cmd, rest[0]); !ok {
		return nil
	}
	if rest[0] == "--help" || rest[0] == "-h" {
		return provider.Errorf(provider.InvalidArgument, "flags go before the sandbox, and what follows it is the command to run: for help, run sandplane exec --help")
	}
	end := slices.Index(rest, "--")
	if end < 0 {
		return nil
	}
	if !allFlagsOf(cmd, rest[:end]) {
		return provider.Errorf(provider.InvalidArgument, "flags go before the sandbox, and what follows it is the command to run: sandplane exec [flags] ID|NAME -- COMMAND [ARG...]")
	}
	fixed := append([]string{"sandplane", "exec"}, rest[:end]...)
	fixed = append(append(fixed, id), rest[end:]...)
	return provider.Errorf(provider.InvalidArgument, "flags go before the sandbox, and what follows it is the command to run: %s", shellJoin(fixed))
}

// flagOf reports whether arg is made of cmd's flags only (--name,
// --name=value, shorthands such as -it, and --help, which cobra adds as it
// runs), and whether the last of them takes its value from the next word.
func flagOf(cmd *cobra.Command, arg string) (needsValue, ok bool) {
	if name, long := strings.CutPrefix(arg, "--"); long {
		name, _, inline := strings.Cut(name, "=")
		if name == "help" {
			return false, true
		}
		f := cmd.Flags().Lookup(name)
		return f != nil && f.NoOptDefVal == "" && !inline, f != nil
	}
	short, ok := strings.CutPrefix(arg, "-")
	if !ok || short == "" {
		return false, false
	}
	for _, r := range short {
		if r == 'h' {
			needsValue = false
			continue
		}
		f := cmd.Flags().ShorthandLookup(string(r))
		if f == nil {
			return false, false
		}
		needsValue = f.NoOptDefVal == ""
	}
	return needsValue, true
}

// allFlagsOf reports whether args are cmd's flags and their values.
func allFlagsOf(cmd *cobra.Command, args []string) bool {
	for i := 0; i < len(args); i++ {
		needsValue, ok := flagOf(cmd, args[i])
		if !ok {
			return false
		}
		if needsValue {
			i++ // the value
			if i == len(args) {
				return false
			}
		}
	}
	return true
}

// check refuses the flag combinations exec cannot honour, as usage errors.
func (f execFlags) check(o *clientOptions) error {
	switch {
	case f.interactive != f.tty:
		return provider.Errorf(provider.InvalidArgument, "-i and -t go together (-it): exec without them streams the output, exec -it runs on a terminal")
	case f.tty && o.json:
		return provider.Errorf(provider.InvalidArgument, "-it and --json do not go together: a terminal is for a person, --json for a script")
	case f.tty && !isTerminal(os.Stdin):
		return provider.Errorf(provider.InvalidArgument, "exec -it needs a terminal on stdin, and stdin is a pipe or a file: run it from a terminal, or drop -it to stream the output")
	}
	return nil
}

// execInSandbox runs command in the started sandbox idOrName and returns its
// exit code, or interruptedCode when ctx ended first.
func execInSandbox(ctx context.Context, o *clientOptions, idOrName string, command []string, tty bool) (int, error) {
	p, err := o.open(ctx)
	if err != nil {
		return 0, err
	}
	signal.Ignore(syscall.SIGPIPE) // a reader that goes away is EPIPE, below
	s, err := p.Get(ctx, idOrName)
	if err != nil {
		return 0, err
	}
	if s.State != provider.StateStarted {
		return 0, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s: start it first (sandplane start %s)", s.ID, s.State, idOrName)
	}
	defer keepAliveWhile(ctx, p, o, s)()
	tb, err := toolboxOf(ctx, p, o, s.ID, "follow its workload with sandplane logs -f instead")
	if err != nil {
		return 0, err
	}
	var code int
	if tty {
		code, err = onTerminal(ctx, tb, commandLine(command, true))
	} else {
		stdout, stderr := o.outputs()
		code, err = tb.Exec(ctx, commandLine(command, false), client.Streams{Stdin: commandStdin(), Stdout: stdout, Stderr: stderr})
	}
	switch {
	case ctx.Err() != nil:
		return interruptedCode, nil
	case errors.Is(err, syscall.EPIPE):
		return brokenPipeCode, nil
	}
	return code, whyLost(ctx, p, o, idOrName, s.ID, err, true)
}

// whyLost explains err, a command that failed in the sandbox id (known to
// the user as name), by what became of the sandbox meanwhile: one deleted
// or stopped takes its toolbox with it, whose last answer (a stranger's
// 401 from the preview proxy, a 503) says nothing the user can act on. err
// stands while the sandbox still runs. restartable says whether the user
// may start the sandbox again (not one run --rm is about to delete).
func whyLost(ctx context.Context, p provider.Provider, o *clientOptions, name, id string, err error, restartable bool) error {
	if err == nil {
		return nil
	}
	cctx, cancel := detached(ctx, o.clk, lookupTimeout)
	defer cancel()
	now, gerr := settled(cctx, p, o.clk, id)
	switch {
	case provider.Code(gerr) == provider.NotFound:
		return provider.Errorf(provider.NotFound, "sandbox %s was deleted while the command ran, and the command with it", name)
	case gerr == nil && now.State != provider.StateStarted:
		why := ""
		if now.ErrorReason != "" && now.ErrorReason != string(now.State) {
			why = " (" + now.ErrorReason + ")"
		}
		msg := fmt.Sprintf("sandbox %s is %s%s: it stopped while the command ran, and the command with it", name, now.State, why)
		if restartable {
			msg += "; start it again with sandplane start " + name
		}
		return provider.Errorf(provider.FailedPrecondition, "%s", msg)
	}
	return err
}

// settled is the sandbox id once it is no longer stopping: a delete stops
// the sandbox first, so the command it takes with it can end while the
// sandbox is still stopping on its way to being deleted, and that state
// says neither which. It asks again, more slowly each time, until ctx ends,
// then answers with what it last saw.
func settled(ctx context.Context, p provider.Provider, clk clock.Clock, id string) (*provider.Sandbox, error) {
	wait := 10 * time.Millisecond
	for {
		s, err := p.Get(ctx, id)
		if err != nil || s.State != provider.StateStopping {
			return s, err
		}
		if clock.Sleep(ctx, clk, wait) != nil {
			return s, nil
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// onTerminal runs command on a terminal of the sandbox with this process's
// terminal in raw mode, so that every key (Ctrl-C included) goes to the
// command, and passes size changes on.
func onTerminal(ctx context.Context, tb *client.Client, command string) (int, error) {
	in := int(os.Stdin.Fd())
	state, err := term.MakeRaw(in)
	if err != nil {
		return 0, provider.Errorf(provider.InvalidArgument, "exec -it: cannot put the terminal in raw mode: %v", err)
	}
	defer func() { _ = term.Restore(in, state) }()
	cols, rows, _ := term.GetSize(in)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer func() {
		signal.Stop(winch)
		close(winch) // nothing sends any more: the goroutine below ends
	}()
	sizes := make(chan [2]int, 1)
	go func() {
		for range winch {
			if c, r, err := term.GetSize(in); err == nil {
				select {
				case sizes <- [2]int{c, r}:
				default: // the next change will say it
				}
			}
		}
	}()
	return tb.RunTerminal(ctx, command, client.Terminal{
		Cols: cols, Rows: rows, Env: map[string]string{"TERM": termName()},
		Stdin: os.Stdin, Stdout: os.Stdout, Resize: sizes,
	})
}

// termName is the TERM the remote terminal gets: this one's.
func termName() string {
	if t := os.Getenv("TERM"); t != "" {
		return t
	}
	return "xterm-256color"
}

// commandStdin is the stdin of a command that run or exec runs: this
// process's when it is a pipe or a file, else none, so that the command
// reads end of input at once. A terminal is for -it: read here, it would
// also stop a run or exec started in the background (SIGTTIN). /dev/null
// needs no reader in the sandbox.
func commandStdin() io.Reader {
	fi, err := os.Stdin.Stat()
	if err != nil || isTerminal(os.Stdin) {
		return nil
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return nil
	}
	return os.Stdin
}
