package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// figure is one measurement beside its baseline from the same run.
type figure struct {
	name            string
	unit            string // ms/op, MiB, ...
	value, baseline float64
	ratio           float64
}

// result is what one benchmark line reported.
type result struct {
	name    string
	figures []figure
	// other holds the benchmark's remaining custom metrics, such as req/s.
	other []string
}

func main() {
	results, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	write(os.Stdout, results)
}

// pairSuffixes are the metric suffixes that pair a figure with its
// baseline: UNIT-subject with UNIT-baseline (a ratio in x-baseline, when
// the benchmark reports one), and UNIT-after with UNIT-before (a growth).
var pairSuffixes = [][2]string{{"-subject", "-baseline"}, {"-after", "-before"}}

// parse reads the benchmark lines and pairs each figure with its baseline.
func parse(r io.Reader) ([]result, error) {
	var results []result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	pkg := ""
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		res := parseLine(shortPkg(pkg)+"."+strings.TrimPrefix(trimProcs(f[0]), "Benchmark"), f[2:])
		if len(res.figures) > 0 || len(res.other) > 0 {
			results = append(results, res)
		}
	}
	return results, sc.Err()
}

// parseLine reads the "value unit" pairs of one benchmark line.
func parseLine(name string, fields []string) result {
	metrics := map[string]float64{}
	var units []string
	for i := 0; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			continue
		}
		switch unit := fields[i+1]; unit {
		case "ns/op", "B/op", "allocs/op":
		default:
			metrics[unit] = v
			units = append(units, unit)
		}
	}
	res := result{name: name}
	paired := map[string]bool{}
	for _, sfx := range pairSuffixes {
		for _, unit := range units {
			base, ok := strings.CutSuffix(unit, sfx[0])
			b, hasBase := metrics[base+sfx[1]]
			if !ok || !hasBase {
				continue
			}
			fig := figure{name: name, unit: base, value: metrics[unit], baseline: b}
			if x, ok := metrics["x-baseline"]; ok && sfx[0] == "-subject" {
				fig.ratio, paired["x-baseline"] = x, true
			} else if b != 0 {
				fig.ratio = fig.value / b
			}
			res.figures = append(res.figures, fig)
			paired[unit], paired[base+sfx[1]] = true, true
		}
	}
	for _, unit := range units {
		if !paired[unit] && !(strings.HasPrefix(unit, "x-") && len(res.figures) > 0) {
			res.other = append(res.other, strconv.FormatFloat(metrics[unit], 'g', -1, 64)+" "+unit)
		}
	}
	sort.SliceStable(res.figures, func(i, j int) bool { return res.figures[i].unit < res.figures[j].unit })
	return res
}

func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func shortPkg(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/sandplane/sandplane/")
}

func write(w io.Writer, results []result) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Figures beside their baselines (same run):")
	fmt.Fprintf(w, "  %-56s %12s %12s %-8s %8s\n", "figure", "value", "baseline", "unit", "ratio")
	n := 0
	for _, r := range results {
		for _, f := range r.figures {
			fmt.Fprintf(w, "  %-56s %12.2f %12.2f %-8s %7.2fx\n", f.name, f.value, f.baseline, f.unit, f.ratio)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "  (no benchmark reported a baseline)")
	}
	fmt.Fprintln(w, "Other figures:")
	for _, r := range results {
		if len(r.other) > 0 {
			fmt.Fprintf(w, "  %-56s %s\n", r.name, strings.Join(r.other, ", "))
		}
	}
}
