package conformance_test

import (
	"crypto/rand"
	"flag"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/conformance"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
)

var (
	providerFlag = flag.String("provider", "", "run against one provider: local, docker, sim, daytona or replay (default: every one this machine can run)")
	recordFlag   = flag.Bool("record", false, "record the HTTP exchanges of a sim or daytona run into testdata/<provider>/<scenario>.replay")
	// The default minute leaves the scenarios that refresh four times a
	// minute a margin of most of a second against a stalled scheduler:
	// eight scenarios run at once, under -race, on machines with two CPUs.
	minuteFlag = flag.Duration("minute", 1200*time.Millisecond, "the interval minute of the local daemons and the simulator")
)

func TestMain(m *testing.M) {
	// Before flag.Parse: re-executed as a native sandbox's init, this binary
	// gets the init's flags, which the test flags do not know.
	nsinit.Main()
	flag.Parse()
	// The scenarios mostly wait on their backends: let more of them wait at
	// once than there are CPUs.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		n := "8"
		if *providerFlag == "daytona" {
			n = "4" // stay well inside a real organization's quota
		}
		_ = flag.Set("test.parallel", n)
	}
	os.Exit(testdaemon.Main(m))
}

// TestThisBinaryIsItsOwnInit: the simulator's native sandboxes run in this
// process, under this binary as their init; without it they would fall
// back to process groups and leave behind what they start.
func TestThisBinaryIsItsOwnInit(t *testing.T) { testdaemon.RequireOwnInit(t) }

// TestConformance runs the suite against the providers -provider names, or
// every one this machine can run.
func TestConformance(t *testing.T) {
	providers := []string{"local", "docker", "sim", "replay"}
	switch {
	case *providerFlag != "":
		providers = []string{*providerFlag}
	case *recordFlag:
		providers = []string{"sim"}
	}
	for _, name := range providers {
		if *recordFlag && name != "sim" && name != "daytona" {
			t.Fatalf("-record records a sim or daytona run, not %s", name)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			switch name {
			case "local":
				conformance.Run(t, localMaker(nil))
			case "docker":
				conformance.Run(t, localMaker(newDockerEnv(t)))
			case "sim":
				conformance.Run(t, simMaker)
			case "daytona":
				conformance.Run(t, daytonaMaker(t))
			case "replay":
				dirs, err := filepath.Glob(filepath.Join("testdata", "*"))
				require.NoError(t, err)
				if len(dirs) == 0 {
					t.Fatal("no cassettes in testdata: record some with -record -provider=sim")
				}
				for _, dir := range dirs {
					t.Run(filepath.Base(dir), func(t *testing.T) {
						t.Parallel()
						conformance.Run(t, replayMaker(dir))
					})
				}
			default:
				t.Fatalf("unknown -provider %q: want local, docker, sim, daytona or replay", name)
			}
		})
	}
}

// runID names one run of the suite. Its letters are not hex digits, so it
// is never mistaken for part of an id when a recording replaces it.
func runID() string {
	const alphabet = "ghjkmnpqrstvwxyz"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "r" + string(b)
}

// scenarioName is the scenario t runs, the last element of its name.
func scenarioName(t *testing.T) string { return path.Base(t.Name()) }
