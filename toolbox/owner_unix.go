//go:build unix

package toolbox

import (
	"io/fs"
	"strconv"
	"syscall"
)

func ownerGroup(fi fs.FileInfo) (owner, group string) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", ""
	}
	return strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
}
