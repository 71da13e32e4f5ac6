package docker

// SetAfterCommit makes every replace call f right after its commit, until
// the returned function restores the default.
func SetAfterCommit(f func()) (restore func()) {
	afterCommit = f
	return func() { afterCommit = func() {} }
}
