// Package buildversion is the version a sandplane program reports: the
// module version the Go tool recorded (go install ...@v1.2.3, or a
// pseudo-version from the repository), else the one the Makefile stamped,
// else "dev". sandplane and sandplane-toolbox both report it, and the
// daemon runs the toolbox beside it only when the two agree
// (toolboxcmd.Workload), so they must resolve it alike.
package buildversion

import "runtime/debug"

// Of is the version of this program, given what the Makefile stamped into
// it ("" when nothing was).
func Of(stamped string) string {
	bi, _ := debug.ReadBuildInfo()
	return resolve(bi, stamped)
}

func resolve(bi *debug.BuildInfo, stamped string) string {
	if bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	if stamped != "" {
		return stamped
	}
	return "dev"
}
