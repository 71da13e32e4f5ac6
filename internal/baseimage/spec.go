package baseimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"regexp"
	"runtime"
	"slices"

	"github.com/sandplane/sandplane/provider"
)

// formatVersion names the way a Spec becomes an image (the debootstrap
// variant, how the root filesystem is tarred, the image's configuration).
// Changing any of them bumps it, so that images made the old way stop
// counting as current.
const formatVersion = 1

// variant is debootstrap's package set before Packages: the required
// packages and apt, no more.
const variant = "minbase"

// Defaults for hosts that say nothing better.
const (
	// DefaultSuite is built when the host is not Debian.
	DefaultSuite = "bookworm"
	// DefaultMirror is Debian's redirector to a nearby mirror.
	DefaultMirror = "http://deb.debian.org/debian"
)

// User and Home are the unprivileged user of Daytona's default snapshot and
// its home, the sandbox's working directory.
const (
	User = "daytona"
	Home = "/home/" + User
)

// DefaultPackages are what Daytona's default snapshot offers that minbase
// lacks. python-is-python3 makes `python` work, as it does there.
var DefaultPackages = []string{
	"bash", "coreutils", "procps",
	"ca-certificates", "curl", "git",
	"python3", "python3-pip", "python-is-python3",
	"nodejs", "npm",
	// The toolbox's language servers (LSP) and TypeScript code-run.
	"python3-pylsp",
}

// NodeTools are installed globally with npm once the packages are: the
// TypeScript language server and ts-node, for the toolbox's LSP and
// TypeScript code-run. Pinned, so that the image hash says what is inside.
const NodeTools = "typescript@5.9.3 typescript-language-server@5.3.0 ts-node@10.9.2 @types/node@20.19.43"

// DefaultSetup runs as root in the finished root filesystem, under /bin/sh.
//
// Daytona's images let pip install into the system Python, which Debian
// refuses (PEP 668) while its EXTERNALLY-MANAGED marker is there. The apt
// lists and the host's resolver configuration and name, which debootstrap
// copies, are dropped: the engine provides /etc/resolv.conf and
// /etc/hostname, and `apt-get update` fetches fresh lists.
const DefaultSetup = `set -eu
useradd --create-home --home-dir ` + Home + ` --shell /bin/bash --uid 1000 --user-group ` + User + `
rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
if command -v update-ca-certificates >/dev/null; then update-ca-certificates; fi
if command -v npm >/dev/null; then
  npm install --global --no-audit --no-fund --loglevel=error ` + NodeTools + `
  npm cache clean --force
fi
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log /var/log/bootstrap.log
: > /etc/resolv.conf
: > /etc/hostname
`

// Spec is what to build. Zero fields take the host's (Suite, Mirror, Arch)
// or the defaults (Packages, Setup): see Fill.
type Spec struct {
	// Suite is the Debian release's codename, bookworm for example.
	Suite string
	// Arch is the Debian architecture, amd64 for example. It must be the
	// host's: the packages' maintainer scripts run here.
	Arch string
	// Packages are installed with apt on top of minbase, without their
	// recommendations.
	Packages []string
	// Setup is a /bin/sh script run as root in the root filesystem once the
	// packages are installed.
	Setup string
	// Mirror is the Debian archive to download from (http, https or file).
	// It is not part of the Hash: it decides where the packages come from,
	// not what they are.
	Mirror string
}

// Fill returns s with its zero fields set: Suite and Mirror from the host's
// /etc/os-release and apt sources (HostSuite, HostMirror), Arch from the
// running binary, Packages and Setup the defaults.
func (s Spec) Fill() Spec {
	if s.Suite == "" {
		s.Suite = HostSuite("/etc/os-release")
	}
	if s.Mirror == "" {
		s.Mirror = HostMirror("/etc/apt", s.Suite)
	}
	if s.Arch == "" {
		s.Arch = DebianArch(runtime.GOARCH)
	}
	if s.Packages == nil {
		s.Packages = slices.Clone(DefaultPackages)
	}
	if s.Setup == "" {
		s.Setup = DefaultSetup
	}
	return s
}

var (
	validSuite   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	validPackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
)

// Validate fails with invalid_argument unless every field of s is set and
// safe to hand to debootstrap.
func (s Spec) Validate() error {
	if !validSuite.MatchString(s.Suite) {
		return provider.Errorf(provider.InvalidArgument, "suite %q is not a Debian release name (like bookworm)", s.Suite)
	}
	if !validSuite.MatchString(s.Arch) {
		return provider.Errorf(provider.InvalidArgument, "architecture %q is not a Debian architecture (like amd64)", s.Arch)
	}
	for _, p := range s.Packages {
		if !validPackage.MatchString(p) {
			return provider.Errorf(provider.InvalidArgument, "package %q is not a Debian package name", p)
		}
	}
	if s.Setup == "" {
		return provider.Errorf(provider.InvalidArgument, "the setup script is empty: leave it unset for the default")
	}
	u, err := url.Parse(s.Mirror)
	if err != nil || u.Host == "" && u.Scheme != "file" || u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file" {
		return provider.Errorf(provider.InvalidArgument, "mirror %q is not an http, https or file URL of a Debian archive (like %s)", s.Mirror, DefaultMirror)
	}
	return nil
}

// Hash is the hex sha256 of everything that decides the image's content.
// The order of Packages and repeats in it do not count.
func (s Spec) Hash() string {
	pkgs := slices.Clone(s.Packages)
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	// Marshalling a struct of strings and a slice cannot fail.
	b, _ := json.Marshal(struct {
		Format   int      `json:"format"`
		Variant  string   `json:"variant"`
		Suite    string   `json:"suite"`
		Arch     string   `json:"arch"`
		Packages []string `json:"packages"`
		Setup    string   `json:"setup"`
	}{formatVersion, variant, s.Suite, s.Arch, pkgs, s.Setup})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// debianArches maps GOARCH to Debian's names where they differ.
var debianArches = map[string]string{
	"386":      "i386",
	"arm":      "armhf",
	"ppc64le":  "ppc64el",
	"mips64le": "mips64el",
	"mipsle":   "mipsel",
}

// DebianArch is Debian's name of the architecture Go calls goarch.
func DebianArch(goarch string) string {
	if a, ok := debianArches[goarch]; ok {
		return a
	}
	return goarch
}
