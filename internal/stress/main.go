package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// runs are the go test invocations, one after the other: the packages
// whose tests wait most on time, and the conformance suite on each
// provider that runs on one machine.
var runs = [][]string{
	{"./cmd/sandplane", "./local/driver/...", "./provider/relay", "./provider/pool", "./simulator"},
	{"./conformance", "-provider=local"},
	{"./conformance", "-provider=docker"},
	{"./conformance", "-provider=sim"},
}

func main() {
	count := flag.Int("count", 3, "how many times each test runs")
	hogs := flag.Int("hogs", runtime.NumCPU(), "busy loops kept running meanwhile")
	flag.Parse()
	stop := hog(*hogs)
	failed := 0
	for _, args := range runs {
		failed += stress(args, *count, *hogs)
	}
	stop()
	if failed > 0 {
		fmt.Printf("stress: %d failures\n", failed)
		os.Exit(1)
	}
	fmt.Println("stress: no failures")
}

// hog keeps n CPUs busy until the returned function is called.
func hog(n int) (stop func()) {
	var done atomic.Bool
	for range n {
		go func() {
			for x := 0; !done.Load(); x++ {
				_ = x * x
			}
		}()
	}
	return func() { done.Store(true) }
}

// event is one line of go test -json.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// stress runs go test with args count times under the hogs and prints
// each failed test with the end of its output; it returns how many
// failed.
func stress(args []string, count, hogs int) int {
	argv := append([]string{"test", "-race", "-json", "-count", fmt.Sprint(count), "-timeout", "60m"}, args...)
	fmt.Printf("stress: go %s, %d busy loops\n", strings.Join(argv, " "), hogs)
	began := time.Now()
	cmd := exec.Command("go", argv...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Println("stress:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Println("stress:", err)
		return 1
	}
	failures, passed := collect(out)
	waitErr := cmd.Wait()
	for _, f := range failures {
		fmt.Printf("FAIL %s %s\n%s\n", f.pkg, f.test, indent(f.output))
	}
	n := len(failures)
	if waitErr != nil && n == 0 {
		fmt.Printf("stress: go test failed without a failed test (a build failure, a panic, a timeout?): %v\n", waitErr)
		n = 1
	}
	fmt.Printf("stress: %d tests passed, %d failed, in %s\n\n", passed, len(failures), time.Since(began).Round(time.Second))
	return n
}

type failure struct {
	pkg, test, output string
}

// maxOutput bounds the output quoted for one failure.
const maxOutput = 4000

// collect reads go test -json from r: the failed tests (a package that
// failed outside any test counts as one, named "(package)") and how many
// passed.
func collect(r io.Reader) ([]failure, int) {
	outputs := map[[2]string]*strings.Builder{}
	var failures []failure
	passed := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch e.Action {
		case "run":
			outputs[key] = &strings.Builder{} // each run of -count starts afresh
		case "output":
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			b.WriteString(e.Output)
		case "pass":
			if e.Test != "" {
				passed++
			}
		case "fail":
			if covered(failures, e.Package, e.Test) {
				continue // it fails because a test or subtest of it did
			}
			name := e.Test
			if name == "" {
				name = "(package)"
			}
			text := ""
			if b := outputs[key]; b != nil {
				text = b.String()
			}
			if len(text) > maxOutput {
				text = "..." + text[len(text)-maxOutput:]
			}
			failures = append(failures, failure{e.Package, name, text})
		}
	}
	sort.SliceStable(failures, func(i, j int) bool { return failures[i].pkg < failures[j].pkg })
	return failures, passed
}

// covered says whether a test of pkg under test ("" for the package
// itself) already failed.
func covered(fs []failure, pkg, test string) bool {
	for _, f := range fs {
		if f.pkg == pkg && (test == "" || strings.HasPrefix(f.test, test+"/")) {
			return true
		}
	}
	return false
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
