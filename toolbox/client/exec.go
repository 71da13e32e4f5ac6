package client

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strconv"
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
	// inputBatch bounds the input one request sends, before its encoding
	// (at most four times as long, well under the toolbox's 16 MiB JSON
	// body).
	inputBatch = 1 << 20
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
// behind a reader in the sandbox's sh (see inputCodec) that writes to it
// what Exec sends, encoded as text, and closes the command's stdin where
// s.Stdin ends.
func (c *Client) Exec(ctx context.Context, command string, s Streams) (int, error) {
	return c.exec(ctx, command, s, nil)
}

// exec is Exec with the input's codec; nil: the fastest the sandbox has.
func (c *Client) exec(ctx context.Context, command string, s Streams, codec *inputCodec) (int, error) {
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
		if codec == nil {
			codec = c.inputCodecOf(ctx, sid)
		}
		line = codec.withInput(command)
	}
	cmdID, err := c.execAsync(ctx, sid, line, true)
	if err != nil {
		return -1, err
	}
	if s.Stdin != nil {
		// Stopped before the session is deleted.
		defer c.sendStdin(ctx, sid, cmdID, s.Stdin, codec)()
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

// inputCodec is how Exec's input travels: the toolbox API sends input as
// text and cannot end it, so a reader in the sandbox's sh turns what Exec
// sends back into the bytes it encodes and ends the command's stdin at an
// end mark.
type inputCodec struct {
	// reader is the sandbox's end: it prints its pid for the command's
	// side, then writes the decoded input to its stdout until the end
	// mark, where it exits and so closes the pipe the command reads.
	reader string
	// encode appends p to dst, encoded as reader reads it.
	encode func(dst, p []byte) []byte
	// end is the end of input.
	end string
}

var (
	// base64Input sends frames: a line with the length of the base64 that
	// follows it, which head reads exactly and base64 decodes, at the
	// speed of a pipe; a frame of length 0 ends the input. It needs head
	// and base64 (coreutils or busybox), which nearly every image has.
	base64Input = inputCodec{
		reader: `sh -c 'echo $$; while IFS= read -r n && [ "$n" -gt 0 ]; do head -c "$n" | base64 -d || exit; done'`,
		encode: encodeBase64Frame,
		end:    "0\n",
	}
	// textInput needs nothing but sh's builtins, as every sandbox has, and
	// moves about a megabyte a second at best: sh reads a pipe a byte at a
	// time. Each line is a printf format (see encodeInput); an empty line
	// ends the input.
	textInput = inputCodec{
		reader: `sh -c 'echo $$; while IFS= read -r l && [ -n "$l" ]; do printf "$l"; done'`,
		encode: encodeInput,
		end:    "\n",
	}
)

// hasBase64Tools is true (exit code 0) in a sandbox with what base64Input
// needs.
const hasBase64Tools = "command -v head >/dev/null 2>&1 && command -v base64 >/dev/null 2>&1"

// inputCodecOf is the fastest codec the session's sandbox can read: a
// failed probe costs only speed.
func (c *Client) inputCodecOf(ctx context.Context, sessionID string) *inputCodec {
	var out wire.SessionExecuteResponse
	req := wire.SessionExecuteRequest{Command: hasBase64Tools}
	err := c.do(ctx, http.MethodPost, "/process/session/"+url.PathEscape(sessionID)+"/exec", req, &out)
	if err == nil && out.ExitCode != nil && *out.ExitCode == 0 {
		return &base64Input
	}
	return &textInput
}

// withInput is the line that runs command with the reader's output as its
// stdin. The reader is stopped when command ends, in whatever way, so that
// input nobody reads any more keeps nothing waiting: SIGPIPE, which is
// what a writer whose reader went away gets anyway, and which no shell
// reports. The subshell's exit code is command's.
func (ic *inputCodec) withInput(command string) string {
	return ic.reader + ` | (IFS= read -r p; trap 'kill -s PIPE "$p" 2>/dev/null' EXIT` + "\n" + command + "\n)"
}

// encodeBase64Frame appends p to dst as one frame of base64Input.
func encodeBase64Frame(dst, p []byte) []byte {
	if len(p) == 0 {
		return dst
	}
	n := base64.StdEncoding.EncodedLen(len(p))
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, '\n')
	return base64.StdEncoding.AppendEncode(dst, p)
}

// withoutInput is the line that runs command with an empty stdin.
func withoutInput(command string) string {
	return "{ " + command + "\n} </dev/null"
}

// encodeInput appends p to dst as lines of textInput's reader: bytes of plain
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
func (c *Client) sendStdin(ctx context.Context, sessionID, cmdID string, in io.Reader, codec *inputCodec) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	// Buffered, so that the reading runs a batch ahead of the sending.
	chunks := make(chan []byte, inputBatch/inputChunk)
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
		var raw, batch []byte
		for {
			var p []byte
			more := true
			select {
			case p, more = <-chunks:
			case <-ctx.Done():
				return
			}
			raw = append(raw[:0], p...)
			// What is already read goes in the same request, as one
			// frame: each frame costs the sandbox's reader a process.
			for more && len(raw) < inputBatch {
				select {
				case p, more = <-chunks:
					raw = append(raw, p...)
					continue
				default:
				}
				break
			}
			batch = codec.encode(batch[:0], raw)
			if !more {
				batch = append(batch, codec.end...)
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
