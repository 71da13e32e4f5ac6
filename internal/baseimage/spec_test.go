package baseimage

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func baseSpec() Spec {
	return Spec{
		Suite:    "bookworm",
		Arch:     "amd64",
		Packages: []string{"bash", "git"},
		Setup:    "true",
		Mirror:   DefaultMirror,
	}
}

func TestHashChangesWithEveryInput(t *testing.T) {
	base := baseSpec().Hash()
	for _, tc := range []struct {
		name   string
		change func(*Spec)
	}{
		{"suite", func(s *Spec) { s.Suite = "trixie" }},
		{"arch", func(s *Spec) { s.Arch = "arm64" }},
		{"a package more", func(s *Spec) { s.Packages = append(s.Packages, "curl") }},
		{"a package less", func(s *Spec) { s.Packages = s.Packages[:1] }},
		{"a package renamed", func(s *Spec) { s.Packages = []string{"bash", "git-man"} }},
		{"setup script", func(s *Spec) { s.Setup = "true\n" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.change(&s)
			assert.NotEqual(t, base, s.Hash())
		})
	}
}

func TestHashIgnoresWhatDoesNotChangeTheImage(t *testing.T) {
	base := baseSpec().Hash()
	for _, tc := range []struct {
		name   string
		change func(*Spec)
	}{
		{"mirror", func(s *Spec) { s.Mirror = "http://ftp.de.debian.org/debian" }},
		{"package order", func(s *Spec) { s.Packages = []string{"git", "bash"} }},
		{"a package named twice", func(s *Spec) { s.Packages = []string{"bash", "git", "bash"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.change(&s)
			assert.Equal(t, base, s.Hash())
		})
	}
}

func TestHashKeysTheFormatVersion(t *testing.T) {
	// The hash is of a document naming the format: pin it, so that a
	// change of the document without a new formatVersion shows here.
	assert.Equal(t, 1, formatVersion)
	assert.Len(t, baseSpec().Hash(), 64)
	assert.Equal(t, Repository+":"+baseSpec().Hash()[:16], Tag(baseSpec().Hash()))
}

func TestValidate(t *testing.T) {
	require.NoError(t, baseSpec().Validate())
	for _, tc := range []struct {
		name   string
		change func(*Spec)
	}{
		{"no suite", func(s *Spec) { s.Suite = "" }},
		{"suite with a slash", func(s *Spec) { s.Suite = "../x" }},
		{"arch with a blank", func(s *Spec) { s.Arch = "amd 64" }},
		{"package that is an option", func(s *Spec) { s.Packages = []string{"--foreign"} }},
		{"package list as one", func(s *Spec) { s.Packages = []string{"bash,git"} }},
		{"empty setup", func(s *Spec) { s.Setup = "" }},
		{"mirror without a scheme", func(s *Spec) { s.Mirror = "deb.debian.org/debian" }},
		{"ftp mirror", func(s *Spec) { s.Mirror = "ftp://deb.debian.org/debian" }},
		{"http mirror without a host", func(s *Spec) { s.Mirror = "http:///debian" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.change(&s)
			err := s.Validate()
			require.Error(t, err)
			assert.Equal(t, provider.InvalidArgument, provider.Code(err))
		})
	}
	t.Run("file mirror", func(t *testing.T) {
		s := baseSpec()
		s.Mirror = "file:///srv/debian"
		assert.NoError(t, s.Validate())
	})
}

func TestFillKeepsWhatIsSet(t *testing.T) {
	s := baseSpec()
	assert.Equal(t, s, s.Fill())
	filled := Spec{}.Fill()
	assert.NotEmpty(t, filled.Suite)
	assert.NotEmpty(t, filled.Mirror)
	assert.Equal(t, DebianArch(goruntime.GOARCH), filled.Arch)
	assert.Equal(t, DefaultPackages, filled.Packages)
	assert.Equal(t, DefaultSetup, filled.Setup)
	require.NoError(t, filled.Validate())
}

func TestDebianArch(t *testing.T) {
	for goarch, want := range map[string]string{"amd64": "amd64", "arm64": "arm64", "386": "i386", "arm": "armhf", "ppc64le": "ppc64el"} {
		t.Run(goarch, func(t *testing.T) { assert.Equal(t, want, DebianArch(goarch)) })
	}
}

func TestHostSuite(t *testing.T) {
	for _, tc := range []struct {
		name, osRelease, want string
	}{
		{"debian", "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\nVERSION_CODENAME=trixie\n", "trixie"},
		{"quoted", "ID=\"debian\"\nVERSION_CODENAME=\"bookworm\"\n", "bookworm"},
		{"sid names no codename", "ID=debian\nPRETTY_NAME=\"Debian GNU/Linux trixie/sid\"\n", DefaultSuite},
		{"ubuntu", "ID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n", DefaultSuite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "os-release")
			require.NoError(t, os.WriteFile(p, []byte(tc.osRelease), 0o644))
			assert.Equal(t, tc.want, HostSuite(p))
		})
	}
	t.Run("missing", func(t *testing.T) {
		assert.Equal(t, DefaultSuite, HostSuite(filepath.Join(t.TempDir(), "none")))
	})
}
