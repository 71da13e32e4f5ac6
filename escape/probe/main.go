//go:build linux

// Command probe is the program the escape suite runs inside a sandbox. It
// tries every escape of the suite and prints one JSON line per entry
// (escape.Result). Its claims are not trusted: each line also carries what
// the attempt could read, and the test, which knows the secrets, judges the
// entry from that too.
//
// Usage:
//
//	probe run CONFIG.json      every attempt, one JSON line each
//	probe links CONFIG.json    the symlinks the file-API tricks go through
//	probe linger NONCE         leave a detached process behind, and return
//	probe stay NONCE           (internal) the process linger leaves
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// main runs the mode its first argument names.
func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe run|links CONFIG.json | probe linger NONCE")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "run":
		cfg := readConfig(os.Args[2])
		enc := json.NewEncoder(os.Stdout)
		for _, a := range attempts {
			r := a.try(cfg)
			r.Entry, r.Attempted = a.entry, true
			r.Read = limitRead(r.Read)
			_ = enc.Encode(r)
		}
	case "links":
		makeLinks(readConfig(os.Args[2]))
	case "linger":
		linger(os.Args[2])
	case "stay":
		stay()
	default:
		fmt.Fprintln(os.Stderr, "probe: unknown mode", os.Args[1])
		os.Exit(2)
	}
}

// readConfig reads the test's config, or exits.
func readConfig(path string) *config {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	return &c
}

// linger starts a copy of itself that leaves the probe's session and
// process group, drops its environment (and with it the sandbox's marker
// variables, which the daemon's orphan sweep looks for) and ignores every
// signal it can, then returns at once.
func linger(nonce string) {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	cmd := exec.Command(self, "stay", nonce)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	fmt.Println(cmd.Process.Pid)
}

// stay ignores what it can and waits to be killed: the kernel's SIGKILL
// when its PID namespace ends, or the test's cleanup.
func stay() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	// The bound keeps a probe that escaped from living forever on the
	// machine that runs the suite.
	<-time.NewTimer(10 * time.Minute).C
}
