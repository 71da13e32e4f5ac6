// Package procfs parses what sandplane reads of Linux's /proc: a process's
// stat line and NSpid, a socket's fd link, and the TCP tables' listening
// sockets. The native driver and the toolbox both read these, and both
// kill or adopt processes on the answer, so the parsers live once, here,
// and are fuzzed.
//
// The parsers are pure and build everywhere; the readers (ReadStat and
// friends) open files under Root and mean something on Linux only.
package procfs
