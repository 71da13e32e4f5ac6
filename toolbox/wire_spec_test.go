package toolbox

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wireSchemas names the spec schema of a wire type whose name differs.
var wireSchemas = map[string]string{
	"SessionCommand":     "Command",
	"SessionCommandLogs": "SessionCommandLogsResponse",
}

// wireBeyondSpec are wire types and fields that the v0.190.0 spec does not
// have, with why: the later toolbox releases the newer SDKs speak, and the
// daemon's bodies that the spec leaves out.
var wireBeyondSpec = map[string]string{
	"ErrorResponse":           "the daemon's error body, which the spec gives as string maps",
	"UpdateEnvRequest":        "POST /env, later releases",
	"SystemMetrics":           "GET /system/metrics, later releases",
	"UploadedFileV2":          "POST /files/upload-v2, later releases",
	"GitInitRequest":          "POST /git/init, later releases",
	"GitRemote":               "GET /git/remotes, later releases",
	"ListRemotesResponse":     "GET /git/remotes, later releases",
	"GitAddRemoteRequest":     "POST /git/remotes, later releases",
	"GitSetConfigRequest":     "POST /git/config, later releases",
	"GitConfigResponse":       "GET /git/config, later releases",
	"GitConfigureUserRequest": "POST /git/config/user, later releases",
	"GitResetRequest":         "POST /git/reset, later releases",
	"GitRestoreRequest":       "POST /git/restore, later releases",
	"GitAuthenticateRequest":  "POST /git/credentials, later releases",

	"FileInfo.path":               "the entry's absolute path, later releases",
	"GitCloneRequest.depth":       "shallow clones, later releases",
	"GitRepoRequest.branch":       "pushes and pulls that name a branch, later releases",
	"GitRepoRequest.remote":       "pushes and pulls that name a remote, later releases",
	"GitRepoRequest.set_upstream": "pushes that set the upstream, later releases",
	"GitStatus.detached":          "a detached HEAD, later releases",
	"GitStatus.upstream":          "the upstream's name, later releases",
	"ListBranchResponse.current":  "the current branch, later releases",
	"CodeRunResponse.-artifacts":  "charts are never produced: the sandbox's python is plain",
}

// TestWireMatchesSpec checks every wire type against the toolbox spec: the
// JSON names of its fields are its schema's properties, but for what
// wireBeyondSpec lists (a "-" before a name: a property the type leaves
// out). The types are written by hand, so this is what keeps them the
// spec's.
func TestWireMatchesSpec(t *testing.T) {
	doc := loadToolboxSpec(t)
	structs := wireStructs(t)
	require.NotEmpty(t, structs)
	for name, fields := range structs {
		t.Run(name, func(t *testing.T) {
			schemaName := name
			if s, ok := wireSchemas[name]; ok {
				schemaName = s
			}
			ref := doc.Components.Schemas[schemaName]
			if ref == nil || ref.Value == nil {
				assert.Contains(t, wireBeyondSpec, name, "no schema %s in the spec: list the type in wireBeyondSpec with why", schemaName)
				return
			}
			var want []string
			for prop := range ref.Value.Properties {
				if _, left := wireBeyondSpec[name+".-"+prop]; !left {
					want = append(want, prop)
				}
			}
			var got []string
			for _, f := range fields {
				if _, beyond := wireBeyondSpec[name+"."+f]; !beyond {
					got = append(got, f)
				}
			}
			sort.Strings(want)
			sort.Strings(got)
			assert.Equal(t, want, got, "the JSON fields of wire.%s and the spec's %s", name, schemaName)
		})
	}
}

// wireStructs reads the wire package's source: each exported struct type
// and the JSON names of its fields, embedded structs' included.
func wireStructs(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join("wire", "*.go"))
	require.NoError(t, err)
	decls := map[string]*ast.StructType{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if st, ok := ts.Type.(*ast.StructType); ok {
					decls[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	var jsonNames func(st *ast.StructType) []string
	jsonNames = func(st *ast.StructType) []string {
		var out []string
		for _, f := range st.Fields.List {
			var tag reflect.StructTag
			if f.Tag != nil {
				s, err := strconv.Unquote(f.Tag.Value)
				require.NoError(t, err)
				tag = reflect.StructTag(s)
			}
			name, _, _ := strings.Cut(tag.Get("json"), ",")
			if id, ok := f.Type.(*ast.Ident); ok && len(f.Names) == 0 && name == "" {
				require.Contains(t, decls, id.Name, "embedded %s", id.Name)
				out = append(out, jsonNames(decls[id.Name])...)
				continue
			}
			require.NotEmpty(t, name, "a field without a JSON name in %v", fset.Position(f.Pos()))
			if name != "-" {
				out = append(out, name)
			}
		}
		return out
	}
	structs := map[string][]string{}
	for name, st := range decls {
		structs[name] = slices.Clip(jsonNames(st))
	}
	return structs
}
