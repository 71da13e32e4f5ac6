package sshgw

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/toolbox/client"
)

// failedStatus is the exit status of a command the gateway could not run,
// OpenSSH's own for its errors.
const failedStatus = 255

// loginShell is what a shell request runs: the sandbox user's shell.
const loginShell = `exec "${SHELL:-/bin/sh}" -l`

// session is the state of one session channel: what its requests set up
// before the shell or exec request runs something.
type session struct {
	ch     ssh.Channel
	env    map[string]string
	pty    *ptyRequest
	resize chan [2]int
	ran    bool
}

// ptyRequest is RFC 4254's pty-req payload.
type ptyRequest struct {
	Term                      string
	Cols, Rows                uint32
	WidthPixels, HeightPixels uint32
	Modes                     string
}

// windowChange is RFC 4254's window-change payload.
type windowChange struct {
	Cols, Rows, WidthPixels, HeightPixels uint32
}

// envRequest is RFC 4254's env payload.
type envRequest struct{ Name, Value string }

// execRequest is RFC 4254's exec payload.
type execRequest struct{ Command string }

// session serves a session channel: env, pty-req and window-change set it
// up, and its one shell or exec request runs in the sandbox; the channel
// closes with the command's exit status.
func (s *Server) session(ctx context.Context, sb Sandbox, nch ssh.NewChannel) {
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	// The command ends with the channel, even if the connection stays.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ss := &session{ch: ch, env: map[string]string{}, resize: make(chan [2]int, 1)}
	done := make(chan struct{})
	for req := range reqs {
		ok := ss.setUp(req)
		if command, run := ss.command(req); run && !ss.ran {
			ss.ran, ok = true, true
			go func() {
				defer close(done)
				ss.exit(ss.run(ctx, sb, command))
			}()
		}
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
	cancel()
	if ss.ran {
		<-done
	}
}

// setUp applies a request that prepares the session, and says whether it
// was one.
func (ss *session) setUp(req *ssh.Request) bool {
	switch req.Type {
	case "env":
		var e envRequest
		if ssh.Unmarshal(req.Payload, &e) != nil || !envName.MatchString(e.Name) {
			return false
		}
		ss.env[e.Name] = e.Value
		return true
	case "pty-req":
		var p ptyRequest
		if ss.ran || ssh.Unmarshal(req.Payload, &p) != nil {
			return false
		}
		ss.pty = &p
		return true
	case "window-change":
		var w windowChange
		if ssh.Unmarshal(req.Payload, &w) != nil {
			return false
		}
		select {
		case <-ss.resize: // only the newest size matters
		default:
		}
		ss.resize <- [2]int{int(w.Cols), int(w.Rows)}
		return true
	}
	return false
}

// command is what a shell or exec request runs.
func (ss *session) command(req *ssh.Request) (string, bool) {
	switch req.Type {
	case "shell":
		return loginShell, true
	case "exec":
		var e execRequest
		if ssh.Unmarshal(req.Payload, &e) != nil {
			return "", false
		}
		return e.Command, true
	}
	return "", false
}

// run runs command in the sandbox: on its PTY when the client asked for a
// terminal, else through a toolbox session with the channel as its
// standard streams.
func (ss *session) run(ctx context.Context, sb Sandbox, command string) (int, error) {
	if ss.pty != nil {
		env := map[string]string{"TERM": ss.pty.Term}
		for k, v := range ss.env {
			env[k] = v
		}
		return sb.Toolbox.RunTerminal(ctx, "exec sh -c "+quote(command), client.Terminal{
			Cols: int(ss.pty.Cols), Rows: int(ss.pty.Rows), Env: env,
			Stdin: ss.ch, Stdout: ss.ch, Resize: ss.resize,
		})
	}
	return sb.Toolbox.Exec(ctx, withEnv(ss.env, command), client.Streams{Stdin: ss.ch, Stdout: ss.ch, Stderr: ss.ch.Stderr()})
}

// exit ends the channel as sshd does: the exit status, then EOF and close.
// A command that could not run says why on stderr.
func (ss *session) exit(code int, err error) {
	if err != nil {
		fmt.Fprintf(ss.ch.Stderr(), "sandplane sim: %s\r\n", provider.Message(err))
		code = failedStatus
	}
	_, _ = ss.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
	_ = ss.ch.CloseWrite()
	_ = ss.ch.Close()
}

// envName is a variable name a shell can export.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// withEnv prefixes command with exports of env, in a stable order.
func withEnv(env map[string]string, command string) string {
	if len(env) == 0 {
		return command
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString("export " + k + "=" + quote(env[k]) + "; ")
	}
	return b.String() + command
}

// quote is s as one sh word.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
