package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	// inputChunk is how much of Exec's stdin one read takes.
	inputChunk = 32 << 10
	// inputLine bounds the bytes one line of encoded input carries.
	inputLine = 4 << 10
	// inputBatch bounds the encoded input one request sends.
	inputBatch = 256 << 10
)

// Streams are the standard streams of a command that Exec runs.
type Streams struct {
	// Stdin is read until it ends and sent to the command, which then
	// reads end of input, as it would from a pipe. Nil: the command reads
	// end of input at once. Exec may return while a Read of it is still
	// blocked, which the caller ends by closing it or by exiting.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output byte for byte; nil
	// drops it.
	Stdout, Stderr io.Writer
}

// Exec runs command (a shell command line) in a session of its own, with
// s.Stdin as its standard input, copies its output to s.Stdout and s.Stderr
// as it arrives, and returns its exit code once it has ended and all its
// output is written. When ctx ends first, Exec deletes the session, which
// kills the command, and returns ctx's error.
//
// The output is read from the command's logs, polled on the client's
// clock; what arrives between two polls is written stdout first. The logs
// are JSON, whose strings turn bytes that are not UTF-8 into U+FFFD: once
// one shows, Exec follows the rest over the logs' WebSocket instead, whose
// messages carry bytes in the order the toolbox got them, so that the
// output passes byte for byte (but for the stream markers of that framing,
// \x01\x01\x01 and \x02\x02\x02, as on Daytona). A toolbox without the
// WebSocket goes on being polled, U+FFFD and all.
//
// The toolbox API can send input to a command but cannot end it: a
// command's stdin stays open until the command ends. So Exec runs command
// behind a reader in the sandbox's sh (see withInput) that writes to it
// what Exec sends, encoded as text, and closes the command's stdin where
// s.Stdin ends.
func (c *Client) Exec(ctx context.Context, command string, s Streams) (int, error) {
	sid := "sandplane-run-" + randomHex(8)
	defer func() {
		// The command must not outlive Exec, even when ctx is what ended
		// it, nor the session a create that ctx cut short after the
		// toolbox made it.
		cctx, cancel := c.detached(ctx, cleanupTimeout)
		defer cancel()
		_ = c.DeleteSession(cctx, sid)
	}()
	if err := c.CreateSession(ctx, sid); err != nil {
		return -1, err
	}
	line := withoutInput(command)
	if s.Stdin != nil {
		line = withInput(command)
	}
	cmdID, err := c.execAsync(ctx, sid, line, true)
	if err != nil {
		return -1, err
	}
	if s.Stdin != nil {
		// Stopped before the session is deleted.
		defer c.sendStdin(ctx, sid, cmdID, s.Stdin)()
	}
	return c.copyOutput(ctx, sid, cmdID, s.Stdout, s.Stderr)
}

// execAsync is ExecAsync, with the toolbox's echo of input into stdout
// turned off when suppressEcho.
func (c *Client) execAsync(ctx context.Context, sessionID, command string, suppressEcho bool) (string, error) {
	var out wire.SessionExecuteResponse
	req := wire.SessionExecuteRequest{Command: command, RunAsync: true, SuppressInputEcho: suppressEcho}
	if err := c.do(ctx, http.MethodPost, "/process/session/"+url.PathEscape(sessionID)+"/exec", req, &out); err != nil {
		return "", err
	}
	if out.CmdID == "" {
		return "", provider.Errorf(provider.Internal, "toolbox at %s started a command but returned no cmdId", c.base)
	}
	return out.CmdID, nil
}

// copyOutput copies the command's output until it has ended (see Exec) and
// returns its exit code.
func (c *Client) copyOutput(ctx context.Context, sessionID, cmdID string, stdout, stderr io.Writer) (int, error) {
	var out, errOut tail
	exact := true // what was written is the command's bytes
	for {
		// The exit code is read before the logs, so that the logs read after
		// it has appeared hold everything the command printed.
		cmd, err := c.Command(ctx, sessionID, cmdID)
		if err != nil {
			return -1, c.ended(ctx, err)
		}
		logs, err := c.Logs(ctx, sessionID, cmdID)
		if err != nil {
			return -1, c.ended(ctx, err)
		}
		if exact && (out.replaced(logs.Stdout) || errOut.replaced(logs.Stderr)) {
			exact = false
			path := commandPath(sessionID, cmdID) + "/logs"
			conn, err := c.dialLogs(ctx, path)
			switch {
			case err == nil:
				// The WebSocket starts from the beginning: what the JSON
				// gave is skipped.
				d := &demux{stdout: stdout, stderr: stderr, skipOut: out.written, skipErr: errOut.written}
				if err := c.copyLogs(ctx, conn, path, d); err != nil {
					return -1, err
				}
				return c.exitCode(ctx, sessionID, cmdID)
			case ctx.Err() != nil:
				return -1, ctx.Err()
			}
		}
		if err := out.copy(stdout, logs.Stdout); err != nil {
			return -1, err
		}
		if err := errOut.copy(stderr, logs.Stderr); err != nil {
			return -1, err
		}
		if cmd.ExitCode != nil {
			return *cmd.ExitCode, nil
		}
		if err := clock.Sleep(ctx, c.clk, c.poll); err != nil {
			return -1, err
		}
	}
}

// exitCode waits on the clock for the ended command's exit code, which a
// toolbox may record a moment after the command's logs end.
func (c *Client) exitCode(ctx context.Context, sessionID, cmdID string) (int, error) {
	for {
		cmd, err := c.Command(ctx, sessionID, cmdID)
		if err != nil {
			return -1, c.ended(ctx, err)
		}
		if cmd.ExitCode != nil {
			return *cmd.ExitCode, nil
		}
		if err := clock.Sleep(ctx, c.clk, c.poll); err != nil {
			return -1, err
		}
	}
}

// inputReader is the sandbox's end of Exec's input, in sh with nothing but
// its builtins, as every sandbox has: it prints its pid for the command's
// side, then turns each line the toolbox writes to the command's stdin back
// into the bytes it encodes (a printf format, see encodeInput), until an
// empty line: the end of input, where it exits and so closes the pipe the
// command reads.
const inputReader = `sh -c 'echo $$; while IFS= read -r l && [ -n "$l" ]; do printf "$l"; done'`

// withInput is the line that runs command with inputReader's output as its
// stdin. The reader is stopped when command ends, in whatever way, so that
// input nobody reads any more keeps nothing waiting: SIGPIPE, which is
// what a writer whose reader went away gets anyway, and which no shell
// reports. The subshell's exit code is command's.
func withInput(command string) string {
	return inputReader + ` | (IFS= read -r p; trap 'kill -s PIPE "$p" 2>/dev/null' EXIT` + "\n" + command + "\n)"
}

// withoutInput is the line that runs command with an empty stdin.
func withoutInput(command string) string {
	return "{ " + command + "\n} </dev/null"
}

// encodeInput appends p to dst as lines of inputReader: bytes of plain
// ASCII text as they are, every other byte (and the backslash, the percent
// sign that printf would read as a conversion, and the dash that it might
// read as an option) as a three-digit octal escape, each line ending in a
// newline. No line is empty.
func encodeInput(dst, p []byte) []byte {
	for len(p) > 0 {
		n := min(len(p), inputLine)
		for _, b := range p[:n] {
			if b >= ' ' && b <= '~' && b != '\\' && b != '%' && b != '-' {
				dst = append(dst, b)
			} else {
				dst = append(dst, '\\', '0'+b>>6, '0'+(b>>3)&7, '0'+b&7)
			}
		}
		dst = append(dst, '\n')
		p = p[n:]
	}
	return dst
}

// sendStdin sends what in holds to the command's stdin, and the end of
// input where in ends (or fails), until the command stops taking input.
// The returned stop ends the sending and returns once no request is on its
// way; a Read of in may still be blocked.
func (c *Client) sendStdin(ctx context.Context, sessionID, cmdID string, in io.Reader) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, inputChunk)
			n, err := in.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() {
		var batch []byte
		for {
			var p []byte
			more := true
			select {
			case p, more = <-chunks:
			case <-ctx.Done():
				return
			}
			batch = encodeInput(batch[:0], p)
			// What is already read goes in the same request.
			for more && len(batch) < inputBatch {
				select {
				case p, more = <-chunks:
					batch = encodeInput(batch, p)
					continue
				default:
				}
				break
			}
			if !more {
				batch = append(batch, '\n') // the end of input
			}
			// An error means the command has ended or takes no input: it
			// will not read the rest either.
			if c.SendInput(ctx, sessionID, cmdID, string(batch)) != nil || !more {
				return
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
