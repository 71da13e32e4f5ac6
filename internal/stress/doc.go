// Command stress runs the test packages with the most timing-dependent
// tests several times over while busy loops keep every CPU occupied, and
// prints each failure with its package and test: the way to find the next
// flake on a developer's machine before a fresh CI machine does. It is
// make stress; make test does not run it.
package main
