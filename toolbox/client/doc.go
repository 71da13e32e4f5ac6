// Package client is a Go client of the toolbox session API that every
// sandbox with a Daytona-compatible toolbox serves: the local default
// snapshot's `sandplane toolbox`, and Daytona's own daemon behind
// {toolboxProxyUrl}/{sandboxId}.
//
// Run is what `sandplane run` needs: it starts a command asynchronously in a
// fresh session, streams its stdout and stderr by polling the command's logs
// on an injected clock, and returns the command's exit code. Ending the
// context deletes the session, which kills the command.
//
// Follow streams a command's output over the logs' WebSocket instead, as
// the SDKs' log callbacks do, and SendInput writes to an async command's
// stdin; Entrypoint and FollowEntrypoint read the sandbox's entrypoint
// session.
package client
