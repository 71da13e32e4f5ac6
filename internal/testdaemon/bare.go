package testdaemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandplane/sandplane/provider/clock"
)

// bareEnv names, in this test binary re-executed by ServeBare, the file
// whose bytes it serves.
const bareEnv = "SANDPLANE_TESTDAEMON_BARE_BODY"

// ServeBare serves body as application/json at every path from a process
// of its own, this test binary re-executed, and returns its URL. It is the
// floor of a daemon's reads: a bare net/http handler that pays what any
// server in another process than its client pays (the wakeups and switches
// between two processes), which a handler in the test's own process does
// not. The process ends with t, or with this one.
func ServeBare(t testing.TB, body []byte) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Were Main not this binary's TestMain, it would run no test and exit
	// without an address.
	cmd := exec.Command(exe, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), bareEnv+"="+file)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe() // its EOF tells the server to exit
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		timer := clock.Real().NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-exited:
		case <-timer.C():
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the bare server gave no address (%v): end the tests through testdaemon.Main", err)
	}
	return "http://" + strings.TrimSpace(addr)
}

// serveBare is the re-executed side of ServeBare: it serves file's bytes on
// a free loopback port, prints the address and exits once stdin ends.
func serveBare(file string) int {
	body, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare server:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare server:", err)
		return 1
	}
	fmt.Println(ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	if err != nil && !errors.Is(err, net.ErrClosed) {
		fmt.Fprintln(os.Stderr, "bare server:", err)
		return 1
	}
	return 0
}
