// Package dockertest helps tests run real containers on a real Docker engine
// without a registry: it builds small FROM scratch images through the Engine
// API from files the test supplies (typically a statically linked Go binary
// it compiled itself), and skips tests cleanly when no engine answers.
//
// It is an ordinary package, not a _test file, so that every package's tests
// can build their images the same way.
package dockertest
