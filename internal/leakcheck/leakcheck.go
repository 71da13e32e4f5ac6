package leakcheck

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sandplane/sandplane/provider/clock"
)

// settle bounds the wait for what the tests' cleanups ended to be gone: a
// killed child is reaped, and a closed server's goroutines return, a
// moment after the cleanup that ended them.
const settle = 10 * time.Second

// Main runs m's tests and returns their exit code, or 1 when they passed
// but a goroutine other than those opts ignore, or a child process of this
// one, outlived them; what it found goes to stderr.
func Main(m *testing.M, opts ...goleak.Option) int {
	code := m.Run()
	if code != 0 {
		return code // a failed run leaks what its failures left: say those first
	}
	// Idle keep-alive connections of the default client are a pool, not
	// a leak.
	http.DefaultClient.CloseIdleConnections()
	if err := goroutines(settle, opts...); err != nil {
		fmt.Fprintf(os.Stderr, "leakcheck: goroutines outlived the tests: %v\n", err)
		code = 1
	}
	if kids := children(os.Getpid(), settle); len(kids) > 0 {
		fmt.Fprintf(os.Stderr, "leakcheck: child processes outlived the tests:\n  %s\n", strings.Join(kids, "\n  "))
		code = 1
	}
	return code
}

// goroutines is goleak's finding once it finds nothing or within d
// (goleak's own retries give up within a second, short for a loaded
// machine).
func goroutines(d time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(d)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// children lists the child processes of pid (zombies too: a child nobody
// waited for), once none are left or within d: each as its pid, state
// and command line.
func children(pid int, d time.Duration) []string {
	// Real processes are reaped in real time: the wall clock, through
	// provider/clock like every timer.
	c := clock.Real()
	deadline := c.Now().Add(d)
	for {
		kids := childrenOf(pid)
		if len(kids) == 0 || c.Now().After(deadline) {
			return kids
		}
		_ = clock.Sleep(context.Background(), c, 10*time.Millisecond) // a poll of the condition; the deadline only stops a hang
	}
}

func childrenOf(pid int) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil // no procfs: nothing to say
	}
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		ppid, state, ok := parentOf(e.Name())
		if !ok || ppid != pid {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, fmt.Sprintf("%s (%s) %s", e.Name(), state, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
	}
	return out
}

// parentOf reads the parent pid and state of process pid from its stat
// file, whose command field may hold spaces and parentheses.
func parentOf(pid string) (ppid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}
