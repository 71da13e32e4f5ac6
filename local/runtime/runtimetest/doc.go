// Package runtimetest provides Fake, an in-memory runtime.Runtime for tests of
// the layers above the runtimes. Its workloads are records, not processes, and
// outlive any manager that uses it, like detached children outlive a daemon.
package runtimetest
