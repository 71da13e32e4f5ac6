package poolsim

import (
	"fmt"
	"io"
	"strings"

	"github.com/sandplane/sandplane/provider/pool"
)

// WriteTable writes results as a Markdown table, each policy's cost and
// mean wait also as a ratio to the first result's (no pool, the baseline
// of the same run).
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| policy | running h | stopped h | cost | × no pool | turns created/resumed/warm | mean wait | × no pool | p95 wait |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		base := results[0]
		fmt.Fprintf(&b, "| %s | %.1f | %.0f | $%.2f | %s | %d/%d/%d | %.1f s | %s | %.1f s |\n",
			r.Policy, r.RunningH, r.StoppedH, r.USD, ratio(r.USD, base.USD),
			r.Paths[pool.PathCreated], r.Paths[pool.PathResumed], r.Paths[pool.PathWarm],
			r.MeanWait.Seconds(), ratio(r.MeanWait.Seconds(), base.MeanWait.Seconds()), r.P95Wait.Seconds())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ratio(v, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/base)
}

// WriteStages writes the stages a run charged and what each path pays in
// all, on average.
func WriteStages(w io.Writer, s Stages) error {
	var b strings.Builder
	fmt.Fprintf(&b, "stages: create %s, start %s, harness respawn %s, mounts %s, services hop %s, checkout %s\n",
		s.Create, s.Start, s.HarnessRespawn, s.Mounts, s.ServicesHop, s.Checkout)
	for _, p := range []struct {
		path  pool.Path
		first Range
	}{{pool.PathCreated, s.Create}, {pool.PathResumed, s.Start}, {pool.PathWarm, Range{}}} {
		total := p.first.Mean()
		for _, r := range s.hostSide(p.path) {
			total += r.Mean()
		}
		fmt.Fprintf(&b, "  a %s turn waits %.2f s on average\n", p.path, total.Seconds())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
