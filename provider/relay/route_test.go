package relay

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		host   string
		want   route
		wantOK bool
	}{
		{"3000-abc.localhost:4030", route{port: 3000, id: "abc"}, true},
		{"3000-abc.localhost", route{port: 3000, id: "abc"}, true},
		{"3000-ABC.LOCALHOST:4030", route{port: 3000, id: "abc"}, true},
		{"3000-abc.localhost.:4030", route{port: 3000, id: "abc"}, true},
		{"8080-3c8d4f0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f.localhost", route{port: 8080, id: "3c8d4f0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f"}, true},
		{"1-a.localhost", route{port: 1, id: "a"}, true},
		{"65535-a_b.localhost", route{port: 65535, id: "a_b"}, true},
		{"localhost:4030", route{}, false},
		{"127.0.0.1:4030", route{}, false},
		{"3000-abc.evil.com", route{}, false},
		{"x.3000-abc.localhost", route{}, false},
		{"3000-abc.x.localhost", route{}, false},
		{"0-abc.localhost", route{}, false},
		{"03000-abc.localhost", route{}, false},
		{"65536-abc.localhost", route{}, false},
		{"123456-abc.localhost", route{}, false},
		{"3000.localhost", route{}, false},
		{"3000-.localhost", route{}, false},
		{"3000--abc.localhost", route{}, false},
		{"-3000-abc.localhost", route{}, false},
		{"+300-abc.localhost", route{}, false},
		{"3000-a%62c.localhost", route{}, false},
		{"", route{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, ok := parseHost(tt.host, "localhost")
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseHostOwnDomain(t *testing.T) {
	got, ok := parseHost("3000-abc.preview.example.com", "preview.example.com")
	assert.True(t, ok)
	assert.Equal(t, route{port: 3000, id: "abc"}, got)
	_, ok = parseHost("3000-abc.localhost", "preview.example.com")
	assert.False(t, ok, "only the configured domain routes by host")
}

func TestParsePath(t *testing.T) {
	tests := []struct {
		path     string
		want     route
		wantRest string
		wantOK   bool
	}{
		{"/3000-abc/", route{3000, "abc", "/3000-abc"}, "/", true},
		{"/3000-abc", route{3000, "abc", "/3000-abc"}, "", true},
		{"/3000-abc/x/y%2Fz", route{3000, "abc", "/3000-abc"}, "/x/y%2Fz", true},
		{"/3000-My.Sandbox_1/x", route{3000, "My.Sandbox_1", "/3000-My.Sandbox_1"}, "/x", true},
		{"/", route{}, "", false},
		{"", route{}, "", false},
		{"/metrics", route{}, "", false},
		{"/3000/abc", route{}, "", false},
		{"//3000-abc/", route{}, "", false},
		{"/3000-%61bc/", route{}, "", false},
		{"/3000-.abc/", route{}, "", false},
		{"/99999-abc/", route{}, "", false},
		{"/3000-" + strings.Repeat("a", maxIDLen+1) + "/", route{}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, rest, ok := parsePath(tt.path)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantRest, rest)
		})
	}
}

func TestIsOwnHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:4030": true, "localhost:4030": true, "[::1]:4030": true, "[::1]": true, "127.1.2.3": true,
		"relay.example.com": true, "evil.com:4030": false, "10.0.0.1:4030": false, "": false,
		// The edge cases internal/netguard decides.
		"localhost.:4030": true, "LOCALHOST": true, "[::ffff:127.0.0.1]:4030": true, "Relay.Example.COM.:80": true,
		"127.1:4030": false, "0x7f.1": false, "127.0.0.1.:4030": false, "[localhost]": false, "::1": false,
		// Under localhost is where sandboxes are, not the relay.
		"x.localhost:4030": false,
	} {
		assert.Equal(t, want, isOwnHost(host, "relay.example.com"), host)
	}
}

// FuzzRoute checks Host and path routing: nothing panics, and whatever
// routes names a valid port and id that read back the same, with the path
// split exactly at the sandbox segment.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{
		"3000-abc.localhost:4030", "/3000-abc/x", "/3000-abc", "65535-Z.localhost", "0-a", "/1-a/b/../c",
		"3000-a.b.localhost", "[::1]:80", "/%2F", "99999999999999999999-a.localhost", "3000-\x00.localhost",
	} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, host, path string) {
		if rt, ok := parseHost(host, "localhost"); ok {
			checkRoute(t, rt)
			assert.Empty(t, rt.prefix)
			assert.Equal(t, strings.ToLower(rt.id), rt.id, "host routing ids are lowercase")
			again, ok := parseHost(label(rt)+".localhost:1", "localhost")
			assert.True(t, ok)
			assert.Equal(t, rt, again)
		}
		if rt, rest, ok := parsePath(path); ok {
			checkRoute(t, rt)
			assert.Equal(t, "/"+label(rt), rt.prefix)
			assert.Equal(t, path, rt.prefix+rest, "the path splits at the sandbox segment")
			assert.True(t, rest == "" || rest[0] == '/', "the upstream path is absolute: %q", rest)
		}
	})
}

func checkRoute(t *testing.T, rt route) {
	t.Helper()
	assert.True(t, rt.port >= 1 && rt.port <= 65535, "port %d", rt.port)
	assert.True(t, validID(rt.id), "id %q", rt.id)
	assert.NotContains(t, rt.id, "/")
	port, id, ok := parseLabel(label(rt))
	assert.True(t, ok)
	assert.Equal(t, rt.port, port)
	assert.Equal(t, rt.id, id)
}

func label(rt route) string { return strconv.Itoa(rt.port) + "-" + rt.id }
