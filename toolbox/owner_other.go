//go:build !unix

package toolbox

import "io/fs"

func ownerGroup(fs.FileInfo) (owner, group string) { return "", "" }
