package procfs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	// Fields 3..22 after the command name; 12345 is the start time (22).
	const rest = " S 1 4242 4243 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 50"
	want := Stat{State: 'S', PPID: 1, PGrp: 4242, Session: 4243, StartTime: 12345}
	zombie := want
	zombie.State = 'Z'
	tests := []struct {
		name string
		line string
		want Stat
	}{
		{"plain", "4243 (sleep)" + rest, want},
		{"spaces and parentheses in the name", "4243 (a) (b c)" + rest, want},
		{"zombie", "4243 (x)" + " Z" + rest[2:], zombie},
		{"no fields after the start time", "4243 (sleep)" + rest[:len(rest)-len(" 1000 50")], want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for _, bad := range []string{
		"", "4243 sleep S 1", "4243 (sleep) S 1 2 3", "4243 (sleep)" + rest[:len(rest)-20],
		"4243 (sleep) SS" + rest[2:], "4243 (sleep) 1" + rest[2:], "4243 (sleep) S x" + rest[4:],
	} {
		_, err := ParseStat([]byte(bad))
		assert.ErrorIs(t, err, ErrMalformed, "%q", bad)
	}
}

func TestZombie(t *testing.T) {
	for state, want := range map[byte]bool{'R': false, 'S': false, 'D': false, 'T': false, 'Z': true, 'X': true, 'x': true} {
		assert.Equal(t, want, Stat{State: state}.Zombie(), "%c", state)
	}
}

func TestParseNSpid(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    []int
		wantErr bool
	}{
		{"one namespace", "Name:\tsleep\nNSpid:\t4243\nNSpgid:\t4243\n", []int{4243}, false},
		{"init of a namespace", "Pid:\t4243\nNSpid:\t4243\t1\n", []int{4243, 1}, false},
		{"old kernel", "Name:\tsleep\nPid:\t4243\n", []int{0}, false},
		{"empty", "NSpid:\t\n", nil, true},
		{"not a number", "NSpid:\t42x\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNSpid([]byte(tt.status))
			if tt.wantErr {
				assert.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSocketInode(t *testing.T) {
	tests := []struct {
		link string
		want uint64
		ok   bool
	}{
		{"socket:[12345]", 12345, true},
		{"socket:[0]", 0, true},
		{"pipe:[12345]", 0, false},
		{"/dev/null", 0, false},
		{"socket:[12345", 0, false},
		{"socket:[x]", 0, false},
		{"socket:[]", 0, false},
	}
	for _, tt := range tests {
		got, ok := SocketInode(tt.link)
		assert.Equal(t, tt.ok, ok, tt.link)
		assert.Equal(t, tt.want, got, tt.link)
	}
}

// kernelHex formats addr as the kernel prints it in /proc/net/tcp: 32-bit
// words in host byte order.
func kernelHex(ap netip.AddrPort) string {
	b := ap.Addr().AsSlice()
	var s strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&s, "%08X", binary.NativeEndian.Uint32(b[i:]))
	}
	return fmt.Sprintf("%s:%04X", s.String(), ap.Port())
}

func TestParseTCPListeners(t *testing.T) {
	line := func(local netip.AddrPort, state string, inode int) string {
		return fmt.Sprintf("   0: %s 00000000:0000 %s 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 100 0 0 10 0",
			kernelHex(local), state, inode)
	}
	v4 := netip.MustParseAddrPort("127.0.0.1:8080")
	any4 := netip.MustParseAddrPort("0.0.0.0:3000")
	v6 := netip.MustParseAddrPort("[::1]:4000")
	mapped := netip.MustParseAddrPort("[::ffff:127.0.0.1]:5000")
	table := strings.Join([]string{
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
		line(v4, tcpListen, 11),
		line(any4, tcpListen, 12),
		line(v6, tcpListen, 13),
		line(mapped, tcpListen, 14),
		line(netip.MustParseAddrPort("127.0.0.1:9000"), "01", 15), // established, not listening
		line(netip.MustParseAddrPort("127.0.0.1:9001"), tcpListen, 0),
		"   0: 0100007F:XYZW 00000000:0000 0A 0 0 0 0 0 16",
		"garbage",
	}, "\n")
	assert.Equal(t, []Listener{{11, v4}, {12, any4}, {13, v6}, {14, mapped}}, ParseTCPListeners([]byte(table)))
	assert.Empty(t, ParseTCPListeners(nil))
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 7 1000 50"))
	f.Add([]byte("2 ()) R ) 1 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStat(b)
		if err == nil && !isLetter(st.State) {
			t.Fatalf("parsed %q without a state", b)
		}
	})
}

func FuzzParseTCPListeners(f *testing.F) {
	f.Add([]byte("   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7 1"))
	f.Add([]byte("   0: 00000000000000000000000001000000:0FA0 00000000000000000000000000000000:0000 0A 0 0 0 0 0 7"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, l := range ParseTCPListeners(b) {
			if !l.Addr.Addr().IsValid() || l.Inode == 0 {
				t.Fatalf("listener %+v from %q", l, b)
			}
		}
	})
}
