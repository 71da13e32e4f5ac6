//go:build !unix

package baseimage

import (
	"os"

	"github.com/sandplane/sandplane/provider"
)

const noFollow = 0

func tryLock(*os.File) (bool, error) {
	return false, provider.Errorf(provider.Unsupported, "base images are built on Linux only")
}

func unlockFile(*os.File) {}
