// Package native runs a sandbox's workload as host processes (Linux only).
//
// Two environment markers, SANDPLANE_ROOT and SANDPLANE_SANDBOX_ID, let a
// restarted daemon find workloads it spawned but never recorded (Orphans).
// A Handle pairs the pid of the workload's root process with its start time
// from /proc, so a reused pid is never mistaken for the workload and never
// signalled. The Driver value that spawned a workload reaps it and reports
// its real exit ("exited: code N", "killed: signal S"). Any other value (a
// restarted daemon) adopts the handle: it watches and stops it through a
// pidfd, but can only report "process gone" once it ends. Handles are the
// same in every mode, so records of older daemons still load.
//
// # Containment: pid-namespace
//
// The default wherever the platform allows (Containment reports which mode a
// Driver uses; the daemon shows it in GET /v1/info). Each workload runs
// under an init of its own (package nsinit; see "The init program") as
// PID 1 of a new PID namespace, in a session of its own, and, where the init
// can mount one, with a /proc of its own in a private mount namespace. An
// unprivileged daemon adds a user namespace that maps only its own uid and
// gid onto themselves. The handle names the init.
//
// Guaranteed:
//   - Stop sends SIGTERM to the init, which forwards it to every process of
//     the namespace, waits the grace on the injected clock, then SIGKILLs the
//     init; when the init ends, the kernel kills every process left in the
//     namespace before the init counts as ended. So when Stop or Remove
//     returns, no process of the sandbox runs: not one started with nohup,
//     setsid or a double fork, not a background job of a toolbox session, not
//     a server holding a port. The same holds for a daemon restarted after a
//     kill -9 (it adopts the init by pid and start time), and for a tree whose
//     handle never reached disk: Orphans finds the init by its markers.
//   - When the workload's main command exits, the whole sandbox ends with it.
//   - The workload sees only its own processes in /proc (with the init's own
//     /proc), and cannot signal any process outside its namespace.
//   - The exit reason is faithful: the init reports the main command's exit
//     code or signal on a status pipe (see nsinit), since PID 1 cannot
//     re-raise a signal on itself.
//   - Files keep the daemon's uid and gid; a user namespace maps nothing else.
//
// Not guaranteed (this is containment of a process tree, not isolation):
//   - The workload shares the host's file system, network, IPC, hostname and
//     user: it can read and write whatever the daemon's user can, reach every
//     host service and other sandboxes' ports, and connect to any unix
//     socket the user can open (the Docker socket included, for a member of
//     the docker group or root).
//   - A daemon running as root runs workloads as root, with every capability.
//   - No resource limits (memory, CPU, pids): a fork bomb is contained in the
//     namespace but not limited.
//   - Under an unprivileged daemon's user namespace, setuid binaries (sudo,
//     ping with file capabilities) do not gain privileges, and files of other
//     users appear owned by nobody.
//   - Without a /proc of its own (a platform where the init cannot mount
//     one), /proc shows the host's processes, under pids that mean nothing
//     inside the namespace.
//   - Replacing the init's file does not change running inits, nor the
//     program later ones run (see "The init program").
//
// # The init program
//
// Every init runs sandplane-init (InitProgramName) when it sits beside the
// daemon's executable, as `make build` installs it, and the daemon's own
// binary re-executed otherwise: both run nsinit.Main, but the small program
// starts in about a millisecond, where the daemon's binary pays its whole
// start-up (tens of milliseconds) once more per sandbox. The program is
// checked once per process: a regular file owned by the daemon's user or
// root that only its owner may change (no other user can plant one beside
// a daemon), and that answers this build's nsinit.Protocol. It is then held open and run from
// that descriptor, so a file replaced later (an upgrade, a stale copy) is
// never run; one that fails the check is skipped, InitFallback says why and
// the daemon logs it. WithInitProgram names another file.
//
// # Parked inits
//
// Warm, which the launcher calls once a launch is over (and the daemon's
// manager as it starts), starts one init ahead for the next Start of the
// same root, in its namespaces with its /proc mounted, its signal handling
// set up, waiting on a control socket (nsinit's -park). Start hands it the
// workload (flags, binds, environment; the two log files and its working
// directory as descriptors) and so pays neither the namespaces' clone nor the init's
// own start-up: about a millisecond per sandbox. Only workloads in this
// containment without bwrap isolation use one; another starts cold. A
// parked init found gone when its request is sent (killed, or on a platform
// where it cannot rewrite its environment, see below) costs a cold start
// and turns parking off. Cool ends it for good (the manager's Close, the
// simulator's).
//
// A parked init holds nothing of a workload and carries no marker: its
// environment is one placeholder entry (ParkedEntry once it is parked), so
// Orphans and every scan for a sandbox's processes pass it by. It exits when its control socket closes,
// that is, with the process that parked it, kill -9 included. Handed a
// workload, it overwrites that placeholder with the workload's two markers
// (its /proc/PID/environ then shows those and nothing else, no value of the
// workload's environment), before it forks: from the workload's first
// instruction its init is found by its markers, as a cold one is.
//
// # Parked workloads
//
// WithParkable names programs that call nsinit.AwaitSandbox first thing
// (the daemon and the simulator name sandplane-toolbox, which they have
// checked). When Warm's spec runs one, its parked init starts that program
// too, as its only child, once parked: the program's exec, runtime and
// package initialisation are then over before any Start, and it waits on a
// socket only its init holds. A Start of the same command (path and
// arguments) takes it: the init, once its binds are made, hands it the
// sandbox (its environment, its two markers, its working directory and the
// two log files) and reports the command started once it has acknowledged
// it. Any other command, or a parked program found gone or not answering
// within 5 seconds, is started anew and the parked one killed. Like its
// init, a parked workload carries no marker and holds no value until
// handed a sandbox (its environment is one placeholder entry,
// nsinit.WorkloadVar); handed one, its /proc/PID/environ shows the two
// markers and nothing else, the values living in its memory only (it
// passes them on to the commands it starts); it dies with its init, and so
// with the process that parked it.
//
// # Binds
//
// Spec.Binds show a host directory at another path (the simulator shows a
// sandbox's private home at /home/daytona), in the init's own mount
// namespace: a Target that exists is covered; one that does not is made in
// a tmpfs over its parent into which each of the parent's entries is bound
// back, so the host's file system never changes. The init enters WorkDir
// after the binds. Binds need that mount namespace (CanBind): a runtime in
// process groups, or whose init cannot mount, refuses them with
// preflight_failed. With bwrap isolation, bwrap makes them.
//
// # Containment: process-group (fallback)
//
// Where PID namespaces are unavailable (clone answers EPERM, or the binary
// never called nsinit.Main), the workload itself leads a new session and
// process group; the daemon logs a warning at start and reports
// "process-group". Stop signals the group: SIGTERM, grace, SIGKILL.
//
// Guaranteed: every process that stays in the workload's process group ends
// with Stop, nohup'd and double-forked children included.
//
// Not guaranteed: a process that leaves the group (setsid, setpgid, a
// toolbox session's shell, which leads its own group) outlives Stop and
// Remove, keeps its ports, and runs on in a deleted directory. Orphans finds
// it after a daemon restart only if it leads a session and still carries the
// markers. Everything the pid-namespace mode does not guarantee holds here
// too, and /proc shows the host's processes.
//
// # Isolation: bwrap
//
// Asked for per snapshot (isolation: bwrap) or daemon-wide (WithIsolation,
// the daemon's isolation setting), on top of pid-namespace containment. The
// outer init (PID 1 of the sandbox's PID namespace, in the host's network)
// holds the sandbox port, bound on Spec.HostAddr (the sandbox's own
// loopback address when the launcher gives it one) before Start returns, and
// forwards each connection to a unix socket in Spec.Dir/run; its main
// command is bubblewrap, whose command is an inner init, PID 1 of bwrap's
// own PID namespace, which forwards from that socket to 127.0.0.1:$PORT in
// the sandbox's network namespace and runs the workload. Readiness is judged
// through the forwarder (Probe): the inner half acknowledges a connection
// only once the workload accepted it. Preflight fails with preflight_failed,
// naming the fix, when bwrap is missing (apt-get install bubblewrap) or
// cannot create its namespaces (the sysctl that blocks unprivileged user
// namespaces).
//
// Guaranteed, beyond the pid-namespace mode:
//   - Own mount namespace: the root file system is read-only; /tmp is
//     Spec.Dir/tmp; $HOME, the default working directory, is Spec.Dir/home
//     at the same path as on the host; /run, /var/run, /home, /root and the
//     daemon user's home are empty tmpfs; the daemon's root directory is
//     hidden (another sandbox's files, sandbox.json, runtime-env.json and the
//     logs included) except the sandbox's own home. The command's executable
//     is bound read-only where it lies when that place is hidden.
//   - Own /proc (its PID namespace): the daemon's and other processes are
//     invisible. Own /dev (bwrap's minimal one), IPC and UTS namespaces.
//   - Own network namespace with loopback only: no route to the host's
//     services, other sandboxes or the internet; the sandbox port is the one
//     way in, forwarded from Spec.HostAddr:<port> on the host. It can
//     listen on no address of the host's, so 127.0.0.1 and [::1], where
//     browsers send every preview's cookie, are out of its reach.
//   - A user namespace in which no capability is left (dropped for root too)
//     and no further user namespace can be made.
//
// Not guaranteed:
//   - The rest of the file system stays readable, read-only, with the
//     daemon user's permissions: a root daemon's sandbox reads every
//     root-readable file that is not hidden (/etc/shadow, /var/lib, other
//     directories of secrets outside the homes), and /sys is visible.
//   - No egress at all: a workload that needs the network (package installs,
//     model APIs) does not work isolated.
//   - Tools installed under a home directory (~/.local/bin, pyenv shims)
//     are hidden: only the command itself is bound in.
//   - No seccomp filter and no resource limits: the kernel's whole system
//     call surface is reachable.
//   - A workload can write its own home and /tmp without quota.
//   - Adopted after a daemon restart, an isolated workload is probed by
//     dialling its port, which the forwarder always accepts.
package native
