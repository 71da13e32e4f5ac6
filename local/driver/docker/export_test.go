package docker

import (
	"context"
	"log/slog"
)

// SetAfterCommit makes every replace call f right after its commit, until
// the returned function restores the default.
func SetAfterCommit(f func()) (restore func()) {
	afterCommit = f
	return func() { afterCommit = func() {} }
}

// EnsureToolboxImageFrom is EnsureToolboxImage with the binary at self.
func EnsureToolboxImageFrom(ctx context.Context, d *Driver, tag, self, server string, log *slog.Logger) error {
	return d.ensureToolboxImageFrom(ctx, tag, self, server, log)
}

// FileDigest is the digest the toolbox image's label records.
var FileDigest = fileDigest

const (
	LabelToolboxBinary = labelToolboxBinary
	ToolboxHome        = toolboxHome
)
