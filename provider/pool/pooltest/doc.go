// Package pooltest is an in-memory provider.Provider for tests of code
// built on provider/pool: its calls can hang, fail transiently or
// terminally, and its sandboxes can change state underneath the caller.
package pooltest
