// Package leakcheck fails a test binary whose tests leave something
// running: a goroutine (go.uber.org/goleak) or a child process. Packages
// whose tests start servers, daemons or sandboxes call Main from their
// TestMain, so that a leak fails the run that made it rather than slow or
// break a later one.
package leakcheck
