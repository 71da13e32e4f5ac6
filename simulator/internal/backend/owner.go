package backend

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/local/driver/native"
)

// bootIDFile names this boot of the machine.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// bootID is this boot of the machine, or "" where /proc cannot tell.
func bootID() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// OwnerLabel names this simulator process for good, as the value of
// LabelSimOwner on what it makes on the engine.
func OwnerLabel() string { return OwnerOf(os.Getpid()) }

// OwnerOf names process pid of this boot: the boot, and the process's pid
// and start time, which a later process given the same pid does not
// share. "" where /proc cannot tell.
func OwnerOf(pid int) string {
	boot := bootID()
	if boot == "" {
		return ""
	}
	start, err := native.StartTime(pid)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s/%d/%d", boot, pid, start)
}

// ownerGone reports whether the simulator an owner label names ran during
// boot, this machine's, and has ended since. One of another machine or an
// earlier boot cannot be told from a live one elsewhere, so it is not
// gone.
func ownerGone(label, boot string) bool {
	theirs, pid, start, ok := parseOwner(label)
	if !ok || boot == "" || theirs != boot {
		return false
	}
	got, err := native.StartTime(pid)
	return errors.Is(err, fs.ErrNotExist) || err == nil && got != start
}

func parseOwner(label string) (boot string, pid int, start uint64, ok bool) {
	f := strings.Split(label, "/")
	if len(f) != 3 || f[0] == "" {
		return "", 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[2], 10, 64)
	return f[0], pid, start, err1 == nil && err2 == nil && pid > 0
}
