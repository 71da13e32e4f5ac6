package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

type row struct {
	name                     string
	subject, baseline, ratio float64
	// other holds the benchmark's remaining custom metrics, such as req/s.
	other []string
	// versus is true when the benchmark reported a baseline.
	versus bool
}

func main() {
	rows, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	write(os.Stdout, rows)
}

// parse picks the benchmark lines that carry the three versus metrics.
func parse(r io.Reader) ([]row, error) {
	var rows []row
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
		rw := row{name: shortPkg(pkg) + "." + strings.TrimPrefix(trimProcs(f[0]), "Benchmark")}
		found := 0
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch unit := f[i+1]; unit {
			case "ms/op-subject":
				rw.subject, found = v, found+1
			case "ms/op-baseline":
				rw.baseline, found = v, found+1
			case "x-baseline":
				rw.ratio, found = v, found+1
			case "ns/op", "B/op", "allocs/op":
			default:
				rw.other = append(rw.other, f[i]+" "+unit)
			}
		}
		rw.versus = found == 3
		if rw.versus || len(rw.other) > 0 {
			rows = append(rows, rw)
		}
	}
	return rows, sc.Err()
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

func write(w io.Writer, rows []row) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Figures beside their baselines (same run):")
	fmt.Fprintf(w, "  %-48s %12s %12s %8s\n", "figure", "ms", "baseline ms", "ratio")
	n := 0
	for _, r := range rows {
		if r.versus {
			fmt.Fprintf(w, "  %-48s %12.2f %12.2f %7.2fx\n", r.name, r.subject, r.baseline, r.ratio)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "  (no benchmark reported a baseline)")
	}
	fmt.Fprintln(w, "Other figures:")
	for _, r := range rows {
		if len(r.other) > 0 {
			fmt.Fprintf(w, "  %-48s %s\n", r.name, strings.Join(r.other, ", "))
		}
	}
}
