// Package testdaemon runs the real sandplane binary for tests: it builds
// `sandplane` once per test process and starts `sandplane serve` daemons on
// loopback, each with its own root, address and window of sandbox ports, and
// stops them, and whatever they started, when the test ends.
//
// A package that uses it ends its tests through Main, which removes the
// binary:
//
//	func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }
package testdaemon
