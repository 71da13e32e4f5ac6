package toolbox

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// shellsFile lists the system's login shells.
	shellsFile = "/etc/shells"
	// fallbackShell runs commands where /etc/shells names no bash.
	fallbackShell = "/bin/sh"
)

// detectShell picks the shell that process execution and sessions run
// commands in, as Daytona's daemon does: bash when the system's list of
// login shells names one that is there, else sh. bash is what the SDKs'
// users write for (`[[ ]]`, arrays, `source`).
func detectShell(shells string) string {
	f, err := os.Open(shells)
	if err != nil {
		return fallbackShell
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !filepath.IsAbs(line) || filepath.Base(line) != "bash" {
			continue
		}
		if fi, err := os.Stat(line); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return line
		}
	}
	return fallbackShell
}

// shellCommand runs shell to read commands from its stdin, named by its
// bare name as $0 ("bash", not the path it was found at).
func shellCommand(shell string) *exec.Cmd {
	cmd := exec.Command(shell)
	cmd.Args[0] = filepath.Base(shell)
	return cmd
}

// shellPrelude is what a shell reads before any command. For bash it
// makes a missing program say "bash: foo: command not found" (exit code
// 127), as Daytona's shell does, whatever bash would add of its own: the
// line number of a session's script grows with every command it ran, and
// is nothing the caller wrote. sh has no such hook and says
// "sh: 1: foo: not found".
func shellPrelude(shell string) string {
	if filepath.Base(shell) != "bash" {
		return ""
	}
	return `command_not_found_handle() { printf 'bash: %s: command not found\n' "$1" >&2; return 127; }` + "\n"
}

// evalLine is one line of shell input that runs command with its stdin
// read from the file stdin.
//
// Commands reach the shell on its standard input, never as an argument, so
// their size is bounded by memory rather than the kernel's argument limit.
// The whole text is one quoted word: the shell reads all of it before it
// runs any of it, so a command that reads its stdin reads stdin and not the
// rest of the script. `command eval` keeps a syntax error to that command
// (a POSIX shell would otherwise exit); a missing program is exit code 127.
func evalLine(command, stdin string) string {
	return "command eval " + shellQuote(command) + " <" + shellQuote(stdin) + "\n"
}

// shellQuote single-quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellJoin quotes argv into one shell command line that runs exactly that
// program with exactly those arguments, for callers that hold an argv
// where the toolbox takes a command line (Options.Entrypoint).
func ShellJoin(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}
