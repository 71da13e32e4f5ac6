package testdaemon

import (
	"os"
	"path/filepath"
)

// PrivateHome points HOME at a new empty directory for the rest of the test
// process, so that the shells the tests start (an interactive bash sources
// ~/.bashrc) never run a developer's rc files: a version manager's rehash
// waiting on a stale lock must not decide whether a test sees its output.
// Go's own directories, which default to places under HOME, keep their
// places. The returned function removes the directory.
func PrivateHome() (remove func()) {
	home, err := os.UserHomeDir()
	if err != nil {
		panic(err)
	}
	keep := map[string]string{"GOPATH": filepath.Join(home, "go")}
	if cache, err := os.UserCacheDir(); err == nil {
		keep["GOCACHE"] = filepath.Join(cache, "go-build")
	}
	if config, err := os.UserConfigDir(); err == nil {
		keep["GOENV"] = filepath.Join(config, "go", "env")
	}
	for k, v := range keep {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	dir, err := os.MkdirTemp("", "sandplane-test-home-")
	if err != nil {
		panic(err)
	}
	os.Setenv("HOME", dir)
	return func() { os.RemoveAll(dir) }
}
