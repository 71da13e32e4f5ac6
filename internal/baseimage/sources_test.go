package baseimage

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHostMirror(t *testing.T) {
	for _, tc := range []struct {
		dir, suite, want string
	}{
		// deb822: the security stanza comes first and is passed over; a
		// suite on a continuation line counts; the trailing slash goes.
		{"apt-deb822", "bookworm", "http://ftp.de.debian.org/debian"},
		{"apt-deb822", "bookworm-updates", "http://ftp.de.debian.org/debian"},
		// One-line: deb-src, another suite and options in brackets.
		{"apt-oneline", "bookworm", "http://mirror.example.net/debian"},
		// Files in apt's order; third-party suites and names apt ignores
		// are passed over.
		{"apt-mixed", "bookworm", "https://mirror.example.com/debian"},
		{"apt-disabled", "bookworm", "http://on.example.org/debian"},
		{"apt-options", "bookworm", "http://opts.example.org/debian"},
		// Another suite, no main, schemes debootstrap cannot use.
		{"apt-none", "bookworm", DefaultMirror},
		{"apt-deb822", "trixie", DefaultMirror},
		{"no-such-dir", "bookworm", DefaultMirror},
	} {
		t.Run(tc.dir+"/"+tc.suite, func(t *testing.T) {
			assert.Equal(t, tc.want, HostMirror(filepath.Join("testdata", tc.dir), tc.suite))
		})
	}
}

func TestParseOneLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       []aptSource
	}{
		{"plain", "deb http://a/debian bookworm main contrib",
			[]aptSource{{Types: []string{"deb"}, URIs: []string{"http://a/debian"}, Suites: []string{"bookworm"}, Components: []string{"main", "contrib"}, Enabled: true}}},
		{"options", "deb [arch=amd64 signed-by=/k.gpg] http://a/debian bookworm main",
			[]aptSource{{Types: []string{"deb"}, URIs: []string{"http://a/debian"}, Suites: []string{"bookworm"}, Components: []string{"main"}, Enabled: true}}},
		{"flat repository", "deb http://a/repo ./",
			[]aptSource{{Types: []string{"deb"}, URIs: []string{"http://a/repo"}, Suites: []string{"./"}, Components: []string{}, Enabled: true}}},
		{"comment", "# deb http://a/debian bookworm main", nil},
		{"unclosed options", "deb [arch=amd64 http://a/debian bookworm main", nil},
		{"too short", "deb http://a/debian", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, parseOneLine(strings.NewReader(tc.line)))
		})
	}
}

func TestParseDeb822(t *testing.T) {
	in := "Types: deb\nURIs: http://a/debian\nSuites: bookworm\n  bookworm-updates\nComponents: main\n\n\n" +
		"# only a comment\n\n" +
		"Types: deb-src\nURIs: http://b/debian\nSuites: trixie\nComponents: main\nEnabled: no\n"
	assert.Equal(t, []aptSource{
		{Types: []string{"deb"}, URIs: []string{"http://a/debian"}, Suites: []string{"bookworm", "bookworm-updates"}, Components: []string{"main"}, Enabled: true},
		{Types: []string{"deb-src"}, URIs: []string{"http://b/debian"}, Suites: []string{"trixie"}, Components: []string{"main"}, Enabled: false},
	}, parseDeb822(strings.NewReader(in)))
}
