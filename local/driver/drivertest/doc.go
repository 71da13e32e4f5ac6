// Package drivertest provides Fake, an in-memory driver.Driver for tests of
// the layers above the runtimes. Its workloads are records, not processes, and
// outlive any manager that uses it, like detached children outlive a daemon.
package drivertest
