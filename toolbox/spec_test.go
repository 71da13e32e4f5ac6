package toolbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
)

// The toolbox spec ships in the official Go toolbox client's module.
const (
	toolboxClientModule  = "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
	toolboxClientVersion = "v0.190.0"
)

// specException is a place where the real daemon and its OpenAPI document
// disagree, or where sandplane answers deliberately otherwise; the
// validator lets exactly these through.
type specException struct {
	operation string
	status    int // 0: any
	what, why string
}

var specExceptions = []specException{
	{"CreateInterpreterContext", 400, "error bodies are the daemon's ErrorResponse", "the document gives error bodies as string maps, but the daemon answers its ErrorResponse, whose statusCode is a number"},
	{"DeleteInterpreterContext", 400, "error bodies are the daemon's ErrorResponse", "as for CreateInterpreterContext"},
	{"DeleteInterpreterContext", 404, "error bodies are the daemon's ErrorResponse", "as for CreateInterpreterContext"},
	{"UploadFile", 200, "an empty body, not a gin.H object", "the official Go client decodes the documented map of objects and fails on any message string; an empty body is what every client accepts"},
	{"CreateInterpreterContext", 500, "error bodies are the daemon's ErrorResponse", "as for CreateInterpreterContext"},
}

func loadToolboxSpec(t *testing.T) *openapi3.T {
	t.Helper()
	rel, err := module.EscapePath(toolboxClientModule)
	require.NoError(t, err)
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	require.NoError(t, err)
	path := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(rel)+"@"+toolboxClientVersion, "api", "openapi.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the toolbox spec is not in the module cache (%v): run `go mod download %s`", err, toolboxClientModule)
	}
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	require.NoError(t, err)
	return doc
}

// specValidator is an http.RoundTripper that checks every request and
// response against the toolbox spec.
type specValidator struct {
	t      *testing.T
	router routers.Router
	next   http.RoundTripper

	mu   sync.Mutex
	seen map[string]bool // operation ids exercised
}

func newSpecValidator(t *testing.T) *specValidator {
	doc := loadToolboxSpec(t)
	// The toolbox is reached at whatever host the test serves it on.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return &specValidator{t: t, router: router, next: http.DefaultTransport, seen: map[string]bool{}}
}

func (v *specValidator) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		reqBody = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.t.Errorf("%s %s is not in the toolbox spec: %v", req.Method, req.URL.Path, err)
		return v.next.RoundTrip(req)
	}
	op := route.Operation.OperationID
	v.mu.Lock()
	v.seen[op] = true
	v.mu.Unlock()
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		v.t.Errorf("request %s (%s %s) violates the spec: %v", op, req.Method, req.URL.Path, err)
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))

	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil && !excepted(op, resp.StatusCode) {
		v.t.Errorf("response of %s (status %d) violates the spec: %v\nbody: %.500s", op, resp.StatusCode, err, body)
	}
	return resp, nil
}

func excepted(op string, status int) bool {
	for _, e := range specExceptions {
		if e.operation == op && (e.status == 0 || e.status == status) {
			return true
		}
	}
	return false
}

// specOperation is one operation of the toolbox spec.
type specOperation struct {
	id, method, path string
}

func specOperations(t *testing.T) []specOperation {
	doc := loadToolboxSpec(t)
	var ops []specOperation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, specOperation{id: op.OperationID, method: method, path: path})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	return ops
}

// notAvailable are the operations answered deliberately with "not
// available", and why.
func notAvailable(op specOperation) (string, bool) {
	if strings.HasPrefix(op.path, "/computeruse/") {
		return "503 Computer-use functionality is not available: sandplane sandboxes have no display server, as a Daytona sandbox without computer use", true
	}
	return "", false
}

// TestSpecCoverage probes every operation of the toolbox spec: each one
// is answered, but computer use, which is answered as not available. A
// route the toolbox lacks would fall through to its catch-all 404
// "route ... not found".
func TestSpecCoverage(t *testing.T) {
	ts := newTestServer(t, Options{})
	ops := specOperations(t)
	answered, unavailable, missing := 0, 0, []string{}
	var report strings.Builder
	for _, op := range ops {
		path := strings.NewReplacer("{sessionId}", "probe", "{commandId}", "probe", "{id}", "probe", "{port}", "3000", "{processName}", "xvfb").Replace(op.path)
		resp := ts.do(t, op.method, path, strings.NewReader("{}"), "application/json")
		unrouted := resp.status == http.StatusNotFound && bytes.Contains(resp.body, []byte(`"route `))
		_, na := notAvailable(op)
		switch {
		case na:
			require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s: %s", op.id, resp.body)
			unavailable++
			fmt.Fprintf(&report, "  not available: %-32s %s %s\n", op.id, op.method, op.path)
		case unrouted:
			missing = append(missing, op.id)
		default:
			answered++
		}
	}
	reason, _ := notAvailable(specOperation{path: "/computeruse/"})
	t.Logf("toolbox operations answered: %d of %d; %d more deliberately answered as not available (%s)",
		answered, len(ops), unavailable, reason)
	t.Logf("not available:\n%s", report.String())
	require.Len(t, ops, 92, "the v0.190.0 toolbox spec has 92 operations")
	assert.Empty(t, missing, "operations the toolbox does not answer")
	assert.Equal(t, len(ops), answered+unavailable)
}
