//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/escape"
)

// readAll reads paths and walks dirs, and says which it could read.
func readAll(paths, dirs []string) escape.Result {
	var ev, read []string
	out := escape.Blocked
	for _, p := range paths {
		b, err := readSmall(p)
		if err != nil {
			ev = append(ev, fmt.Sprintf("%s: %s", p, shortErr(err)))
			continue
		}
		out = escape.Escaped
		ev = append(ev, fmt.Sprintf("%s: read %d bytes", p, len(b)))
		read = append(read, words(b)...)
	}
	for _, d := range dirs {
		w, n := walkRead(d)
		ev = append(ev, fmt.Sprintf("%s: read %d files", d, n))
		if n > 0 {
			out = escape.Escaped
		}
		read = append(read, w...)
	}
	return escape.Result{Outcome: out, Evidence: strings.Join(ev, "; "), Read: read}
}

// tryNeighbourFiles reads the neighbour's files by the paths an attacker
// would guess, and walks its directory.
func tryNeighbourFiles(c *config) escape.Result { return readAll(c.Paths, c.Walk) }

// tryHostFiles reads the host user's canary.
func tryHostFiles(c *config) escape.Result { return readAll([]string{c.HostFile}, nil) }

// marker is the variable every process of a sandbox carries.
const marker = "SANDPLANE_SANDBOX_ID="

// sandboxOf is the sandbox id an environment names, or "".
func sandboxOf(env []byte) string {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if id, ok := bytes.CutPrefix(kv, []byte(marker)); ok {
			return string(id)
		}
	}
	return ""
}

// tryProcEnviron reads /proc/1/environ and every environment and command
// line /proc shows; reading a neighbour's is an escape on its face, and
// the test looks for its host canaries in the rest.
func tryProcEnviron(c *config) escape.Result {
	var ev, read []string
	out := escape.Blocked
	if b, err := readSmall("/proc/1/environ"); err != nil {
		ev = append(ev, "/proc/1/environ: "+shortErr(err))
	} else {
		ev = append(ev, fmt.Sprintf("/proc/1/environ: read %d bytes", len(b)))
		read = append(read, words(b)...)
	}
	envs := procFiles("environ")
	foreign := 0
	for _, env := range envs {
		read = append(read, words(env)...)
		if id := sandboxOf(env); id != "" && id != os.Getenv("SANDPLANE_SANDBOX_ID") {
			foreign++
		}
	}
	if foreign > 0 {
		out = escape.Escaped
	}
	for _, cmd := range procFiles("cmdline") {
		read = append(read, words(cmd)...)
	}
	ev = append(ev, fmt.Sprintf("read the environment of %d processes, %d of another sandbox", len(envs), foreign))
	return escape.Result{Outcome: out, Evidence: strings.Join(ev, "; "), Read: read}
}

// ppid is pid's parent as /proc shows it, or 0.
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// tryParentEnviron reads the environment of every ancestor of the probe,
// and of any `sandplane serve` it can see.
func tryParentEnviron(c *config) escape.Result {
	var ev, read []string
	pids := map[int]bool{}
	for p := ppid(os.Getpid()); p > 0; p = ppid(p) {
		pids[p] = true
	}
	for pid, cmd := range procFiles("cmdline") {
		if bytes.Contains(cmd, []byte("sandplane")) && bytes.Contains(cmd, []byte("serve")) {
			pids[pid] = true
		}
	}
	for pid := range pids {
		b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			ev = append(ev, fmt.Sprintf("%d: %s", pid, shortErr(err)))
			continue
		}
		ev = append(ev, fmt.Sprintf("%d: read %d bytes", pid, len(b)))
		read = append(read, words(b)...)
	}
	// Reading an ancestor inside the sandbox is no escape: what the test
	// finds of the host's in read is.
	return escape.Result{Outcome: escape.Blocked, Evidence: strings.Join(ev, "; "), Read: read}
}

// makeLinks makes the symlinks the file-API tricks go through.
func makeLinks(c *config) {
	for name, to := range c.Links {
		p := c.WorkDir + "/" + name
		_ = os.Remove(p)
		if err := os.Symlink(to, p); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
	}
}
