package escape

// Runtime is where a sandbox runs, as the suite tells them apart.
type Runtime string

const (
	// Native is a native sandbox without isolation (pid-namespace
	// containment only).
	Native Runtime = "native"
	// NativeBwrap is a native sandbox with `isolation: bwrap`.
	NativeBwrap Runtime = "native-bwrap"
	// Docker is a docker sandbox on the default bridge.
	Docker Runtime = "docker"
)

// Runtimes are every runtime the suite knows, in the order of the table in
// docs/security.md.
var Runtimes = []Runtime{Native, NativeBwrap, Docker}

// When says under which condition a known gap opens on a machine.
type When string

const (
	// Always: on every machine.
	Always When = "always"
	// AsRoot: when the daemon runs as root.
	AsRoot When = "root daemon"
	// HostCan: where the daemon's user can do it on the host itself (the
	// test runs the probe outside any sandbox to know): a sandbox that
	// adds no barrier of its own has the host's.
	HostCan When = "where the daemon's user can"
)

// Gap is an entry a runtime does not stop: the suite asserts that it
// escapes there (when When holds), so that the documentation names every
// gap and no gap closes unnoticed.
type Gap struct {
	When When
	// Why says plainly what lets it through.
	Why string
}

// Entry is one escape of the suite.
type Entry struct {
	// Name is the entry's key: the probe's line, the table's row.
	Name string
	// Tries says what the attempt does.
	Tries string
	// Stops says what stops it, per runtime that does.
	Stops map[Runtime]string
	// Gaps are the runtimes that do not stop it; every other runtime
	// must.
	Gaps map[Runtime]Gap
	// Host marks an entry the test drives from the host (through the
	// toolbox's or the daemon's API) rather than the probe.
	Host bool
}

func gap(w When, why string) Gap { return Gap{When: w, Why: why} }

// Entries is the suite, modelled on the container-escape classes of
// SandboxEscapeBench (arXiv 2603.02277): exposed control planes and
// sockets, neighbour access, /proc and /sys exposures, capabilities and
// mounts, devices, kernel interfaces, setuid, path tricks through a file
// API, resource exhaustion, and surviving the sandbox.
var Entries = []Entry{
	{Name: "daemon-api", Tries: "the daemon's API (`GET /v1/sandboxes`) without a token, then with every token-like word it can read (token files, environments)",
		Stops: map[Runtime]string{NativeBwrap: "own network namespace: the daemon's loopback is not reachable", Docker: "the bridge: the daemon listens on the host's loopback only"},
		Gaps:  map[Runtime]Gap{Native: gap(Always, "same user and file system: the token file is readable")}},
	{Name: "simulator-ports", Tries: "the simulator's admin (`/_sim`) and API ports without a key, then with every token-like word it can read",
		Stops: map[Runtime]string{Native: "its keys live only in the simulator's command line and environment, which the sandbox's own /proc does not show", NativeBwrap: "own network namespace", Docker: "the bridge: the simulator listens on the host's loopback"}},
	{Name: "neighbour-toolbox", Tries: "another sandbox's toolbox on its host port and its container address, without and with found tokens",
		Stops: map[Runtime]string{NativeBwrap: "own network namespace; the neighbour's token is hidden with the daemon root", Docker: "inter-container traffic off on the bridge; published ports on the host's loopback only"},
		Gaps:  map[Runtime]Gap{Native: gap(Always, "the neighbour's `sandbox-token` in the daemon root is readable, and its port is on the shared loopback")}},
	{Name: "neighbour-preview", Tries: "another sandbox's preview through the daemon, without and with found tokens",
		Stops: map[Runtime]string{NativeBwrap: "own network namespace", Docker: "the bridge"},
		Gaps:  map[Runtime]Gap{Native: gap(Always, "the neighbour's token is readable, as for its toolbox")}},
	{Name: "neighbour-files", Tries: "another sandbox's `runtime-env.json`, `sandbox-token`, `sandbox.json` and a file it wrote, by host path and by walking its directory",
		Stops: map[Runtime]string{NativeBwrap: "the daemon root is hidden", Docker: "own root file system; the host's paths do not exist"},
		Gaps:  map[Runtime]Gap{Native: gap(Always, "same user and file system")}},
	{Name: "host-files", Tries: "a canary file of the host user outside every sandbox",
		Stops: map[Runtime]string{NativeBwrap: "private /tmp and home; the daemon user's home hidden", Docker: "own root file system"},
		Gaps:  map[Runtime]Gap{Native: gap(Always, "same user and file system")}},
	{Name: "host-loopback", Tries: "a service of the host on 127.0.0.1, directly and through the engine's host alias",
		Stops: map[Runtime]string{NativeBwrap: "own network namespace", Docker: "the bridge; the service listens on loopback only"},
		Gaps:  map[Runtime]Gap{Native: gap(Always, "shared network namespace")}},
	{Name: "docker-socket", Tries: "the Docker socket (`/var/run/docker.sock`, `/run/docker.sock`): `GET /containers/json`",
		Stops: map[Runtime]string{NativeBwrap: "/run hidden", Docker: "the socket is not mounted"},
		Gaps:  map[Runtime]Gap{Native: gap(HostCan, "the daemon's user's socket is reachable")}},
	{Name: "proc-environ", Tries: "`/proc/1/environ` and every process's environment and command line (a host process holds a canary)",
		Stops: map[Runtime]string{Native: "PID namespace with its own /proc: host processes are not listed (under `process-group` containment they are)", NativeBwrap: "own PID namespace and /proc", Docker: "own PID namespace"}},
	{Name: "parent-environ", Tries: "the environment of each ancestor and of any `sandplane serve` it can see (the daemon's holds a canary)",
		Stops: map[Runtime]string{Native: "PID namespace: the chain ends at the sandbox's init; the daemon is non-dumpable besides", NativeBwrap: "own PID namespace", Docker: "own PID namespace"}},
	{Name: "ptrace-neighbour", Tries: "signal 0 and `PTRACE_ATTACH` to the neighbour's processes, by host pid and by marker",
		Stops: map[Runtime]string{Native: "PID namespace: the neighbour's processes have no number in it", NativeBwrap: "PID namespace, no capabilities", Docker: "PID namespace, no CAP_SYS_PTRACE"}},
	{Name: "mount", Tries: "mount a tmpfs, a proc and a bind of its own work dir over a directory of its own (never a recursive bind: unmounting one propagates to the host's mounts)",
		Stops: map[Runtime]string{NativeBwrap: "no capabilities", Docker: "no CAP_SYS_ADMIN, seccomp"},
		Gaps:  map[Runtime]Gap{Native: gap(HostCan, "a root daemon's workloads hold every capability")}},
	{Name: "block-devices", Tries: "read the host's disks (from /proc/partitions) through /dev and through device nodes it makes",
		Stops: map[Runtime]string{NativeBwrap: "own /dev; no CAP_MKNOD", Docker: "own /dev; the device cgroup"},
		Gaps:  map[Runtime]Gap{Native: gap(HostCan, "the host's /dev")}},
	{Name: "cgroup-write", Tries: "make a cgroup in each hierarchy; open for writing limits, a parent's `cgroup.procs`, v1 `release_agent`",
		Stops: map[Runtime]string{NativeBwrap: "/sys is read-only", Docker: "/sys/fs/cgroup is read-only"},
		Gaps:  map[Runtime]Gap{Native: gap(HostCan, "the host's /sys/fs/cgroup")}},
	{Name: "proc-sys-write", Tries: "open for writing (never written) `core_pattern`, `modprobe`, `sysrq-trigger`, `drop_caches`: core_pattern runs a program as the host's root",
		Stops: map[Runtime]string{
			NativeBwrap: "/proc/sys and sysrq-trigger bound read-only (a root daemon's sandbox uid 0 is the host's root, and a sysctl checks only its owner)",
			Docker:      "/proc/sys is read-only, sysrq-trigger masked",
		},
		Gaps: map[Runtime]Gap{Native: gap(HostCan, "the host's /proc/sys")}},
	{Name: "kernel-module", Tries: "`finit_module` (of /dev/null, which loads nothing)",
		Stops: map[Runtime]string{NativeBwrap: "no capabilities", Docker: "no CAP_SYS_MODULE, seccomp"},
		Gaps:  map[Runtime]Gap{Native: gap(HostCan, "a root daemon's workloads hold CAP_SYS_MODULE")}},
	{Name: "raw-socket", Tries: "a packet socket (`AF_PACKET`, `SOCK_RAW`)",
		Stops: map[Runtime]string{NativeBwrap: "no capabilities", Docker: "CAP_NET_RAW dropped"},
		Gaps:  map[Runtime]Gap{Native: gap(HostCan, "a root daemon's workloads hold CAP_NET_RAW")}},
	{Name: "setuid", Tries: "which of CAP_SYS_ADMIN, SYS_PTRACE, SYS_MODULE, DAC_READ_SEARCH, SYS_RAWIO it holds or reaches through a setuid-root program",
		Stops: map[Runtime]string{NativeBwrap: "no_new_privs, empty bounding set", Docker: "the bounding set lacks them"},
		Gaps:  map[Runtime]Gap{Native: gap(HostCan, "the host's setuid programs and bounding set")}},
	{Name: "fork-bomb", Tries: "processes until refused, only under a pids limit of the sandbox's own (seen from the host); otherwise not run",
		Gaps: map[Runtime]Gap{
			Native:      gap(Always, "no pids limit: the daemon's cgroup is shared"),
			NativeBwrap: gap(Always, "no pids limit"),
			Docker:      gap(Always, "no `--pids-limit` on the container"),
		}},
	{Name: "disk-filler", Tries: "write until refused, only under a disk quota of the sandbox's own (seen from the host); otherwise not run",
		Gaps: map[Runtime]Gap{
			Native:      gap(Always, "writes go to the daemon root's file system"),
			NativeBwrap: gap(Always, "home and /tmp live in the sandbox's directory on the daemon root's file system"),
			Docker:      gap(Always, "no size limit on the writable layer"),
		}},
	{Name: "files-api-neighbour", Host: true, Tries: "through the toolbox's file API: download, bulk download, list, info, search, find, replace, move out and in, upload, at the neighbour's files by absolute path, `..` and symlinks",
		Stops: map[Runtime]string{Native: "the file API refuses the daemon root", NativeBwrap: "the daemon root is hidden", Docker: "own root file system"}},
	{Name: "files-api-host", Host: true, Tries: "the same file-API tricks at the host's canary directory",
		Stops: map[Runtime]string{NativeBwrap: "the toolbox runs in the sandbox: the host's /tmp is private", Docker: "the toolbox runs in the container"},
		Gaps:  map[Runtime]Gap{Native: gap(Always, "the toolbox is the host's user on the host's file system")}},
	{Name: "leftover-after-delete", Host: true, Tries: "a setsid'd process without the sandbox's marker variables, ignoring every signal, then the sandbox deleted",
		Stops: map[Runtime]string{Native: "PID namespace: its init's death kills the rest", NativeBwrap: "PID namespace", Docker: "the container's PID namespace"}},
}

// Lookup is the entry named name, or nil.
func Lookup(name string) *Entry {
	for i := range Entries {
		if Entries[i].Name == name {
			return &Entries[i]
		}
	}
	return nil
}
