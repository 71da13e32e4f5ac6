package depgraph

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden dependency lists")

const module = "github.com/sandplane/sandplane/"

// sdk are the packages host servers import, and the toolbox client that
// the CLI and any host program use to run commands in a sandbox.
var sdk = []string{"provider", "local", "daytona", "toolbox/client"}

// serverCode are dependencies that belong to the daemon or the simulator
// and must never reach the SDK, with why.
var serverCode = map[string]string{
	module + "local/daemon":         "the daemon",
	module + "local/manager":        "the manager",
	module + "local/driver":         "the drivers",
	module + "local/launcher":       "the workload launcher",
	module + "local/config":         "the daemon's settings",
	module + "simulator":            "the simulator",
	module + "toolbox":              "the in-sandbox server",
	"github.com/getkin/kin-openapi": "request validation (kin-openapi)",
	"go.yaml.in/yaml":               "YAML",
	"gopkg.in/yaml":                 "YAML",
	"github.com/docker/docker":      "the Docker client",
	"github.com/spf13/cobra":        "the command line",
}

// deps lists what pkg links, without the standard library's internal and
// vendored packages, which change with every Go release.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{else}}std {{.ImportPath}}{{end}}", module+pkg)
	// One platform, so that the lists do not depend on where they are made.
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s", pkg)
	var list []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if std, ok := strings.CutPrefix(line, "std "); ok {
			if strings.Contains(std, "internal") || strings.HasPrefix(std, "vendor/") {
				continue
			}
		}
		list = append(list, line)
	}
	sort.Strings(list)
	return list
}

// sdkLeaves are packages under a serverCode prefix that are not server
// code: the toolbox's client and the wire types it shares with the server.
var sdkLeaves = map[string]bool{
	module + "toolbox/client": true,
	module + "toolbox/wire":   true,
}

// serverDeps are the entries of list that are server code, with why.
func serverDeps(list []string) []string {
	var out []string
	for _, dep := range list {
		if sdkLeaves[dep] {
			continue
		}
		for prefix, what := range serverCode {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				out = append(out, dep+" ("+what+")")
			}
		}
	}
	return out
}

func TestServerDepsAreCaught(t *testing.T) {
	tests := []struct {
		dep  string
		flag bool
	}{
		{"github.com/getkin/kin-openapi/openapi3", true},
		{module + "local/manager", true},
		{module + "local/daemon/internal/api", true},
		{module + "local/driver/docker", true},
		{"github.com/docker/docker/client", true},
		{"go.yaml.in/yaml/v3", true},
		{module + "local", false},
		{module + "local/internal/client", false},
		{module + "provider/wire", false},
		{module + "toolboxes", false},
		{module + "toolbox", true},
		{module + "toolbox/toolboxcmd", true},
		{module + "toolbox/client", false},
		{module + "toolbox/wire", false},
		{"std net/http", false},
	}
	for _, tt := range tests {
		t.Run(tt.dep, func(t *testing.T) {
			assert.Equal(t, tt.flag, len(serverDeps([]string{tt.dep})) == 1)
		})
	}
}

func TestSDKDependencies(t *testing.T) {
	for _, pkg := range sdk {
		t.Run(pkg, func(t *testing.T) {
			got := deps(t, pkg)
			for _, bad := range serverDeps(got) {
				t.Errorf("%s links %s: a host server that imports the SDK would link it too; keep server code out of the SDK's imports", pkg, bad)
			}
			golden := filepath.Join("testdata", pkg+".txt")
			text := strings.Join(got, "\n") + "\n"
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, []byte(text), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./internal/depgraph -update")
			assert.Equal(t, string(want), text, "the dependencies of %s changed: if that is intended, run go test ./internal/depgraph -update and review the diff", pkg)
		})
	}
}

// TestToolboxWireIsALeaf keeps the toolbox's wire types on the standard
// library alone: the client and the server both import them, so anything
// they import, every client links.
func TestToolboxWireIsALeaf(t *testing.T) {
	for _, dep := range deps(t, "toolbox/wire") {
		if !strings.HasPrefix(dep, "std ") && dep != module+"toolbox/wire" {
			t.Errorf("toolbox/wire imports %s: keep it to the standard library", dep)
		}
	}
}
