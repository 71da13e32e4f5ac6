//go:build linux

package main

import "github.com/sandplane/sandplane/escape"

// attempts are the entries the probe tries itself, in the order it runs
// them; the rest the test drives from the host.
var attempts = []struct {
	entry string
	try   func(*config) escape.Result
}{
	{"daemon-api", tryDaemonAPI},
	{"simulator-ports", trySimulator},
	{"neighbour-toolbox", tryNeighbourToolbox},
	{"neighbour-preview", tryNeighbourPreview},
	{"neighbour-files", tryNeighbourFiles},
	{"host-files", tryHostFiles},
	{"host-loopback", tryHostLoopback},
	{"docker-socket", tryDockerSocket},
	{"proc-environ", tryProcEnviron},
	{"parent-environ", tryParentEnviron},
	{"ptrace-neighbour", tryPtrace},
	{"mount", tryMount},
	{"block-devices", tryBlockDevices},
	{"cgroup-write", tryCgroupWrite},
	{"proc-sys-write", tryProcSysWrite},
	{"kernel-module", tryKernelModule},
	{"raw-socket", tryRawSocket},
	{"setuid", trySetuid},
	{"fork-bomb", tryForkBomb},
	{"disk-filler", tryDiskFill},
}
