package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/client"
)

const (
	// interruptedCode is the shell's code for a command ended by SIGINT.
	interruptedCode = 130
	// brokenPipeCode is the shell's code for a command ended by SIGPIPE.
	brokenPipeCode = 128 + int(syscall.SIGPIPE)
	// maxKeepAlive bounds the pause between activity refreshes, whatever
	// the sandbox's auto-stop window.
	maxKeepAlive = 30 * time.Second
	minKeepAlive = 50 * time.Millisecond
	// cleanupTimeout bounds the delete of --rm after an interrupt.
	cleanupTimeout = 90 * time.Second
	// lookupTimeout bounds the look at a sandbox that explains a failure.
	lookupTimeout = 10 * time.Second
)

func newRunCmd() *cobra.Command {
	var (
		f  createFlags
		rm bool
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [--] [COMMAND [ARG...]]",
		Short: "Create a sandbox, run a command in it, stream its output, exit with its code",
		Long: `Create a sandbox labelled origin=cli, wait until it is started, run COMMAND in
it and stream its stdout and stderr, then exit with the command's exit code.
The arguments are passed as they are, one word each; for shell syntax, run
sh -c '...'. Without COMMAND it follows the snapshot's own workload (its
entrypoint logs) until the workload ends, and exits with its code.

What is piped into run, or redirected from a file, is the command's stdin,
byte for byte, and the command reads end of input where run's stdin ends;
from a terminal or /dev/null it reads end of input at once. Its output
passes byte for byte too.

While the command runs, run keeps the sandbox from auto-stopping. It prints
"Sandbox: <id>" and the dashboard's address on stderr. --rm deletes the
sandbox when the command ends, when the reader of the output goes away (exit
code 141, as for SIGPIPE), or on Ctrl-C (exit code 130; press it again to
leave the sandbox as it is). A COMMAND that does not exist in the sandbox
exits with 127 and "command not found".

--json prints one JSON object per line on stdout instead of the output:
{"type":"sandbox","sandbox":{...}} once it is started, {"type":"stdout",
"data":"..."} and {"type":"stderr","data":"..."} as the command writes, and
{"type":"exit","exitCode":N} last; JSON strings hold text, so there bytes
that are not UTF-8 become U+FFFD.

Commands run through the sandbox's toolbox API, so any provider whose
sandboxes serve one works: the local daemon's default snapshot, Daytona.`,
		Args: cobra.ArbitraryArgs,
	}
	cmd.Flags().SetInterspersed(false) // run -- ls -l: the flags after COMMAND are its own
	o := newClientOptions(cmd, true)
	f.register(cmd)
	cmd.Flags().BoolVar(&rm, "rm", false, "delete the sandbox when the command ends or on Ctrl-C")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.bind(cmd)
		o.streamJSON()
		req, err := f.request(cmd)
		if err != nil {
			return err
		}
		if req.Name == "" {
			req.Name = "run-" + randomSuffix() // shorter to read than a uuid
		}
		if len(args) == 0 {
			fmt.Fprintln(o.stderr, "sandplane: no COMMAND given: following the snapshot's own workload until it ends, which a server never does; Ctrl-C stops")
		}
		code, err := runInSandbox(cmd.Context(), o, req, args, rm)
		return exitWith(o, code, err)
	}
	return cmd
}

// exitWith ends a command that ran something in a sandbox: with err, or
// with the code of what ran, reported as the last JSON line under --json.
func exitWith(o *clientOptions, code int, err error) error {
	if err != nil {
		return err
	}
	if o.events != nil {
		if err := o.events.exit(code); err != nil {
			return err
		}
	}
	if code != 0 {
		// The command's own code, now that every cleanup has run; main
		// only knows the codes of errors.
		os.Exit(code)
	}
	return nil
}

// runInSandbox is run without the exit: it returns the command's code, or
// interruptedCode when ctx ended first, after cleaning up.
func runInSandbox(ctx context.Context, o *clientOptions, req provider.CreateRequest, args []string, rm bool) (code int, err error) {
	p, err := o.open(ctx)
	if err != nil {
		return 0, err
	}
	// Once interrupted, a second Ctrl-C must be able to cut the cleanup
	// short, so the first one stops catching the signal.
	stopReset := context.AfterFunc(ctx, func() { signal.Reset(os.Interrupt, syscall.SIGTERM) })
	defer stopReset()
	// A reader that goes away (run ... | head) must not kill run before the
	// cleanup: the write fails with EPIPE instead, and run ends after it.
	signal.Ignore(syscall.SIGPIPE)

	// The create is not abandoned on Ctrl-C: the daemon would finish it
	// anyway, and only its answer tells which sandbox --rm must delete. It
	// is not bounded either: the provider bounds its own creates, and a
	// second Ctrl-C ends the wait.
	stopProgress := progress(o.stderr, o.clk, "creating sandbox "+req.Name)
	s, err := p.Create(context.WithoutCancel(ctx), req)
	stopProgress()
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(o.stderr, "Sandbox: %s\n", s.ID)
	if d := dashboardURL(p); d != "" {
		fmt.Fprintf(o.stderr, "Dashboard: %s\n", d)
	}
	if o.events != nil {
		if err := o.events.sandbox(s); err != nil {
			return 0, err
		}
	}
	if rm {
		defer func() {
			cctx, cancel := detached(ctx, o.clk, cleanupTimeout)
			defer cancel()
			if ctx.Err() != nil {
				fmt.Fprintf(o.stderr, "Deleting sandbox %s (Ctrl-C again to leave it)\n", s.ID)
			}
			if derr := p.Delete(cctx, s.ID); derr != nil {
				fmt.Fprintf(o.stderr, "sandplane: delete sandbox %s: %s\n", s.ID, cliMessage(derr))
				if err == nil && code == 0 {
					err = derr
				}
			}
		}()
	}

	code, err = attach(ctx, p, o, s, args)
	switch {
	case ctx.Err() != nil:
		// Whatever failed after Ctrl-C failed because of it.
		return interruptedCode, nil
	case errors.Is(err, syscall.EPIPE):
		return brokenPipeCode, nil
	}
	return code, whyLost(ctx, p, o, s.ID, s.ID, err, !rm)
}

// attach runs args in the started sandbox s, or follows its workload when
// there are none, keeping s from auto-stopping meanwhile, and returns the
// exit code.
func attach(ctx context.Context, p provider.Provider, o *clientOptions, s *provider.Sandbox, args []string) (int, error) {
	defer keepAliveWhile(ctx, p, o, s)()
	stdout, stderr := o.outputs()
	if len(args) == 0 {
		last, err := followLogs(ctx, p, o.clk, s.ID, stdout, stderr, o.stderr, followInterval)
		if err != nil {
			return 0, err
		}
		return workloadCode(last), nil
	}
	tb, err := toolboxOf(ctx, p, o, s.ID, "run without a COMMAND to follow the snapshot's own workload")
	if err != nil {
		return 0, err
	}
	return tb.Exec(ctx, commandLine(args, false), client.Streams{Stdin: commandStdin(), Stdout: stdout, Stderr: stderr})
}

// keepAliveWhile keeps s from auto-stopping until the returned function is
// called, which returns once no refresh is on its way any more (so that
// --rm never races one).
func keepAliveWhile(ctx context.Context, p provider.Provider, o *clientOptions, s *provider.Sandbox) (stop func()) {
	kctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { keepAlive(kctx, p, o.clk, s, minuteOf(ctx, p)) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// toolboxOf is a client of the sandbox's toolbox. unsupported: the
// provider has none, and instead says what to do.
func toolboxOf(ctx context.Context, p provider.Provider, o *clientOptions, id, instead string) (*client.Client, error) {
	tb, ok := p.(provider.Toolboxer)
	if !ok {
		return nil, provider.Errorf(provider.Unsupported, "provider %s cannot run commands in sandboxes: %s", p.Traits().Name, instead)
	}
	base, header, err := tb.Toolbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return client.New(base, header, client.WithClock(o.clk)), nil
}

// commandLine is the shell line that runs args, or, when replace is set,
// replaces the shell with them. A program the sandbox lacks is reported as
// "command not found" with exit code 127, whatever the sandbox's shell
// would say; its stdin, when it has one, stays the program's.
func commandLine(args []string, replace bool) string {
	prog := shellJoin(args[:1])
	run, fail := shellJoin(args), "(exit 127)" // a session's shell must live on
	if replace {
		run, fail = "exec "+run, "exec sh -c 'exit 127'" // an interactive shell's exit would print "exit"
	}
	return "if command -v " + prog + " >/dev/null 2>&1; then " + run +
		"; else printf 'sandplane: %s: command not found\\n' " + prog + " >&2; " + fail + "; fi"
}

// keepAlive refreshes the sandbox's activity often enough that it never
// reaches its auto-stop window while run is attached: a command that runs
// quietly for longer than the window is still in use.
func keepAlive(ctx context.Context, p provider.Provider, clk clock.Clock, s *provider.Sandbox, minute time.Duration) {
	if s.AutoStopInterval <= 0 {
		return
	}
	every := min(max(provider.IntervalDuration(s.AutoStopInterval, minute)/4, minKeepAlive), maxKeepAlive)
	t := clk.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			// A failed refresh is retried at the next tick; if the sandbox
			// is gone, the command's own stream says so.
			_ = p.RefreshActivity(ctx, s.ID)
		}
	}
}

var exitedCode = regexp.MustCompile(`^exited: code (\d+)$`)

// workloadCode is the exit code of a snapshot's workload, read from the
// reason it stopped with: "exited: code N" is N, a kill or an error 1, and
// a stop by someone else 0.
func workloadCode(s *provider.Sandbox) int {
	if s == nil {
		return 0
	}
	if m := exitedCode.FindStringSubmatch(s.ErrorReason); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if strings.HasPrefix(s.ErrorReason, "killed: signal ") || s.State == provider.StateError {
		return 1
	}
	return 0
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellJoin turns argv into a command line for the toolbox's shell, quoting
// only the words that need it so the line stays readable.
func shellJoin(args []string) string {
	words := make([]string, len(args))
	for i, a := range args {
		if plainWord.MatchString(a) {
			words[i] = a
		} else {
			words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails: it crashes the program instead
	return hex.EncodeToString(b)
}
