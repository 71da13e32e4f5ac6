// Package toolbox is the in-sandbox server that every local sandbox runs by
// default (`sandplane toolbox`).
//
// It speaks Daytona's toolbox (daemon) API as the official SDKs use it:
// process execution and code-run, sessions with input, followed logs and
// the entrypoint session, PTYs over WebSocket, the file
// system (upload, download, find, search, replace, move, permissions), git
// (on the git CLI, honouring insteadOf and Options.GitURLRewrites), LSP
// (pylsp, typescript-language-server), stateful python interpreter contexts
// (an embedded driver per context), port detection and /init, plus
// sandplane's own probe at GET /api/info. What later toolbox releases
// added for the newer SDKs is answered too: listings of a given depth,
// shallow clones, pushes and pulls that name branch and remote, git init,
// remotes, config, reset and restore; and from the newest SDKs POST /env
// (the environment of every process started afterwards, kept in the
// toolbox, never in its own environment), GET /system/metrics (CPU and
// memory of the sandbox's cgroup, v2 or v1, where it bounds the sandbox,
// else of the whole machine, said in its X-Sandplane-Metrics-Scope header:
// sandbox or machine; disk of the home) and
// POST /git/credentials (git's credential store, .git-credentials 0600 in
// the working directory, the helper named to every git started afterwards
// through GIT_CONFIG_COUNT, so no git configuration file changes) and POST
// /files/upload-v2 (one file, as multipart part "file" or the raw body,
// answered {name, path, type}: what pre-signed upload URLs name). Computer use answers 503 "not
// available", as on a Daytona sandbox without a desktop. The simulator's
// toolbox proxy forwards {toolboxProxyUrl}/{sandboxId}/<path> here unchanged,
// so status codes and bodies follow Daytona v0.190.0, errors included: every
// failure is the daemon's JSON error body
//
//	{"statusCode":400,"message":"...","code":"BAD_REQUEST","source":"DAYTONA_DAEMON",
//	 "timestamp":"...","path":"/process/execute","method":"POST"}
//
// with the daemon's domain code where it has one (PROCESS_EXECUTION_TIMEOUT,
// FILE_NOT_FOUND, GIT_AUTH_FAILED, ...; git's failures are classified from
// git's own words, gitFailures), which SDK 0.218 turns into an error class
// of its own.
//
// The request and answer bodies, that error body included, are declared in
// package toolbox/wire, which imports only the standard library, so that
// toolbox/client shares them without linking this server.
//
// # Commands, sessions and the entrypoint
//
// Process execution and session commands run in bash when /etc/shells
// lists it, else sh (Options.Shell). The command text reaches the shell
// on its stdin, never as an argument, so its size is not bounded by the
// kernel's argument limit; it is quoted into one `command eval`, so the
// command reads its own stdin rather than the rest of the script. A
// missing program is "bash: foo: command not found", exit code 127.
//
// A session is one shell that runs its commands in turn, so `cd` and
// `export` carry over. A sync command reads /dev/null; an async one reads
// a FIFO of its own that POST .../command/{id}/input writes to, echoing
// the input into stdout unless suppressInputEcho; the input is answered
// 204 with no body, and input to a command that has ended (or ends before
// reading it all) 410 COMMAND_ALREADY_COMPLETED, which SDK 0.218 raises
// as DaytonaCommandAlreadyCompletedError. GET .../logs?follow=true
// is a WebSocket of binary messages, each a 3-byte stream marker (01 01 01
// stdout, 02 02 02 stderr) and that stream's bytes, closed normally once
// the command has ended. The session's shell leads a terminal session of
// its own; deleting the session, or closing the toolbox, hangs it up
// (SIGHUP, as a closed terminal would, so that exit traps run) and two
// seconds later kills every process still in it and below it, background
// jobs and `set -m` process groups included. PTY sessions end the same way. A process that calls setsid and loses its parent escapes;
// inside a sandplane sandbox the sandbox's PID-namespace init ends it at
// stop anyway.
//
// Options.Entrypoint (`sandplane toolbox --entrypoint -- CMD...`) is
// started at once as the only command of the session "entrypoint", which
// GET /process/session/entrypoint and its /logs answer; without one they
// answer 404, and no client may create a session of that name.
//
// Paths given to the file endpoints are host paths as the sandbox user sees
// them; relative ones resolve against the work directory. Options.HomeAlias
// (SANDPLANE_HOME_ALIAS) names a path, /home/daytona for the simulator's
// native sandboxes that cannot be shown their home there, which stands for
// the home directory in every path a request names. With Options.Root
// set, the file endpoints refuse anything that resolves outside that
// directory, through ".." or through symlinks, with 403. Process execution is
// never confined: it runs arbitrary shell commands as the sandbox user.
//
// # Language servers
//
// POST /lsp/start runs one server per language and project: pylsp for
// python, typescript-language-server for typescript and javascript.
// Documents not opened by the client are opened when asked about, since
// servers answer only for open documents. GET /lsp/workspacesymbols asks
// the server's workspace/symbol where it has one, after opening one of
// the project's sources if none is open (typescript-language-server
// answers "No Project" before the first), or all of them, at most 200, in
// a project without tsconfig.json or jsconfig.json (which, to the server,
// is only its open files and what they import). pylsp has no
// workspace/symbol, so for it the toolbox searches
// the document symbols of the project's .py and .pyi files itself (at
// most 2000, hidden, node_modules, __pycache__, venv and site-packages
// directories left out) for names containing the query, case-insensitive,
// imports left out as typescript-language-server leaves them out.
//
// # What protects it
//
// A toolbox runs commands, so listening on loopback is not enough: any web
// page the user opens can send requests to 127.0.0.1, and any local process
// can connect. Every request passes one guard before any route sees it:
//
//   - Host must be a loopback name (127.0.0.0/8, ::1, localhost, *.localhost,
//     by the rules of internal/netguard) or one of Options.AllowedHosts, else
//     403. A DNS-rebinding page sends its
//     own name as Host.
//   - Origin, when present, must be a page on a loopback address or on
//     localhost itself (not a preview under it), else 403; a request
//     marked Sec-Fetch-Site: cross-site without one is refused as well. A
//     cross-site page always sends one of the two.
//   - The sandbox's token (Options.Token) must come in the
//     X-Daytona-Preview-Token header or as "Authorization: Bearer <token>",
//     compared in constant time, else 401. This is what stops local
//     processes and pages on loopback origins that do not know it.
//   - The body's Content-Type must be what the route takes (application/json,
//     or multipart/form-data for uploads), else 415: the form encodings and
//     text/plain that a browser may send cross-site without a CORS preflight
//     never reach a handler.
//
// GET /version and GET /api/info answer without the token, so that readiness
// probes and `sandplane serve` can tell a toolbox from a squatter on its
// port. They reveal only the name, version and sandbox id; /api/info adds
// the pid and the work directory for callers that present the token. The
// Host and Origin checks apply to them too.
//
// The token is handed to the workload as SANDPLANE_SANDBOX_TOKEN by the
// daemon (and by the simulator's backend); `sandplane toolbox` removes it
// from its own environment, so the commands it runs do not inherit it.
//
// What the token does not protect: a sandbox's preview port serves the
// user's own workload when its snapshot is not the default one, and that
// program answers whoever connects; sandplane guards only the toolbox (a
// relay in front of the port is what would put the token check there).
// Whoever can read the sandbox directory or ask the daemon for the preview
// URL can read the token.
//
// # Output memory
//
// A command's output is never held whole. Process execution keeps the first
// Options.MaxOutputBytes of the combined output, reads and drops the rest so
// the command never blocks, and ends the result with a note
// "[sandplane: output truncated, N more bytes dropped]". Session commands do
// the same per stream (stdout, stderr, and the interleaved output), the note
// appearing once the command has ended so that a log followed by its length
// only grows. Session logs kept for later reads share one budget,
// Options.MaxSessionLogBytes: when a command's output would pass it, the
// logs of the oldest finished commands, in any session, are discarded first
// (reading them then says so), and what still does not fit is dropped with
// a note. Answers are streamed: the output is escaped into the response a
// chunk at a time, never copied whole.
//
// The server never logs request bodies, file contents, environment values
// or tokens.
package toolbox
