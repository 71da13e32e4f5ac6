package netguard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		host string
		want Class
		name string // Hostname's answer, when it is ok
	}{
		{"localhost", Localhost, "localhost"},
		{"localhost:4025", Localhost, "localhost"},
		{"localhost.", Localhost, "localhost"},
		{"localhost.:4025", Localhost, "localhost"},
		{"LOCALHOST", Localhost, "localhost"},
		{"LocalHost.:80", Localhost, "localhost"},
		{"localhost:", Localhost, "localhost"},
		{"4000-abc.localhost:4025", UnderLocalhost, "4000-abc.localhost"},
		{"4000-ABC.LOCALHOST.", UnderLocalhost, "4000-abc.localhost"},
		{"a.b.localhost", UnderLocalhost, "a.b.localhost"},
		{"my_host.localhost", UnderLocalhost, "my_host.localhost"},
		{"127.0.0.1", LoopbackIP, "127.0.0.1"},
		{"127.0.0.1:4025", LoopbackIP, "127.0.0.1"},
		{"127.255.1.2:1", LoopbackIP, "127.255.1.2"},
		{"[::1]", LoopbackIP, "::1"},
		{"[::1]:4025", LoopbackIP, "::1"},
		{"[0:0:0:0:0:0:0:1]:80", LoopbackIP, "::1"},
		{"[::ffff:127.0.0.1]:4025", LoopbackIP, "::ffff:127.0.0.1"},
		{"[::ffff:7f00:1]", LoopbackIP, "::ffff:127.0.0.1"},

		// Names and addresses that are not loopback.
		{"evil.com", NotLoopback, "evil.com"},
		{"evil.com:4025", NotLoopback, "evil.com"},
		{"localhost.evil.com", NotLoopback, "localhost.evil.com"},
		{"evillocalhost", NotLoopback, "evillocalhost"},
		{"10.0.0.1:80", NotLoopback, "10.0.0.1"},
		{"0.0.0.0", NotLoopback, "0.0.0.0"},
		{"[::]:80", NotLoopback, "::"},
		{"[::ffff:10.0.0.1]", NotLoopback, "::ffff:10.0.0.1"},
		// Forms a browser normalises to 127.0.0.1 before sending: not
		// addresses here, and names that are not localhost.
		{"127.1", NotLoopback, "127.1"},
		{"0x7f.1", NotLoopback, "0x7f.1"},
		{"0x7f000001", NotLoopback, "0x7f000001"},
		{"2130706433", NotLoopback, "2130706433"},
		{"0177.0.0.1", NotLoopback, "0177.0.0.1"},
		{"127.0.0.1.", NotLoopback, ""},
		{"\u212a.localhost", NotLoopback, ""}, // the Kelvin sign, which strings.ToLower makes a k

		// Values that name nothing.
		{"", NotLoopback, ""},
		{":4025", NotLoopback, ""},
		{"::1", NotLoopback, ""},
		{"::1:80", NotLoopback, ""},
		{"[::1", NotLoopback, ""},
		{"::1]", NotLoopback, ""},
		{"[::1]x", NotLoopback, ""},
		{"[::1]:x", NotLoopback, ""},
		{"[localhost]", NotLoopback, ""},
		{"[127.0.0.1]", NotLoopback, ""},
		{"[fe80::1%25lo]", NotLoopback, ""},
		{"[::1%lo]", NotLoopback, ""},
		{"localhost:abc", NotLoopback, ""},
		{"localhost:123456", NotLoopback, ""},
		{"localhost:80:80", NotLoopback, ""},
		{"localhost..", NotLoopback, ""},
		{".localhost", NotLoopback, ""},
		{"a..localhost", NotLoopback, ""},
		{"a b.localhost", NotLoopback, ""},
		{"user@localhost", NotLoopback, ""},
		{"localhost/", NotLoopback, ""},
		{"ü.localhost", NotLoopback, ""},
		{"\x00.localhost", NotLoopback, ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			assert.Equal(t, tt.want, Classify(tt.host))
			name, ok := Hostname(tt.host)
			assert.Equal(t, tt.name, name)
			assert.Equal(t, tt.name != "", ok)
		})
	}
}

func TestOrigin(t *testing.T) {
	tests := []struct {
		origin string
		class  Class
		ok     bool // LoopbackOrigin
	}{
		{"http://localhost:3000", Localhost, true},
		{"https://localhost", Localhost, true},
		{"http://LOCALHOST.:3000", Localhost, true},
		{"http://127.0.0.1:4025", LoopbackIP, true},
		{"http://[::1]:4025", LoopbackIP, true},
		{"http://[::ffff:127.0.0.1]", LoopbackIP, true},
		{"HTTP://localhost", Localhost, true}, // url.Parse lowercases the scheme
		// A preview page is a sandbox's own: loopback, but not trusted.
		{"http://3000-abc.localhost:4025", UnderLocalhost, false},
		{"null", NotLoopback, false},
		{"", NotLoopback, false},
		{"file://localhost", NotLoopback, false},
		{"ftp://localhost", NotLoopback, false},
		{"ws://localhost", NotLoopback, false},
		{"localhost:3000", NotLoopback, false},
		{"//localhost", NotLoopback, false},
		{"http://user@localhost", NotLoopback, false},
		{"http://localhost/", NotLoopback, false},
		{"http://localhost?x", NotLoopback, false},
		{"http://localhost#x", NotLoopback, false},
		{"http://evil.com", NotLoopback, false},
		{"http://localhost.evil.com", NotLoopback, false},
		{"http://127.1", NotLoopback, false},
		{"http://0x7f.1", NotLoopback, false},
		{"http://[::1", NotLoopback, false},
		{"http://localhost:abc", NotLoopback, false},
		{"http:localhost", NotLoopback, false},
	}
	for _, tt := range tests {
		t.Run(tt.origin, func(t *testing.T) {
			assert.Equal(t, tt.class, OriginClass(tt.origin))
			assert.Equal(t, tt.ok, LoopbackOrigin(tt.origin))
		})
	}
}

func TestListenLoopback(t *testing.T) {
	tests := []struct {
		addr    string
		want    bool
		wantErr bool
	}{
		{"127.0.0.1:4025", true, false},
		{"127.0.0.1:0", true, false},
		{"127.9.9.9:1", true, false},
		{"localhost:4025", true, false},
		{"[::1]:4025", true, false},
		{"[::ffff:127.0.0.1]:4025", true, false},
		{"0.0.0.0:4025", false, false},
		{":4025", false, false},
		{"[::]:4025", false, false},
		{"10.1.2.3:4025", false, false},
		{"example.com:4025", false, false},
		{"localhost.:4025", false, false},
		{"LOCALHOST:4025", false, false},
		{"x.localhost:4025", false, false},
		{"127.1:4025", false, false},
		{"[::1%lo]:4025", false, false},
		{"127.0.0.1", false, true},
		{"", false, true},
		{"[::1", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, err := ListenLoopback(tt.addr)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// FuzzClassify checks the rules against each other: nothing panics, a
// loopback Host has a Hostname, the Hostname of a Host classifies as the
// Host does (normalising twice changes nothing), and case never matters.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"localhost", "localhost.:4025", "4000-abc.localhost:4025", "127.0.0.1", "127.1", "0x7f.1",
		"[::1]:80", "[::ffff:127.0.0.1]", "[::1", "::1", "[localhost]", "evil.com", "", ":",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, hostport string) {
		c := Classify(hostport)
		name, ok := Hostname(hostport)
		if c.Loopback() && !ok {
			t.Fatalf("%q is %v but has no Hostname", hostport, c)
		}
		if !ok {
			return
		}
		again := name
		if strings.Contains(name, ":") {
			again = "[" + name + "]"
		}
		if c2 := Classify(again); c2 != c {
			t.Fatalf("%q is %v, its Hostname %q is %v", hostport, c, name, c2)
		}
		if n2, _ := Hostname(again); n2 != name {
			t.Fatalf("Hostname(%q) = %q, of that %q", hostport, name, n2)
		}
		if c3 := Classify(asciiUpper(hostport)); c3 != c {
			t.Fatalf("%q is %v, upper-cased %v", hostport, c, c3)
		}
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// FuzzOriginClass checks that an Origin's class is its host's: nothing
// panics, and a loopback Origin is http or https of a host that
// classifies the same on its own.
func FuzzOriginClass(f *testing.F) {
	for _, s := range []string{
		"http://localhost:3000", "https://127.0.0.1", "http://[::1]:80", "null", "file://localhost",
		"http://3000-abc.localhost:4025", "http://user@localhost", "http://localhost/", "HTTP://LOCALHOST.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, origin string) {
		c := OriginClass(origin)
		if LoopbackOrigin(origin) && c != LoopbackIP && c != Localhost {
			t.Fatalf("%q is a loopback origin of class %v", origin, c)
		}
		if !c.Loopback() {
			return
		}
		_, host, ok := strings.Cut(origin, "://")
		if !ok {
			t.Fatalf("%q is %v without a scheme", origin, c)
		}
		if scheme := asciiLower(origin[:len(origin)-len(host)-3]); scheme != "http" && scheme != "https" {
			t.Fatalf("%q is %v with scheme %q", origin, c, scheme)
		}
		if hc := Classify(host); hc != c {
			t.Fatalf("%q is %v, its host %q is %v", origin, c, host, hc)
		}
	})
}
