package nsinit

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Name is argv[0] of an init, or the base name of the path it runs as.
const Name = "sandplane-nsinit"

// StatusFD is the descriptor an init reports its status on.
const StatusFD = 3

// Protocol numbers the command line and status lines an init understands
// and writes. Raise it with any change to Config.Flags, parse or
// Status.line: a runtime refuses an init program that answers another
// number (see ProtocolFlag), so that one left from an older build is never
// handed flags it would misread.
const Protocol = 3

// ProtocolFlag, as an init's only argument, makes it print Protocol on
// stdout and exit 0, whatever its PID.
const ProtocolFlag = "-protocol"

// exitSetup is the init's exit code when it could not start the command.
const exitSetup = 125

var enabled atomic.Bool

// Main runs the init and exits when this process was started as one (argv[0]
// names Name). Otherwise it returns at once, and Enabled reports true from
// then on. Call it first thing in main() and in TestMain.
func Main() {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == Name {
		os.Exit(run(os.Args[1:]))
	}
	enabled.Store(true)
}

// Enabled reports whether Main ran in this process, that is, whether
// /proc/self/exe re-executed as Name runs the init rather than the program.
func Enabled() bool { return enabled.Load() }

// Config is what one init does. The zero value with Path and Args set runs
// the command and forwards signals.
type Config struct {
	// Path is the executable of the main command; Args its argv.
	Path string
	Args []string
	// NoSignals stops the init from forwarding SIGTERM, SIGINT and SIGHUP:
	// for an inner init whose namespace an outer one already signals.
	NoSignals bool
	// Relay hands the main command a status pipe as its fd 3 and reports
	// what it reports there.
	Relay bool
	// Forwards are inherited TCP listeners whose connections go to unix
	// sockets: the outer halves of ports forwarded into a sandbox.
	Forwards []Forward
	// Serves are unix sockets to listen on whose connections go to TCP
	// addresses: the inner halves.
	Serves []Serve
	// KeepFDs are inherited descriptors handed on to the main command at the
	// same numbers (above StatusFD).
	KeepFDs []int
	// MountProc makes the init's mounts private and mounts a /proc of its
	// PID namespace over the inherited one, which shows another namespace's
	// processes by pids that mean nothing inside. The runtime starts the
	// init in a mount namespace of its own for it.
	MountProc bool
	// Binds show host directories at other paths, in the init's mount
	// namespace (with MountProc only): each Source appears at its Target.
	// A Target that does not exist is made in a copy of its parent (a
	// tmpfs over it into which each of the parent's entries is bound back),
	// so the host's file system never changes.
	Binds []Bind
	// Dir is the main command's working directory, entered after the
	// binds; empty keeps the init's own.
	Dir string
	// Probe makes the init exit at once, 0 when it is PID 1 (and could mount
	// /proc, with MountProc): the runtime's check of what this platform
	// gives it.
	Probe bool
	// Park, an environment entry, makes the init set up (MountProc), show
	// Park as its whole environment (see Request.Show: a check that it can,
	// and a sign that it is parked), then wait for its command on ControlFD
	// (a Request) instead of taking it from its command line. It exits 0 if
	// the socket closes first. Started ahead of a spawn, it takes the
	// init's own start-up off the spawn's path. With Path and Args too, the
	// init also starts that command ahead, as a parked workload (see
	// AwaitSandbox), and a request for the same command takes it rather
	// than starting another: nor does the program's own start-up weigh on
	// the spawn. Any other request ends it first.
	Park string
}

// Forward is one outer half of a forwarded port: the connections of the
// inherited listener ListenFD go to the unix socket Socket.
type Forward struct {
	ListenFD int
	Socket   string
}

// Serve is one inner half: the connections of the unix socket Socket go to
// the TCP address Target.
type Serve struct {
	Socket string
	Target string
}

// Flags returns the init's command line after argv[0].
func (c Config) Flags() []string {
	var out []string
	if c.MountProc {
		out = append(out, "-mount-proc")
	}
	if c.Probe {
		return append(out, "-probe")
	}
	if c.Park != "" {
		out = append(out, "-park", c.Park)
		if c.Path == "" {
			return out
		}
		return append(append(out, "--", c.Path), c.Args...)
	}
	for _, b := range c.Binds {
		// Two flags: any byte but NUL may be in a path.
		out = append(out, "-bind", b.Source, "-bind-at", b.Target)
	}
	if c.Dir != "" {
		out = append(out, "-dir", c.Dir)
	}
	if c.NoSignals {
		out = append(out, "-signals=false")
	}
	if c.Relay {
		out = append(out, "-relay")
	}
	for _, f := range c.Forwards {
		out = append(out, "-forward", strconv.Itoa(f.ListenFD)+","+f.Socket)
	}
	for _, s := range c.Serves {
		out = append(out, "-serve", s.Socket+","+s.Target)
	}
	for _, fd := range c.KeepFDs {
		out = append(out, "-keep-fd", strconv.Itoa(fd))
	}
	out = append(out, "--", c.Path)
	return append(out, c.Args...)
}

func parse(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	signals := fs.Bool("signals", true, "")
	fs.BoolVar(&c.Relay, "relay", false, "")
	fs.BoolVar(&c.Probe, "probe", false, "")
	fs.BoolVar(&c.MountProc, "mount-proc", false, "")
	fs.StringVar(&c.Park, "park", "", "")
	fs.Func("forward", "", func(v string) error {
		fd, sock, ok := strings.Cut(v, ",")
		n, err := strconv.Atoi(fd)
		if !ok || err != nil || n <= StatusFD || sock == "" {
			return fmt.Errorf("forward %q: want FD,SOCKET with FD above %d", v, StatusFD)
		}
		c.Forwards = append(c.Forwards, Forward{ListenFD: n, Socket: sock})
		return nil
	})
	fs.Func("serve", "", func(v string) error {
		i := strings.LastIndexByte(v, ',')
		if i <= 0 || i == len(v)-1 {
			return fmt.Errorf("serve %q: want SOCKET,HOST:PORT", v)
		}
		c.Serves = append(c.Serves, Serve{Socket: v[:i], Target: v[i+1:]})
		return nil
	})
	fs.StringVar(&c.Dir, "dir", "", "")
	fs.Func("bind", "", func(s string) error {
		if !filepath.IsAbs(s) {
			return fmt.Errorf("bind %q: want an absolute path", s)
		}
		c.Binds = append(c.Binds, Bind{Source: s})
		return nil
	})
	fs.Func("bind-at", "", func(s string) error {
		n := len(c.Binds)
		if n == 0 || c.Binds[n-1].Target != "" || !filepath.IsAbs(s) {
			return fmt.Errorf("bind-at %q: want an absolute path after each -bind", s)
		}
		c.Binds[n-1].Target = s
		return nil
	})
	fs.Func("keep-fd", "", func(s string) error {
		fd, err := strconv.Atoi(s)
		if err != nil || fd <= StatusFD {
			return fmt.Errorf("keep-fd %q: want a descriptor above %d", s, StatusFD)
		}
		c.KeepFDs = append(c.KeepFDs, fd)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.NoSignals = !*signals
	if c.Probe || c.Park != "" && fs.NArg() == 0 {
		return c, nil
	}
	for _, b := range c.Binds {
		if b.Target == "" {
			return c, fmt.Errorf("bind %q: no -bind-at", b.Source)
		}
	}
	rest := fs.Args()
	if len(rest) < 2 {
		return c, errors.New("no command: want -- PATH ARGV0 [ARG...]")
	}
	c.Path, c.Args = rest[0], rest[1:]
	return c, nil
}

// Status is how a main command ended, or that it started.
type Status struct {
	Started bool
	// Err is set when the init could not start the command.
	Err string
	// Exited, Code: the command exited with Code. Signal: it was killed by it.
	Exited bool
	Code   int
	Signal syscall.Signal
}

// Final reports whether s says how the command ended.
func (s Status) Final() bool { return s.Exited || s.Signal != 0 }

func (s Status) line() string {
	switch {
	case s.Err != "":
		return "error " + strings.ReplaceAll(s.Err, "\n", " ")
	case s.Exited:
		return "exit " + strconv.Itoa(s.Code)
	case s.Signal != 0:
		return "signal " + strconv.Itoa(int(s.Signal))
	default:
		return "start"
	}
}

// exitCode is what the init exits with to say s.
func (s Status) exitCode() int {
	switch {
	case s.Exited:
		return s.Code
	case s.Signal != 0:
		return 128 + int(s.Signal)
	}
	return exitSetup
}

func statusOf(ws unix.WaitStatus) Status {
	if ws.Signaled() {
		return Status{Signal: ws.Signal()}
	}
	return Status{Exited: true, Code: ws.ExitStatus()}
}

// ParseStatus decodes one status line. ok is false for anything else.
func ParseStatus(line string) (s Status, ok bool) {
	word, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch word {
	case "start":
		return Status{Started: true}, arg == ""
	case "error":
		return Status{Err: arg}, arg != ""
	case "exit":
		n, err := strconv.Atoi(arg)
		return Status{Exited: true, Code: n}, err == nil && n >= 0 && n < 256
	case "signal":
		n, err := strconv.Atoi(arg)
		return Status{Signal: syscall.Signal(n)}, err == nil && n > 0 && n < 65
	}
	return Status{}, false
}

// ReadStatus reads status lines from r until EOF. It calls started with the
// first report of whether the command started, or why not; at an EOF before
// any, with an error that says noStart. It returns how the command ended, if
// r said so. A line that does not parse is skipped.
func ReadStatus(r io.Reader, started func(Status), noStart string) (final Status) {
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		s, ok := ParseStatus(sc.Text())
		if !ok {
			continue
		}
		if first && (s.Started || s.Err != "") {
			first = false
			started(s)
			continue
		}
		if s.Final() {
			final = s
		}
	}
	if first {
		started(Status{Err: noStart})
	}
	return final
}

// initProc is one running init.
type initProc struct {
	cfg Config
	// env is the main command's environment.
	env []string
	// A parked init's request: the marks it shows, and the directory it
	// entered. workload is the command it started ahead, if any, until
	// the request takes or ends it.
	show     []string
	cwd      string
	workload *parkedWorkload
	status   *os.File
	// sigs receives the signals the init forwards (catchSignals).
	sigs chan os.Signal
}

// catchSignals makes the init catch what it forwards. PID 1 gets no signal
// from an ancestor namespace that it does not handle, so even an init that
// forwards nothing must catch these. The first call starts the runtime's
// signal thread: a parked init makes it before it parks.
func (p *initProc) catchSignals() {
	if p.sigs == nil {
		p.sigs = make(chan os.Signal, 8)
		signal.Notify(p.sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	}
}

func (p *initProc) report(s Status) { _, _ = io.WriteString(p.status, s.line()+"\n") }

// run is the init; it returns the exit code.
func run(args []string) int {
	if len(args) == 1 && args[0] == ProtocolFlag {
		fmt.Println(Protocol)
		return 0
	}
	p := &initProc{status: os.NewFile(StatusFD, "status")}
	// The status pipe is the init's alone: the workload must not hold it
	// open (or write lies into it).
	_, _ = unix.FcntlInt(StatusFD, unix.F_SETFD, unix.FD_CLOEXEC)
	cfg, err := parse(args)
	if err != nil {
		p.report(Status{Err: "init: " + err.Error()})
		return exitSetup
	}
	p.cfg = cfg
	// kill(-1) from anything but PID 1 of its own namespace would reach
	// every process of the user.
	if os.Getpid() != 1 {
		p.report(Status{Err: "init: not PID 1 of a PID namespace"})
		return exitSetup
	}
	if cfg.MountProc {
		if err := mountProc(); err != nil {
			p.report(Status{Err: "init: " + err.Error()})
			return exitSetup
		}
	}
	if cfg.Probe {
		return 0
	}
	if cfg.Park == "" {
		p.env = os.Environ()
	} else if cfg, err = p.unpark(); errors.Is(err, errNoRequest) {
		return 0
	} else if err != nil {
		p.report(Status{Err: "init: " + err.Error()})
		return exitSetup
	}
	if len(cfg.Binds) > 0 && !cfg.MountProc {
		p.report(Status{Err: "init: binds need a mount namespace of its own (-mount-proc)"})
		return exitSetup
	}
	for _, b := range cfg.Binds {
		if err := bindAt(b.Source, b.Target); err != nil {
			p.report(Status{Err: "init: " + err.Error()})
			return exitSetup
		}
	}
	return p.serve()
}

// unpark waits for the parked init's request and makes it the init's: its
// output and working directory, its environment for the command, the marks
// its own environment shows, and the config it runs, which keeps the set-up
// done before it parked.
func (p *initProc) unpark() (Config, error) {
	_, _ = unix.FcntlInt(ControlFD, unix.F_SETFD, unix.FD_CLOEXEC)
	p.catchSignals()
	// An init that cannot show the marks exits before it parks, so the
	// runtime's request finds it gone and starts the workload otherwise.
	area, err := openEnvironArea()
	if err != nil {
		return Config{}, fmt.Errorf("find its environment: %w", err)
	}
	defer area.close()
	if p.cfg.Path != "" {
		// Before the init shows it is parked, so that once it does its
		// workload runs too. Without it, the request starts its own.
		p.workload = startParked(p.cfg.Path, p.cfg.Args, int(area.end-area.start))
	}
	if err := area.show([]string{p.cfg.Park}); err != nil {
		return Config{}, fmt.Errorf("show %s: %w", p.cfg.Park, err)
	}
	req, err := receive()
	if err != nil {
		return Config{}, err
	}
	// What was sent to the parked init was meant for no workload: a cold
	// init would have ignored it, not having caught it yet. Best effort:
	// the runtime hands a signal on to the channel a moment after it
	// arrives.
	for len(p.sigs) > 0 {
		<-p.sigs
	}
	// Before anything of the command runs, so that a scan of /proc that
	// finds the command finds its init too.
	if err := area.show(req.Show); err != nil {
		return Config{}, fmt.Errorf("show the marks: %w", err)
	}
	req.Config.MountProc = p.cfg.MountProc
	p.cfg, p.env, p.show, p.cwd = req.Config, req.Env, req.Show, req.Cwd
	return p.cfg, nil
}

// mountProc mounts a /proc of the init's PID namespace, in the init's own
// mount namespace: private first, so that nothing propagates to the host.
func mountProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

func (p *initProc) serve() int {
	p.catchSignals()
	for _, fd := range p.cfg.KeepFDs {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	if err := p.startForwarders(); err != nil {
		p.report(Status{Err: err.Error()})
		return exitSetup
	}
	files := []uintptr{0, 1, 2}
	var relayR, relayW *os.File
	if p.cfg.Relay {
		var err error
		if relayR, relayW, err = os.Pipe(); err != nil {
			p.report(Status{Err: "init: status pipe: " + err.Error()})
			return exitSetup
		}
		files = append(files, relayW.Fd())
	}
	files = keep(files, p.cfg.KeepFDs)
	pid, err := p.startCommand(files)
	if relayW != nil {
		// Only the command may hold the write end, so that EOF means it
		// and everything it handed the pipe on to are gone.
		relayW.Close()
	}
	if err != nil {
		p.report(Status{Err: fmt.Sprintf("start %s: %v", p.cfg.Args[0], err)})
		return exitSetup
	}
	mainExit := reap(pid)
	var relayed chan Status
	if relayR != nil {
		relayed = p.relay(relayR)
	} else {
		p.report(Status{Started: true})
	}
	return p.wait(mainExit, relayed)
}

// forkExec starts one of the init's commands. An unprivileged daemon starts
// the init with CAP_SYS_ADMIN as an ambient capability of its user
// namespace, to mount /proc, which puts it in the inheritable set too. No
// command may inherit it (bwrap refuses to run with it), nor gain it back
// by executing a file that grants what is inheritable: forkExec clears
// both sets on the thread that forks, which stays locked to the init's
// main goroutine.
func forkExec(path string, args []string, dir string, env []string, files []uintptr) (int, error) {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return 0, fmt.Errorf("read its capabilities: %w", err)
	}
	caps[0].Inheritable, caps[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return 0, fmt.Errorf("clear its inheritable capabilities: %w", err)
	}
	return syscall.ForkExec(path, args, &syscall.ProcAttr{Dir: dir, Env: env, Files: files})
}

// keep extends files so that each of fds is passed on at its own number.
func keep(files []uintptr, fds []int) []uintptr {
	for _, fd := range fds {
		for len(files) <= fd {
			files = append(files, ^uintptr(0)) // closed in the child
		}
		files[fd] = uintptr(fd)
	}
	return files
}

// reap collects every child the namespace hands the init and sends the main
// command's wait status on the channel it returns.
func reap(mainPID int) <-chan unix.WaitStatus {
	ch := make(chan unix.WaitStatus, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: nothing left to reap
			}
			if pid == mainPID {
				ch <- ws
			}
		}
	}()
	return ch
}

// relay passes the main command's start report on at once and sends its
// final status, if any, once its pipe is closed.
func (p *initProc) relay(r *os.File) chan Status {
	ch := make(chan Status, 1)
	go func() {
		defer r.Close()
		ch <- ReadStatus(r, p.report, "the sandbox ended before its command started (the stderr log says why)")
	}()
	return ch
}

// wait forwards signals until the main command is gone (and, relaying, its
// status pipe is closed), reports how it ended and returns the exit code.
func (p *initProc) wait(mainExit <-chan unix.WaitStatus, relayed chan Status) int {
	var ws *unix.WaitStatus
	var final Status
	for ws == nil || relayed != nil {
		select {
		case sig := <-p.sigs:
			if !p.cfg.NoSignals {
				_ = unix.Kill(-1, sig.(syscall.Signal))
			}
		case w := <-mainExit:
			ws, mainExit = &w, nil
		case final = <-relayed:
			relayed = nil
		}
	}
	if !final.Final() {
		final = statusOf(*ws)
	}
	p.report(final)
	return final.exitCode()
}

// startForwarders starts the port forwarding halves that cfg asks for.
func (p *initProc) startForwarders() error {
	for _, fw := range p.cfg.Forwards {
		f := os.NewFile(uintptr(fw.ListenFD), "listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("init: inherited listener %d: %w", fw.ListenFD, err)
		}
		go forwardTCP(ln, fw.Socket)
	}
	for _, sv := range p.cfg.Serves {
		_ = os.Remove(sv.Socket) // a socket left by the previous run
		ln, err := net.Listen("unix", sv.Socket)
		if err != nil {
			return fmt.Errorf("init: listen on %s: %w", sv.Socket, err)
		}
		go forwardUnix(ln, sv.Target)
	}
	return nil
}
