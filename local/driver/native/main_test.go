package native

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandplane/sandplane/internal/leakcheck"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
)

// listenVar makes the test binary a TCP server on $PORT instead of running
// tests: a listener to start inside a workload where python3 is missing.
const listenVar = "NATIVE_TEST_LISTEN"

// TestMain lets this test binary be the workloads' init, as the daemon is.
func TestMain(m *testing.M) {
	if os.Getenv(hangInitVar) != "" && filepath.Base(os.Args[0]) == nsinit.Name {
		for {
			time.Sleep(time.Hour) // an init that never reports
		}
	}
	nsinit.Main()
	// A parked workload's modes below come with the sandbox it is handed.
	nsinit.AwaitSandbox()
	if os.Getenv(listenVar) != "" {
		listenForever()
	}
	if root := os.Getenv(parkVar); root != "" {
		parkAndWait(root)
	}
	if os.Getenv(getwdVar) != "" {
		printGetwd()
	}
	if os.Getenv(reportVar) != "" {
		reportAndWait()
	}
	code := leakcheck.Main(m)
	if builtInit.path != "" {
		os.RemoveAll(filepath.Dir(builtInit.path))
	}
	os.Exit(code)
}

// getwdVar makes the test binary print its working directory as getcwd
// gives it, or fail as Go's os.Getwd does on a directory unreachable from
// its root: what a workload such as the toolbox sees (coreutils' pwd works
// around that).
const getwdVar = "NATIVE_TEST_GETWD"

func printGetwd() {
	wd, err := os.Getwd()
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString(wd + "\n")
	os.Exit(0)
}

func listenForever() {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", os.Getenv("PORT")))
	if err != nil {
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Close()
	}
}

// hangInitVar, in a workload's environment, makes the test binary, run as
// its cold init, hang without reporting: an init stuck before it starts
// its command.
const hangInitVar = "NATIVE_TEST_HANG_INIT"

// reportVar makes the test binary print its working directory, its
// inheritable and ambient capabilities and its environment, a "cwd=" line,
// "CapInh:" and "CapAmb:" as /proc/self/status has them and an "env=" line
// per entry in order, then "done", write "stderr too" on stderr, and wait
// to be killed: what a workload sees of its sandbox.
const reportVar = "NATIVE_TEST_REPORT"

func reportAndWait() {
	wd, _ := os.Getwd()
	out := "cwd=" + wd + "\n"
	status, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "CapInh:") || strings.HasPrefix(line, "CapAmb:") {
			out += line
		}
	}
	os.Stderr.WriteString("stderr too\n")
	for _, e := range slices.Sorted(slices.Values(os.Environ())) {
		out += "env=" + e + "\n"
	}
	os.Stdout.WriteString(out + "done\n")
	for {
		time.Sleep(time.Hour) // a select{} alone would be a deadlock
	}
}
