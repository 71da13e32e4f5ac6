// Package nsinit is the small init process that the native runtime runs as
// PID 1 of each workload's own PID namespace (Linux only).
//
// Main, which main() and the TestMain of every test binary that spawns
// native workloads call first, recognises argv[0] Name, runs the init and
// exits. So the daemon, the simulator and the tests carry the init with
// nothing else installed: the runtime starts /proc/self/exe with argv[0] set
// to Name. Where the small program cmd/sandplane-init (which runs Main and
// nothing else) is installed beside them, the runtime starts that instead,
// since it starts far faster; Protocol, asked with ProtocolFlag, keeps a
// program from another build from being handed flags it would misread. A
// binary that never calls Main is not used as an init: Enabled reports false
// and the runtime falls back to process groups.
//
// What the init does, and nothing more:
//   - it refuses to run unless it is PID 1, so that its kill(-1) can only
//     ever reach its own namespace;
//   - with -mount-proc, it mounts a /proc of its namespace, then makes each
//     -bind SOURCE -bind-at TARGET (Config.Binds) and enters -dir;
//   - it starts the main command (argv after the flags) with its own
//     environment, working directory, stdout and stderr, and stdin from
//     /dev/null;
//   - it forwards SIGTERM, SIGINT and SIGHUP to every process of the
//     namespace (kill(-1, sig) from inside), unless -signals=false;
//   - it reaps every process the namespace hands it (orphans are reparented
//     to PID 1);
//   - it exits as soon as the main command exits. The kernel then kills
//     every process left in the namespace, daemonised, setsid'd and
//     double-forked ones included: nothing of the workload outlives its init.
//
// # Parked
//
// With -park ENTRY (after -mount-proc, if any) the init sets up, catches
// the signals it forwards, shows ENTRY as its whole environment, then waits
// for its command on fd 4 (ControlFD), a unix stream socket: a Request,
// sent once, as a 4-byte big-endian length and that many bytes of
// NUL-terminated strings (Cwd, the counts of Show and Env, Show, Env, then
// the flags and command as on a command line), with the command's stdout
// and stderr as SCM_RIGHTS on its first byte. The init makes those fds 1
// and 2, enters Cwd, writes Show over its own
// environment in place (the kernel's env_start..env_end, through
// /proc/self/mem; the runtime starts it with a placeholder entry at least
// as long, see Reserve), and goes on as an init started there with those
// flags would: binds, then the command. An init that cannot rewrite its
// environment exits before it parks, so a request finds it gone. A socket
// closed before a request begins makes it exit 0 silently; a request that
// is cut short or malformed is an error report.
//
// With a command after -park ENTRY (Config.Park with Path and Args), the
// init also starts that command once parked, as a parked workload: with
// one environment entry, WorkloadVar's placeholder as long as the init's
// own, its ambient capabilities cleared, and on fd 3 (WorkloadFD) one end
// of a unix stream socket. A program that calls AwaitSandbox first thing
// waits there. When the request is for the same path and arguments, needs
// no descriptor beyond stdio (no -relay, no -keep-fd) and sets nothing a
// Go runtime reads as it starts (GOGC, GOMEMLIMIT, GOMAXPROCS,
// GOTRACEBACK, GODEBUG), the init, once its binds are made, hands it the
// request's header (Cwd, or -dir; Show; Env), framed as a request is, with
// its own stdout and stderr; the workload takes them as the init did, sets
// Env as its environment, enters Cwd, writes one byte back, and the init
// reports "start". A workload that
// closes the socket instead, or does not answer within 5 seconds, or any
// other request, is killed and the command started as usual.
//
// # Status
//
// PID 1 cannot re-raise a signal on itself, so its exit status alone cannot
// say "killed by SIGTERM" faithfully. The init reports on fd 3, a pipe whose
// read end the spawning runtime holds, in lines:
//
//	start            the main command runs
//	error <text>     the init could not start it; nothing runs
//	exit <code>      the main command exited with code
//	signal <number>  the main command was killed by signal number
//
// It also exits with the code, or 128+signal, so a reader that missed the
// status (the daemon restarted) still sees something sensible. An init killed
// by SIGKILL reports nothing: its own wait status says it all.
//
// # Forwarding and relaying (bubblewrap isolation)
//
// With -relay the init gives its main command a status pipe of its own as
// fd 3 and reports what the command reports there: the runtime starts an
// outer init whose main command is bwrap, whose command is the inner init
// (inside the sandbox, PID 1 of bwrap's PID namespace), and the inner init's
// status reaches the runtime through the outer one.
//
// -forward FD,SOCKET makes the init forward every TCP connection on an
// inherited listener to a unix socket; -serve SOCKET,HOST:PORT makes it
// listen on a unix socket and forward every connection to a TCP address.
// Both repeat, once per port of the sandbox. The inner half
// acknowledges a connection with one byte once it has reached the target, so
// the outer half, and Probe, can tell a workload that serves from a listener
// that merely accepts.
package nsinit
