// Package sshgw is the simulator's SSH gateway: a real SSH server, on the
// port the sshCommand of an SSH access names, that takes the access token
// as the user name and opens a shell, an exec or a port forward in that
// token's sandbox, as Daytona's gateway does.
//
// It holds no sandbox itself. An Opener resolves a token to a Sandbox (its
// toolbox client and a way to dial its ports); a shell or an exec with a
// terminal runs on the toolbox's PTY, an exec without one through the
// toolbox's sessions, with stdout, stderr and the exit status kept apart;
// direct-tcpip channels (ssh -L) reach the sandbox's own ports only.
//
// A token is checked once, when the connection authenticates: revoking or
// expiring it refuses new connections and leaves open ones be, which is
// what revoking a credential of an open session means elsewhere. A
// connection counts as the sandbox's activity when it opens and then every
// ActivityInterval while it stays open, on the gateway's clock.
package sshgw
