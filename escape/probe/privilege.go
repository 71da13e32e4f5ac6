//go:build linux

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandplane/sandplane/escape"
)

// dangerous are the capabilities that turn root in a sandbox into root on
// the host: mounts and most kernel interfaces, ptrace, modules, reading
// any file by handle, raw I/O.
var dangerous = map[int]string{21: "CAP_SYS_ADMIN", 19: "CAP_SYS_PTRACE", 16: "CAP_SYS_MODULE", 2: "CAP_DAC_READ_SEARCH", 17: "CAP_SYS_RAWIO"}

// status is a field of /proc/self/status.
func status(field string) string {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// capNames are the dangerous capabilities of a capability set in hex.
func capNames(hex string) []string {
	set, _ := strconv.ParseUint(hex, 16, 64)
	var out []string
	for bit, name := range dangerous {
		if set&(1<<bit) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// setuidRoot lists setuid-root executables in the usual places.
func setuidRoot() []string {
	var out []string
	for _, dir := range []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/lib/dbus-1.0", "/usr/lib/openssh"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			fi, err := os.Stat(filepath.Join(dir, e.Name()))
			if err != nil || fi.Mode()&fs.ModeSetuid == 0 || fi.Mode()&0o111 == 0 {
				continue
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

// trySetuid works out which dangerous capabilities the probe holds or can
// reach through a setuid-root program: execve never grants more than the
// bounding set, and nothing at all with no_new_privs.
func trySetuid(*config) escape.Result {
	eff, bnd, nnp := status("CapEff"), status("CapBnd"), status("NoNewPrivs")
	held := capNames(eff)
	suid := setuidRoot()
	reach := held
	if nnp != "1" && len(suid) > 0 {
		reach = capNames(bnd)
	}
	uidMap, _ := os.ReadFile("/proc/self/uid_map")
	ev := []string{
		fmt.Sprintf("uid %d (uid_map %s), CapEff %s, CapBnd %s, NoNewPrivs %s", os.Getuid(), strings.Join(strings.Fields(string(uidMap)), " "), eff, bnd, nnp),
		fmt.Sprintf("%d setuid-root programs (%s)", len(suid), strings.Join(first(suid, 4), " ")),
		fmt.Sprintf("dangerous capabilities held %v, reachable %v", held, reach),
	}
	return result(len(reach) > 0, ev)
}

// first is at most n of s.
func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
