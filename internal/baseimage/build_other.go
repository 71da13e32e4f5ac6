//go:build !linux

package baseimage

import (
	"context"
	"io"

	"github.com/sandplane/sandplane/provider"
)

func notLinux() error {
	return provider.Errorf(provider.PreflightFailed, "base images are built on Linux only: name another image in the snapshot")
}

func canBootstrap() error { return notLinux() }

func makeRootfs(context.Context, Spec, string, *reporter) error { return notLinux() }

func removeRootfs(string) {}

func writeTar(io.Writer, string) error { return notLinux() }
