package depgraph

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heavy are the packages no lean SDK package may link, with why: each
// costs a host server build time and binary size out of proportion to
// what the SDK needs from it, or is server code.
var heavy = map[string]string{
	"github.com/prometheus":         "Prometheus",
	"google.golang.org/protobuf":    "protobuf",
	"github.com/docker/docker":      "the Docker client",
	"github.com/getkin/kin-openapi": "kin-openapi",
	"go.yaml.in/yaml":               "YAML",
	"gopkg.in/yaml":                 "YAML",
	module + "local/daemon":         "the daemon",
	module + "local/manager":        "the manager",
	module + "local/driver":         "the drivers",
	module + "simulator":            "the simulator",
	module + "toolbox":              "the in-sandbox server",
}

// budget bounds what one SDK package links.
type budget struct {
	pkg string
	// maxDeps is how many non-standard packages it may link, itself
	// included: a little over today's, so that growth is a decision.
	maxDeps int
	// allow are heavy prefixes it still links today, with why; each is
	// debt, to go when the package stops needing it.
	allow map[string]string
}

var budgets = []budget{
	{pkg: "provider", maxDeps: 4},
	{pkg: "provider/pool", maxDeps: 7},
	{pkg: "local", maxDeps: 12},
	{pkg: "daytona", maxDeps: 8},
	{pkg: "provider/relay", maxDeps: 8},
	{pkg: "toolbox/client", maxDeps: 11},
}

// lean are the packages under a heavy prefix that are not heavy: the
// toolbox's wire types and its client, which every SDK user of a sandbox's
// toolbox links.
var lean = map[string]bool{
	module + "toolbox/wire":   true,
	module + "toolbox/client": true,
}

// node is one package of a dependency graph, as go list -json reports it.
type node struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

// graph is a package and what it links, by import path.
type graph struct {
	root  string
	nodes map[string]node
}

// loadGraph asks go list for what pkg links, on one platform.
func loadGraph(t *testing.T, pkg string) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports", module+pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s", pkg)
	g, err := parseGraph(module+pkg, strings.NewReader(string(out)))
	require.NoError(t, err, "go list %s", pkg)
	return g
}

// parseGraph reads the JSON stream of go list -deps -json.
func parseGraph(root string, r io.Reader) (graph, error) {
	g := graph{root: root, nodes: map[string]node{}}
	dec := json.NewDecoder(r)
	for {
		var n node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			return g, nil
		} else if err != nil {
			return graph{}, err
		}
		g.nodes[n.ImportPath] = n
	}
}

// nonStd counts the packages of g that are not the standard library's.
func (g graph) nonStd() int {
	n := 0
	for _, p := range g.nodes {
		if !p.Standard {
			n++
		}
	}
	return n
}

// chain is the shortest import chain from g's root to each package it
// links, found breadth first, so that a failure names who pulled a package
// in.
func (g graph) chains() map[string][]string {
	chains := map[string][]string{g.root: {g.root}}
	queue := []string{g.root}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		imports := append([]string(nil), g.nodes[cur].Imports...)
		sort.Strings(imports) // one answer, whatever go list's order
		for _, imp := range imports {
			if _, seen := chains[imp]; seen {
				continue
			}
			chains[imp] = append(append([]string(nil), chains[cur]...), imp)
			queue = append(queue, imp)
		}
	}
	return chains
}

// violations names, for each heavy prefix b does not allow, the package of
// it nearest to the root and the chain that pulls it in.
func (b budget) violations(g graph) []string {
	chains := g.chains()
	nearest := map[string][]string{} // heavy prefix: chain
	for dep, chain := range chains {
		if dep == g.root {
			continue // a package does not pull itself in
		}
		prefix, ok := heavyPrefix(dep)
		if !ok {
			continue
		}
		if _, allowed := b.allow[prefix]; allowed {
			continue
		}
		if cur, ok := nearest[prefix]; !ok || len(chain) < len(cur) || len(chain) == len(cur) && dep < cur[len(cur)-1] {
			nearest[prefix] = chain
		}
	}
	var out []string
	for prefix, chain := range nearest {
		out = append(out, heavy[prefix]+": "+strings.Join(trim(chain), " -> "))
	}
	sort.Strings(out)
	return out
}

// heavyPrefix is the entry of heavy that dep falls under.
func heavyPrefix(dep string) (string, bool) {
	if lean[dep] {
		return "", false
	}
	for prefix := range heavy {
		if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
			return prefix, true
		}
	}
	return "", false
}

// trim drops the module's prefix from the chain, for reading.
func trim(chain []string) []string {
	out := make([]string, len(chain))
	for i, p := range chain {
		out[i] = strings.TrimPrefix(p, module)
	}
	return out
}

func TestBudgets(t *testing.T) {
	for _, b := range budgets {
		t.Run(b.pkg, func(t *testing.T) {
			g := loadGraph(t, b.pkg)
			for _, v := range b.violations(g) {
				t.Errorf("%s links %s; keep it out of the SDK, or move what needs it to a subpackage of its own", b.pkg, v)
			}
			assert.LessOrEqual(t, g.nonStd(), b.maxDeps,
				"%s links %d non-standard packages, over its budget of %d: if that is intended, raise the budget in budget_test.go", b.pkg, g.nonStd(), b.maxDeps)
			for prefix := range b.allow {
				_, ok := heavy[prefix]
				assert.True(t, ok, "%s: allowance %q is not a heavy prefix", b.pkg, prefix)
			}
		})
	}
}

// The violations name the chain that pulls a heavy package in, the nearest
// of its kind, and leave alone what is allowed or not heavy.
func TestViolations(t *testing.T) {
	const (
		root = module + "provider/pool"
		x    = module + "provider/x"
		prom = "github.com/prometheus/client_golang/prometheus"
		pb   = "google.golang.org/protobuf/proto"
	)
	g := graph{root: root, nodes: map[string]node{
		root:               {ImportPath: root, Imports: []string{"context", x}},
		"context":          {ImportPath: "context", Standard: true},
		x:                  {ImportPath: x, Imports: []string{prom}},
		prom:               {ImportPath: prom, Imports: []string{pb, prom + "/internal"}},
		prom + "/internal": {ImportPath: prom + "/internal"},
		pb:                 {ImportPath: pb},
	}}
	tests := []struct {
		name  string
		allow map[string]string
		want  []string
	}{
		{"none allowed", nil, []string{
			"Prometheus: provider/pool -> provider/x -> " + prom,
			"protobuf: provider/pool -> provider/x -> " + prom + " -> " + pb,
		}},
		{"protobuf allowed", map[string]string{"google.golang.org/protobuf": "test"}, []string{
			"Prometheus: provider/pool -> provider/x -> " + prom,
		}},
		{"all allowed", map[string]string{"google.golang.org/protobuf": "test", "github.com/prometheus": "test"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, budget{pkg: "provider/pool", allow: tt.allow}.violations(g))
		})
	}
	assert.Equal(t, 5, g.nonStd())
}

// A package is never heavy to itself (toolbox/client is under toolbox), the
// lean packages under a heavy prefix pass, and the server beside them does
// not.
func TestLeanUnderAHeavyPrefix(t *testing.T) {
	const (
		root   = module + "toolbox/client"
		wire   = module + "toolbox/wire"
		server = module + "toolbox"
	)
	tests := []struct {
		name    string
		imports []string
		want    []string
	}{
		{"itself", nil, nil},
		{"the wire types", []string{wire}, nil},
		{"the server", []string{wire, server}, []string{"the in-sandbox server: toolbox/client -> toolbox"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph{root: root, nodes: map[string]node{root: {ImportPath: root, Imports: tt.imports}}}
			for _, imp := range tt.imports {
				g.nodes[imp] = node{ImportPath: imp}
			}
			assert.Equal(t, tt.want, budget{pkg: "toolbox/client"}.violations(g))
		})
	}
}

func TestParseGraph(t *testing.T) {
	g, err := parseGraph("a", strings.NewReader(`{"ImportPath":"a","Imports":["b","fmt"]}
{"ImportPath":"b"}
{"ImportPath":"fmt","Standard":true}`))
	require.NoError(t, err)
	assert.Equal(t, 2, g.nonStd())
	assert.Equal(t, []string{"a", "b"}, g.chains()["b"])
}
