package baseimage

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Phases of a build, in the order they happen. PhaseCached and PhaseWaiting
// replace the build when the image exists or another build is under way.
const (
	PhaseCached    = "cached"    // the engine has the image: nothing built
	PhaseWaiting   = "waiting"   // another process builds the same image
	PhaseBootstrap = "bootstrap" // debootstrap resolves, checks, installs
	PhaseDownload  = "download"  // packages retrieved
	PhaseExtract   = "extract"   // required packages extracted
	PhaseUnpack    = "unpack"    // packages unpacked with dpkg
	PhaseConfigure = "configure" // packages configured with dpkg
	PhaseSetup     = "setup"     // the setup script runs in the chroot
	PhaseImport    = "import"    // the root filesystem streams to the engine
	PhaseLayer     = "layer"     // an engine build on top of a base image
	PhaseDone      = "done"      // the image is tagged
)

// Progress is one step of a build, worth a log line.
type Progress struct {
	Phase string
	// Count is how many packages the phase has handled so far (download,
	// extract, unpack, configure).
	Count int
	// Bytes is how much the phase has sent to the engine (import).
	Bytes int64
	// Detail is a package name, an image, or what happens.
	Detail string
}

func (p Progress) String() string {
	var b strings.Builder
	b.WriteString(p.Phase)
	switch {
	case p.Count > 0:
		fmt.Fprintf(&b, " %d packages", p.Count)
	case p.Bytes > 0:
		fmt.Fprintf(&b, " %.1f MiB", float64(p.Bytes)/(1<<20))
	}
	if p.Detail != "" {
		if p.Count > 0 || p.Bytes > 0 {
			b.WriteString(",")
		} else {
			b.WriteString(":")
		}
		b.WriteString(" " + p.Detail)
	}
	return b.String()
}

// ProgressTo returns a progress callback that writes each step to w as a
// line, after prefix.
func ProgressTo(w io.Writer, prefix string) func(Progress) {
	return func(p Progress) { fmt.Fprintln(w, prefix+p.String()) }
}

// reporter serialises calls of a caller's callback, which may come from the
// goroutine that streams the import as well as the caller's.
type reporter struct {
	mu sync.Mutex
	fn func(Progress)
}

func newReporter(fn func(Progress)) *reporter { return &reporter{fn: fn} }

func (r *reporter) report(p Progress) {
	if r == nil || r.fn == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fn(p)
}

// countEvery is how many packages a counted phase handles between two
// reports: a few hundred packages make a dozen lines, not hundreds.
const countEvery = 50

// buildLog turns the output of debootstrap and apt-get into Progress:
// every countEvery packages of a counted phase, and debootstrap's other
// informational lines and apt's summaries as they come. It keeps the last
// lines for the error message of a failed step.
type buildLog struct {
	r     *reporter
	phase string
	count int
	tail  []string
}

// tailLines is how much of a step's output a failure quotes.
const tailLines = 15

// debootstrapVerbs maps the verbs of debootstrap's per-package lines
// ("I: Retrieving libc6 2.36-9", "I: Unpacking libc6...") to phases.
var debootstrapVerbs = map[string]string{
	"Retrieving":  PhaseDownload,
	"Extracting":  PhaseExtract,
	"Unpacking":   PhaseUnpack,
	"Configuring": PhaseConfigure,
}

// aptSummaries start the lines of apt-get worth passing on as they are.
var aptSummaries = []string{"Need to get ", "After this operation", "0 upgraded"}

func (d *buildLog) line(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	d.tail = append(d.tail, s)
	if len(d.tail) > tailLines {
		d.tail = d.tail[1:]
	}
	if phase, pkg, ok := packageLine(s); ok {
		d.counted(phase, pkg)
		return
	}
	msg, ok := strings.CutPrefix(s, "I: ")
	if !ok {
		for _, p := range aptSummaries {
			if strings.HasPrefix(s, p) {
				d.finishPhase()
				d.r.report(Progress{Phase: PhaseBootstrap, Detail: s})
				break
			}
		}
		return // W: and E: lines end up in the error, dpkg's chatter nowhere
	}
	if strings.HasPrefix(msg, "Validating ") {
		return // one per download: noise
	}
	d.finishPhase()
	d.r.report(Progress{Phase: PhaseBootstrap, Detail: strings.TrimSuffix(msg, "...")})
}

// packageLine reads a line about one package. debootstrap's are a verb of
// debootstrapVerbs, then a package name and either a version ("Retrieving")
// or "..." (the others): "Retrieving Packages" or "Unpacking required
// packages..." are not. apt-get's are "Get:7 <uri> <dist> <arch> <package>
// <arch> <version> [<size>]", "Unpacking <package> (<version>) ..." and
// "Setting up <package> (<version>) ...".
func packageLine(s string) (phase, pkg string, ok bool) {
	fields := strings.Fields(s)
	switch {
	case len(fields) >= 9 && strings.HasPrefix(fields[0], "Get:"):
		return PhaseDownload, fields[4], true
	case len(fields) == 4 && fields[0] == "Unpacking" && strings.HasPrefix(fields[2], "("):
		return PhaseUnpack, fields[1], true
	case len(fields) == 5 && fields[0] == "Setting" && fields[1] == "up":
		return PhaseConfigure, fields[2], true
	case len(fields) < 3 || fields[0] != "I:":
		return "", "", false
	}
	phase, ok = debootstrapVerbs[fields[1]]
	switch {
	case !ok:
	case fields[1] == "Retrieving" && len(fields) == 4:
		return phase, fields[2], true
	case fields[1] != "Retrieving" && len(fields) == 3 && strings.HasSuffix(fields[2], "..."):
		return phase, strings.TrimSuffix(fields[2], "..."), true
	}
	return "", "", false
}

func (d *buildLog) counted(phase, pkg string) {
	if phase != d.phase {
		d.finishPhase()
		d.phase = phase
	}
	d.count++
	if d.count%countEvery == 0 {
		d.r.report(Progress{Phase: phase, Count: d.count, Detail: pkg})
	}
}

// finishPhase reports the count of a counted phase that ends, unless its
// last package was just reported.
func (d *buildLog) finishPhase() {
	if d.phase != "" && d.count%countEvery != 0 {
		d.r.report(Progress{Phase: d.phase, Count: d.count})
	}
	d.phase, d.count = "", 0
}

// errorTail is the end of the output, for an error message.
func (d *buildLog) errorTail() string { return strings.Join(d.tail, "\n") }
