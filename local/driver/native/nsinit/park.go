package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ControlFD is the descriptor a parked init (Config.Park) is handed its
// command on: one end of a unix stream socket.
const ControlFD = 4

// maxRequest bounds what a parked init reads: far more than any
// environment and command line a spawn may carry (Linux caps those at a
// quarter of the stack limit, in practice 2 MiB), far less than memory.
const maxRequest = 8 << 20

// Request is what a parked init is handed: its command and how to run it.
type Request struct {
	// Config is the command, with its flags. What needs the init's set-up
	// before it parks (MountProc, Probe) or descriptors of its own
	// (Forwards, KeepFDs) is refused.
	Config Config
	// Env is the command's environment.
	Env []string
	// Show are the entries the init's own environment (/proc/PID/environ)
	// shows from the moment it accepts the request, before it forks:
	// whatever marks a scan of /proc finds a workload's init by. They
	// replace what the init was started with, which must be at least as
	// long (see Reserve).
	Show []string
	// Stdout and Stderr become the init's, and so the command's.
	Stdout, Stderr *os.File
	// Cwd, an absolute path, becomes the init's working directory before
	// its binds, as a cold init's is the one it was started in: the
	// command's unless Config.Dir names another. (A descriptor of the
	// directory would not do: opened in the runtime's mount namespace, it
	// is unreachable from the init's, and getcwd fails there.)
	Cwd string
}

// Reserve is an environment entry named name whose length is enough for
// every entry of show and its NUL: what a parked init is started with, so
// that a Request's Show fits where the kernel keeps the init's environment.
func Reserve(name string, show []string) string {
	n := 0
	for _, e := range show {
		n += len(e) + 1
	}
	return pad(name, n)
}

// pad is an entry named name that, with its NUL, takes n bytes, or as few
// over n as its name allows.
func pad(name string, n int) string {
	return name + "=" + strings.Repeat("-", max(n-len(name)-2, 0))
}

// Send hands r to the parked init at the other end of conn. An error means
// the init may not have it whole, and the caller must not count on it.
func (r Request) Send(conn *net.UnixConn) error {
	payload, err := r.encode()
	if err != nil {
		return err
	}
	return send(conn, payload, r.Stdout, r.Stderr)
}

// encode is r's payload: its header, then the init's flags and command.
func (r Request) encode() ([]byte, error) {
	return encodeFields(append(r.header(), r.Config.Flags()...))
}

// header is what every message carries first: Cwd, the counts of Show and
// Env, then Show and Env. A Request's flags follow; a hand-off to a parked
// workload (see AwaitSandbox) is the header alone.
func (r Request) header() []string {
	fields := append([]string{r.Cwd, strconv.Itoa(len(r.Show)), strconv.Itoa(len(r.Env))}, r.Show...)
	return append(fields, r.Env...)
}

// send writes payload, length first, with stdout and stderr as SCM_RIGHTS
// on its first byte.
func send(conn *net.UnixConn, payload []byte, stdout, stderr *os.File) error {
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	msg = append(msg, payload...)
	rights := unix.UnixRights(int(stdout.Fd()), int(stderr.Fd()))
	// One send wakes the reader once; a stream socket may take less of it.
	n, _, err := conn.WriteMsgUnix(msg, rights, nil)
	if err == nil && n < len(msg) {
		_, err = conn.Write(msg[n:])
	}
	return err
}

// encodeFields writes fields NUL-terminated. A string with a NUL, which no
// command line or environment can hold, is an error.
func encodeFields(fields []string) ([]byte, error) {
	var b bytes.Buffer
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, errors.New("request: a NUL byte in an argument, path or variable")
		}
		b.WriteString(f)
		b.WriteByte(0)
	}
	return b.Bytes(), nil
}

func decode(payload []byte) (Request, error) {
	r, rest, err := decodeHeader(payload)
	if err != nil {
		return r, err
	}
	cfg, err := parse(rest)
	if err != nil {
		return r, err
	}
	if cfg.MountProc || cfg.Probe || cfg.Park != "" || len(cfg.Forwards) > 0 || len(cfg.KeepFDs) > 0 {
		return r, errors.New("request: -mount-proc, -probe, -park, -forward and -keep-fd are for an init's own command line")
	}
	r.Config = cfg
	return r, nil
}

// decodeHeader reads what header wrote, and returns the fields after it.
func decodeHeader(payload []byte) (r Request, rest []string, err error) {
	if len(payload) == 0 || payload[len(payload)-1] != 0 {
		return r, nil, errors.New("request: not NUL-terminated")
	}
	fields := strings.Split(string(payload[:len(payload)-1]), "\x00")
	if len(fields) < 3 {
		return r, nil, errors.New("request: no directory and counts")
	}
	if r.Cwd = fields[0]; !filepath.IsAbs(r.Cwd) {
		return r, nil, fmt.Errorf("request: directory %q is not absolute", r.Cwd)
	}
	nShow, err1 := strconv.Atoi(fields[1])
	nEnv, err2 := strconv.Atoi(fields[2])
	fields = fields[3:]
	if err1 != nil || err2 != nil || nShow < 0 || nEnv < 0 || nShow+nEnv > len(fields) {
		return r, nil, errors.New("request: bad counts")
	}
	r.Show, r.Env = fields[:nShow], fields[nShow:nShow+nEnv]
	return r, fields[nShow+nEnv:], nil
}

// errNoRequest: the control socket closed before a request began; the
// runtime let the parked init go.
var errNoRequest = errors.New("no request")

// receive reads the one request a parked init gets, makes the descriptors
// it carries the init's stdout and stderr, and enters its directory.
func receive() (Request, error) {
	ctl := os.NewFile(ControlFD, "control")
	defer ctl.Close()
	payload, err := readMessage(ctl)
	if err != nil {
		return Request{}, err
	}
	req, err := decode(payload)
	if err != nil {
		return req, err
	}
	if err := os.Chdir(req.Cwd); err != nil {
		return req, fmt.Errorf("enter the request's directory: %w", err)
	}
	return req, nil
}

// readMessage reads the one message send writes on the socket ctl, makes
// the descriptors it carries fds 1 and 2, and returns the payload;
// errNoRequest if the socket closed before it began.
func readMessage(ctl *os.File) ([]byte, error) {
	// Room for any request a sandbox's start makes in one read.
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(2*4))
	n, oobn, err := recvmsg(int(ctl.Fd()), buf, oob)
	if err != nil {
		return nil, fmt.Errorf("receive the request: %w", err)
	}
	if n == 0 {
		return nil, errNoRequest
	}
	if err := takeStdio(oob[:oobn]); err != nil {
		return nil, err
	}
	if n < 4 {
		if _, err := io.ReadFull(ctl, buf[n:4]); err != nil {
			return nil, fmt.Errorf("receive the request: %w", err)
		}
		n = 4
	}
	size := int(binary.BigEndian.Uint32(buf))
	if size > maxRequest || n-4 > size {
		return nil, fmt.Errorf("receive the request: it says %d bytes (at most %d) and brings %d or more", size, maxRequest, n-4)
	}
	payload := make([]byte, size)
	copy(payload, buf[4:n])
	if _, err := io.ReadFull(ctl, payload[n-4:]); err != nil {
		return nil, fmt.Errorf("receive the request: %w", err)
	}
	return payload, nil
}

func recvmsg(fd int, p, oob []byte) (n, oobn int, err error) {
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, p, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			return n, oobn, err
		}
	}
}

// takeStdio makes the two descriptors of the request's control message fds
// 1 and 2.
func takeStdio(oob []byte) error {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("receive the request: want one control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		return fmt.Errorf("receive the request: %w", err)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if len(fds) != 2 {
		return fmt.Errorf("receive the request: want stdout and stderr, got %d descriptors", len(fds))
	}
	for i, fd := range fds {
		if err := unix.Dup3(fd, i+1, 0); err != nil {
			return fmt.Errorf("take the request's output: %w", err)
		}
	}
	return nil
}

// environArea is where the kernel keeps this process's environment, the
// bytes between env_start and env_end (fields 50 and 51 of
// /proc/self/stat) that /proc/PID/environ shows. /proc/self/mem reaches
// that memory whatever its protection, and a process may always write its
// own. A parked init opens it before it parks, so that showing a
// sandbox's marks costs one write.
type environArea struct {
	mem        *os.File
	start, end uint64
}

func openEnvironArea() (*environArea, error) {
	start, end, err := envBounds()
	if err != nil {
		return nil, err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return &environArea{mem: mem, start: start, end: end}, nil
}

// show rewrites the area, in place, with entries, NUL-padded.
func (a *environArea) show(entries []string) error {
	b := make([]byte, 0, a.end-a.start)
	for _, e := range entries {
		b = append(append(b, e...), 0)
	}
	if uint64(len(b)) > a.end-a.start {
		return fmt.Errorf("the marks need %d bytes, the environment holds %d", len(b), a.end-a.start)
	}
	b = b[:a.end-a.start] // zeroed by make
	_, err := a.mem.WriteAt(b, int64(a.start))
	return err
}

func (a *environArea) close() { a.mem.Close() }

func envBounds() (start, end uint64, err error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	// Field n is f[n-3], counted from the command name's last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 51-3+1 {
		return 0, 0, errors.New("/proc/self/stat has no env_start and env_end (Linux 3.5)")
	}
	start, err1 := strconv.ParseUint(f[50-3], 10, 64)
	end, err2 := strconv.ParseUint(f[51-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil || end < start {
		return 0, 0, fmt.Errorf("/proc/self/stat: env bounds %q %q", f[50-3], f[51-3])
	}
	return start, end, nil
}
