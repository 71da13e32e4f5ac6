package baseimage

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBuildLogOfDebootstrap(t *testing.T) {
	var got []Progress
	d := &buildLog{r: newReporter(func(p Progress) { got = append(got, p) })}
	lines := []string{
		"I: Retrieving InRelease ",
		"I: Checking Release signature",
		"I: Retrieving Packages ",
		"I: Validating Packages ",
	}
	for i := range 120 {
		lines = append(lines, fmt.Sprintf("I: Retrieving pkg%d 1.0-%d", i, i), fmt.Sprintf("I: Validating pkg%d 1.0-%d", i, i))
	}
	lines = append(lines, "I: Chosen extractor for .deb packages: dpkg-deb", "I: Extracting base-files...", "I: Extracting bash...",
		"I: Unpacking required packages...", "I: Unpacking libc6:amd64...", "dpkg: warning: something", "I: Base system installed successfully.")
	for _, l := range lines {
		d.line(l)
	}
	d.finishPhase()
	assert.Equal(t, []Progress{
		{Phase: PhaseBootstrap, Detail: "Retrieving InRelease"},
		{Phase: PhaseBootstrap, Detail: "Checking Release signature"},
		{Phase: PhaseBootstrap, Detail: "Retrieving Packages"},
		{Phase: PhaseDownload, Count: 50, Detail: "pkg49"},
		{Phase: PhaseDownload, Count: 100, Detail: "pkg99"},
		{Phase: PhaseDownload, Count: 120},
		{Phase: PhaseBootstrap, Detail: "Chosen extractor for .deb packages: dpkg-deb"},
		{Phase: PhaseExtract, Count: 2},
		{Phase: PhaseBootstrap, Detail: "Unpacking required packages"},
		{Phase: PhaseUnpack, Count: 1},
		{Phase: PhaseBootstrap, Detail: "Base system installed successfully."},
	}, got)
	assert.Equal(t, tailLines, len(strings.Split(d.errorTail(), "\n")))
	assert.Contains(t, d.errorTail(), "dpkg: warning: something")
}

func TestBuildLogOfAptGet(t *testing.T) {
	var got []Progress
	d := &buildLog{r: newReporter(func(p Progress) { got = append(got, p) })}
	lines := []string{
		"Get:1 http://deb.debian.org/debian bookworm InRelease [151 kB]",
		"Get:2 http://deb.debian.org/debian bookworm/main amd64 Packages [8786 kB]",
		"Reading package lists...",
		"The following NEW packages will be installed:",
		"  bash curl git",
		"0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.",
		"Need to get 12.3 MB of archives.",
		"Get:1 http://deb.debian.org/debian bookworm/main amd64 bash amd64 5.2.15-2+b2 [1491 kB]",
		"Get:2 http://deb.debian.org/debian bookworm/main amd64 curl amd64 7.88.1-10+deb12u5 [315 kB]",
		"Get:3 http://deb.debian.org/debian bookworm/main amd64 git amd64 1:2.39.2-1.1 [7260 kB]",
		"debconf: delaying package configuration, since apt-utils is not installed",
		"Selecting previously unselected package bash.",
		"Preparing to unpack .../bash_5.2.15-2+b2_amd64.deb ...",
		"Unpacking bash (5.2.15-2+b2) ...",
		"Unpacking curl (7.88.1-10+deb12u5) ...",
		"Setting up bash (5.2.15-2+b2) ...",
	}
	for _, l := range lines {
		d.line(l)
	}
	d.finishPhase()
	assert.Equal(t, []Progress{
		{Phase: PhaseBootstrap, Detail: "0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded."},
		{Phase: PhaseBootstrap, Detail: "Need to get 12.3 MB of archives."},
		{Phase: PhaseDownload, Count: 3},
		{Phase: PhaseUnpack, Count: 2},
		{Phase: PhaseConfigure, Count: 1},
	}, got)
}

func TestProgressString(t *testing.T) {
	for _, tc := range []struct {
		p    Progress
		want string
	}{
		{Progress{Phase: PhaseDownload, Count: 50, Detail: "libc6"}, "download 50 packages, libc6"},
		{Progress{Phase: PhaseConfigure, Count: 7}, "configure 7 packages"},
		{Progress{Phase: PhaseImport, Bytes: 3 << 20}, "import 3.0 MiB"},
		{Progress{Phase: PhaseCached, Detail: "sandplane/base:0123"}, "cached: sandplane/base:0123"},
		{Progress{Phase: PhaseDone}, "done"},
	} {
		t.Run(tc.want, func(t *testing.T) { assert.Equal(t, tc.want, tc.p.String()) })
	}
	var buf bytes.Buffer
	ProgressTo(&buf, "base image: ")(Progress{Phase: PhaseDone, Detail: "x"})
	assert.Equal(t, "base image: done: x\n", buf.String())
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{line: func(s string) { got = append(got, s) }}
	for _, chunk := range []string{"one\ntw", "o\n\n  \nthr", "ee"} {
		n, err := w.Write([]byte(chunk))
		assert.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	w.flush()
	assert.Equal(t, []string{"one", "two", "three"}, got)
}
