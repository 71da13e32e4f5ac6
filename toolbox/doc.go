// Package toolbox is the in-sandbox server that every local sandbox runs by
// default (`sandplane toolbox`).
//
// It speaks the part of Daytona's toolbox (daemon) API that the official SDKs
// use: process execution, sessions, file upload and download, listing and
// metadata, plus sandplane's own probe at GET /api/info. The simulator's
// toolbox proxy forwards {toolboxProxyUrl}/{sandboxId}/<path> here unchanged,
// so status codes and bodies follow Daytona v0.190.0, errors included: every
// failure is the daemon's JSON error body
//
//	{"statusCode":400,"message":"...","code":"BAD_REQUEST",
//	 "timestamp":"...","path":"/process/execute","method":"POST"}
//
// Paths given to the file endpoints are host paths as the sandbox user sees
// them; relative ones resolve against the work directory. With Options.Root
// set, the file endpoints refuse anything that resolves outside that
// directory, through ".." or through symlinks, with 403. Process execution is
// never confined: it runs arbitrary shell commands as the sandbox user.
//
// The server never logs request bodies, file contents or environment values.
package toolbox
