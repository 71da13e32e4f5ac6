package provider

import (
	"context"
	"net/http"
)

// Toolboxer is implemented by providers whose sandboxes run a
// Daytona-compatible toolbox API (process execution, sessions, files), the
// way to run a command in a sandbox whatever backs it.
type Toolboxer interface {
	// Toolbox returns the base URL of the sandbox's toolbox API and the
	// headers every request to it must carry: paths such as
	// /process/session are appended to baseURL. not_found.
	// failed_precondition: the sandbox is not started. unsupported: its
	// snapshot runs no toolbox.
	Toolbox(ctx context.Context, idOrName string) (baseURL string, header http.Header, err error)
}
