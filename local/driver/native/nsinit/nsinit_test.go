package nsinit

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestFlagsRoundTrip(t *testing.T) {
	tests := []Config{
		{Path: "/bin/sh", Args: []string{"sh", "-c", "exit 3"}},
		{Path: "/bin/sh", Args: []string{"sh", "--", "-not-a-flag"}, NoSignals: true, MountProc: true},
		{Path: "/usr/bin/bwrap", Args: []string{"bwrap", "--", "x"}, Relay: true, Forwards: []Forward{{4, "/a/fwd.sock"}}, KeepFDs: []int{5}},
		{Path: "/usr/bin/bwrap", Args: []string{"bwrap", "--", "x"}, Relay: true,
			Forwards: []Forward{{4, "/a,b/fwd.sock"}, {6, "/a/fwd-3000.sock"}}, KeepFDs: []int{5}},
		{Path: "/bin/true", Args: []string{"true"}, Serves: []Serve{{"/run/s.sock", "127.0.0.1:4000"}, {"/run/s-3000.sock", "127.0.0.1:3000"}}},
		{MountProc: true, Park: "PARKED="},
		{MountProc: true, Park: "PARKED=", Path: "/opt/toolbox", Args: []string{"toolbox", "--root", "/w"}},
	}
	for _, want := range tests {
		t.Run(strings.Join(want.Flags(), " "), func(t *testing.T) {
			got, err := parse(want.Flags())
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for name, args := range map[string][]string{
		"no command":               {"--"},
		"no argv0":                 {"--", "/bin/sh"},
		"forward without socket":   {"-forward", "4", "--", "/bin/sh", "sh"},
		"forward of the status fd": {"-forward", "3,/s", "--", "/bin/sh", "sh"},
		"serve without target":     {"-serve", "/s", "--", "/bin/sh", "sh"},
		"serve with an empty one":  {"-serve", "/s,", "--", "/bin/sh", "sh"},
		"keep the status fd":       {"-keep-fd", "3", "--", "/bin/sh", "sh"},
		"unknown flag":             {"-frobnicate", "--", "/bin/sh", "sh"},
		"parked without argv0":     {"-park", "PARKED=", "--", "/bin/sh"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(args)
			assert.Error(t, err)
		})
	}
}

func TestStatusLines(t *testing.T) {
	tests := []struct {
		s    Status
		code int
	}{
		{Status{Started: true}, exitSetup},
		{Status{Err: "start sh: no such file or directory"}, exitSetup},
		{Status{Exited: true, Code: 0}, 0},
		{Status{Exited: true, Code: 3}, 3},
		{Status{Signal: syscall.SIGTERM}, 128 + 15},
	}
	for _, tt := range tests {
		t.Run(tt.s.line(), func(t *testing.T) {
			got, ok := ParseStatus(tt.s.line())
			require.True(t, ok)
			assert.Equal(t, tt.s, got)
			assert.Equal(t, tt.code, tt.s.exitCode())
		})
	}
	for _, bad := range []string{"", "exit", "exit x", "exit 256", "signal 0", "start now", "error", "bye"} {
		_, ok := ParseStatus(bad)
		assert.False(t, ok, "%q", bad)
	}
	assert.Equal(t, "error a b", Status{Err: "a\nb"}.line(), "one report, one line")
}

func TestReadStatus(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		start     Status
		final     Status
		finalSeen bool
	}{
		{"ran and exited", "start\nexit 3\n", Status{Started: true}, Status{Exited: true, Code: 3}, true},
		{"killed", "start\nsignal 9\n", Status{Started: true}, Status{Signal: syscall.SIGKILL}, true},
		{"never started", "error start x: permission denied\nexit 125\n", Status{Err: "start x: permission denied"}, Status{Exited: true, Code: 125}, true},
		{"died silently", "", Status{Err: "gone"}, Status{}, false},
		{"noise skipped", "hello\nstart\n\nexit 0\n", Status{Started: true}, Status{Exited: true, Code: 0}, true},
		{"killed after start", "start\n", Status{Started: true}, Status{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var start []Status
			final := ReadStatus(strings.NewReader(tt.in), func(s Status) { start = append(start, s) }, "gone")
			assert.Equal(t, []Status{tt.start}, start, "exactly one start report")
			assert.Equal(t, tt.final, final)
			assert.Equal(t, tt.finalSeen, final.Final())
		})
	}
}

func TestKeep(t *testing.T) {
	none := ^uintptr(0)
	assert.Equal(t, []uintptr{0, 1, 2, 7, none, 5}, keep([]uintptr{0, 1, 2, 7}, []int{5}))
	assert.Equal(t, []uintptr{0, 1, 2, none, 4}, keep([]uintptr{0, 1, 2}, []int{4}))
}

// TestForwarding runs both halves of a forward in this process: TCP in,
// through a unix socket at a path too long for a socket address, to a TCP
// server, with the acknowledgement that Probe relies on.
func TestForwarding(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	require.NoError(t, os.MkdirAll(long, 0o700))
	sock := filepath.Join(long, "fwd.sock")
	require.Greater(t, len(sock), maxSunPath)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	assert.False(t, Probe(ctx, sock), "nothing listens yet")

	// The inner half listens where the sandbox sees a short path; here the
	// directory's own descriptor stands in for that.
	dfd, err := unix.Open(long, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(dfd)
	inner, err := net.Listen("unix", "/proc/self/fd/"+strconv.Itoa(dfd)+"/fwd.sock")
	require.NoError(t, err)
	defer inner.Close()

	target, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	targetAddr := target.Addr().String()
	target.Close() // nothing serves yet
	go forwardUnix(inner, targetAddr)
	assert.False(t, Probe(ctx, sock), "the target does not serve")

	target, err = net.Listen("tcp", targetAddr)
	require.NoError(t, err)
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client half-closes
				_, _ = c.Write([]byte("echo:" + string(b)))
			}()
		}
	}()
	assert.True(t, Probe(ctx, sock))

	outer, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer outer.Close()
	go forwardTCP(outer, sock)
	c, err := net.Dial("tcp", outer.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite(), "the half-close travels through")
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "echo:hello", string(got))
}

func TestRequestRoundTrip(t *testing.T) {
	tests := []Request{
		{Config: Config{Path: "/bin/sh", Args: []string{"sh", "-c", "exit 3"}, Dir: "/srv/a b"},
			Env: []string{"A=1", "EMPTY=", "MULTI=x\ny"}, Show: []string{"MARK=1", "ID=x"}, Cwd: "/srv/a b"},
		{Config: Config{Path: "/bin/true", Args: []string{"true", "", "--", "-x"}, NoSignals: true}, Env: []string{}, Show: []string{}, Cwd: "/"},
		{Config: Config{Path: "/bin/true", Args: []string{"true"}, Binds: []Bind{{"/a", "/b"}}, Relay: true}, Env: []string{"A=1"}, Show: []string{}, Cwd: "/x"},
	}
	for _, want := range tests {
		t.Run(strings.Join(want.Config.Args, " "), func(t *testing.T) {
			payload, err := want.encode()
			require.NoError(t, err)
			got, err := decode(payload)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// A parked workload's hand-off is a request's header alone.
func TestHandoffRoundTrip(t *testing.T) {
	want := Request{Cwd: "/srv/a b", Show: []string{"MARK=1"}, Env: []string{"A=1", "MULTI=x\ny", "EMPTY="}}
	payload, err := encodeFields(want.header())
	require.NoError(t, err)
	got, rest, err := decodeHeader(payload)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Empty(t, rest)
}

func TestDecodeRefuses(t *testing.T) {
	encode := func(fields ...string) []byte { return []byte(strings.Join(fields, "\x00") + "\x00") }
	for name, payload := range map[string][]byte{
		"empty":                {},
		"unterminated":         []byte("/\x000\x000\x00--\x00/bin/sh\x00sh"),
		"no counts":            encode("/"),
		"relative directory":   encode("srv", "0", "0", "--", "/bin/sh", "sh"),
		"counts beyond fields": encode("/", "2", "0", "A=1"),
		"negative count":       encode("/", "-1", "0", "--", "/bin/sh", "sh"),
		"no command":           encode("/", "0", "0", "--"),
		"park again":           encode("/", "0", "0", "-park", "PARKED="),
		"mount-proc":           encode("/", "0", "0", "-mount-proc", "--", "/bin/sh", "sh"),
		"an fd of its own":     encode("/", "0", "0", "-keep-fd", "5", "--", "/bin/sh", "sh"),
		"a listener":           encode("/", "0", "0", "-forward", "5,/s", "--", "/bin/sh", "sh"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decode(payload)
			assert.Error(t, err)
		})
	}
}

func TestEncodeRefusesNUL(t *testing.T) {
	for name, r := range map[string]Request{
		"argument": {Config: Config{Path: "/bin/sh", Args: []string{"sh", "a\x00b"}}},
		"path":     {Config: Config{Path: "/bin/s\x00h", Args: []string{"sh"}}},
		"dir":      {Config: Config{Path: "/bin/sh", Args: []string{"sh"}, Dir: "/a\x00b"}},
		"env":      {Config: Config{Path: "/bin/sh", Args: []string{"sh"}}, Env: []string{"A=\x00"}},
		"shown":    {Config: Config{Path: "/bin/sh", Args: []string{"sh"}}, Show: []string{"A=\x00"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.encode()
			assert.Error(t, err, "a NUL would split one field into two")
		})
	}
}

func TestReserveHoldsWhatItIsFor(t *testing.T) {
	for _, show := range [][]string{nil, {"A=1"}, {"SANDPLANE_ROOT=/some/root", "SANDPLANE_SANDBOX_ID=" + strings.Repeat("x", 128)}} {
		need := 0
		for _, e := range show {
			need += len(e) + 1
		}
		r := Reserve("SANDPLANE_PARKED", show)
		assert.True(t, strings.HasPrefix(r, "SANDPLANE_PARKED="))
		assert.GreaterOrEqual(t, len(r)+1, need, "%q for %q", r, show)
	}
}
