// Package client is a Go client of the toolbox session API that every
// sandbox with a Daytona-compatible toolbox serves: the local default
// snapshot's `sandplane toolbox`, and Daytona's own daemon behind
// {toolboxProxyUrl}/{sandboxId}.
//
// Exec is what `sandplane run` and `exec` need: it starts a command
// asynchronously in a fresh session, sends it the caller's stdin and ends
// that input where the caller's ends, streams its stdout and stderr by
// polling the command's logs on an injected clock (following them over the
// logs' WebSocket from the first byte that JSON cannot carry), and returns
// the command's exit code. The stdin travels as base64 frames that the
// sandbox's head and base64 decode at the speed of a pipe (a sandbox
// without them gets sh's builtins, at about a megabyte a second;
// BenchmarkExecStdin measures it against cat). Run is Exec with an empty
// stdin. Ending the
// context deletes the session, which kills the command.
//
// Follow streams a command's output over the logs' WebSocket, as
// the SDKs' log callbacks do, and SendInput writes to an async command's
// stdin; Entrypoint and FollowEntrypoint read the sandbox's entrypoint
// session.
package client
