package simulator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxMethods is the most methods any type of this package may have. A type
// past it has grown into several jobs: move one out into a part of its own
// (internal/...), or a group of handlers of its own (parts.go), before
// adding more.
const maxMethods = 40

// TestNoTypeHasTooManyMethods counts the methods declared on each type in
// the package's own (non-test) files.
func TestNoTypeHasTooManyMethods(t *testing.T) {
	counts := methodCounts(t, ".")
	type row struct {
		name string
		n    int
	}
	var rows []row
	for name, n := range counts {
		rows = append(rows, row{name, n})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].n > rows[j].n })
	for _, r := range rows {
		if r.n > maxMethods {
			t.Errorf("%s has %d methods, more than %d: give some of its jobs a part of their own", r.name, r.n, maxMethods)
		}
	}
	if len(rows) > 0 {
		t.Logf("largest type: %s with %d methods", rows[0].name, rows[0].n)
	}
}

// methodCounts maps each receiver type declared in dir's non-test Go files
// to its number of methods.
func methodCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	counts := map[string]int{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
				counts[receiverName(fn.Recv.List[0].Type)]++
			}
		}
	}
	return counts
}

// receiverName is the type name of a receiver: T, *T, T[P] or *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
