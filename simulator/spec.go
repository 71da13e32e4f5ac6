package simulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/sandplane/sandplane/simulator/internal/specs"
)

// specEnv names an OpenAPI document to use in place of the embedded one,
// when Config.SpecPath is empty.
const specEnv = "SANDPLANE_DAYTONA_SPEC"

// SpecVersion is the Daytona release whose API document is the
// simulator's primary one: every operation it has is validated against it.
func SpecVersion() string { return specs.LatestVersion() }

// LegacySpecVersion is the older Daytona release whose API document the
// simulator keeps for the operations the primary one no longer has (the
// deprecated toolbox routes older SDKs call); it is the release of the Go
// api-client in go.mod.
func LegacySpecVersion() string { return specs.Version() }

// SpecException is a place where the real server and its OpenAPI document
// disagree. The simulator follows the server, and validates against the
// document with the exception applied.
type SpecException struct {
	Operation string `json:"operation,omitempty"`
	Schema    string `json:"schema,omitempty"`
	What      string `json:"what"`
	Why       string `json:"why"`
	apply     func(doc *openapi3.T, ops map[string]*opInfo) error
}

var statusTwoOhOneOps = []string{
	"setAutostopInterval", "setAutoArchiveInterval", "setAutoDeleteInterval",
	// Inferred: Daytona's setter beside the other three (autopause.go).
	"setAutoPauseInterval",
	"updatePublicStatus", "createBackup", "expireSignedPortPreviewUrl",
}

var nullableColumns = []string{"snapshot", "networkAllowList", "domainAllowList", "errorReason", "daemonVersion", "runnerId"}

// SpecExceptions lists every patch the simulator applies to the upstream
// document, each with the reason the real server wins.
func SpecExceptions() []SpecException {
	var out []SpecException
	for _, op := range statusTwoOhOneOps {
		out = append(out, SpecException{
			Operation: op,
			What:      "answers 201, not the documented 200",
			Why:       "a NestJS @Post without @HttpCode(200) answers 201",
			apply: func(doc *openapi3.T, ops map[string]*opInfo) error {
				info := ops[op]
				if info == nil {
					return fmt.Errorf("operation %s not in the document", op)
				}
				r := info.op.Responses.Value("200")
				if r == nil {
					return fmt.Errorf("%s has no 200 response", op)
				}
				info.op.Responses.Delete("200")
				info.op.Responses.Set("201", r)
				return nil
			},
		})
	}
	out = append(out,
		SpecException{
			Operation: "replaceLabels",
			What:      "answers the whole Sandbox, not SandboxLabels",
			Why:       "the controller returns the sandbox DTO after replacing the labels",
			apply: func(doc *openapi3.T, ops map[string]*opInfo) error {
				info := ops["replaceLabels"]
				sandbox := doc.Components.Schemas["Sandbox"]
				if info == nil || sandbox == nil {
					return errors.New("replaceLabels or Sandbox missing")
				}
				r := info.op.Responses.Value("200")
				if r == nil || r.Value == nil || r.Value.Content.Get("application/json") == nil {
					return errors.New("replaceLabels has no JSON 200 response")
				}
				r.Value.Content.Get("application/json").Schema = &openapi3.SchemaRef{Ref: "#/components/schemas/Sandbox", Value: sandbox.Value}
				return nil
			},
		},
		SpecException{
			Operation: "createSandbox",
			What:      "the request body is optional",
			Why:       "every CreateSandbox field is optional and the server accepts a request without a body",
			apply: func(doc *openapi3.T, ops map[string]*opInfo) error {
				info := ops["createSandbox"]
				if info == nil || info.op.RequestBody == nil || info.op.RequestBody.Value == nil {
					return errors.New("createSandbox has no request body")
				}
				info.op.RequestBody.Value.Required = false
				return nil
			},
		},
		SpecException{
			Operation: "updatePublicStatus",
			What:      "isPublic accepts any string",
			Why:       "the ValidationPipe's primitive transform turns 'true' into true and anything else into false",
			apply:     stringParam("updatePublicStatus", "isPublic"),
		},
	)
	for _, op := range []string{"setAutostopInterval", "setAutoArchiveInterval", "setAutoDeleteInterval"} {
		out = append(out, SpecException{
			Operation: op,
			What:      "a non-numeric interval is a 500, not a 400",
			Why:       "the path value reaches an integer column unchecked and the database error surfaces as 500",
			apply:     stringParam(op, "interval"),
		})
	}
	for _, op := range []string{"getSandboxSigningKey", "rotateSigningKey", "getSigningKey", "getSandboxIdFromSignedPreviewUrlToken"} {
		out = append(out, SpecException{
			Operation: op,
			What:      "the string (a key, a sandbox id) is a text/plain body, not a JSON string",
			Why:       "NestJS sends a string a handler returns as text, unquoted; every client reads the body as the string",
			apply:     textBody(op),
		})
	}
	for _, schema := range []string{"Sandbox", "SandboxListItem"} {
		out = append(out, SpecException{
			Schema: schema,
			What:   "nullable columns (" + strings.Join(nullableColumns, ", ") + ") may be null",
			Why:    "rows read back from Postgres carry null where the create response leaves the key out",
			apply: func(doc *openapi3.T, _ map[string]*opInfo) error {
				s := doc.Components.Schemas[schema]
				if s == nil || s.Value == nil {
					return fmt.Errorf("schema %s missing", schema)
				}
				for _, prop := range nullableColumns {
					p := s.Value.Properties[prop]
					if p == nil {
						continue
					}
					cp := *p.Value
					cp.Nullable = true
					s.Value.Properties[prop] = &openapi3.SchemaRef{Value: &cp}
				}
				return nil
			},
		})
	}
	return out
}

// textBody makes the 200 of op a text/plain string.
func textBody(op string) func(*openapi3.T, map[string]*opInfo) error {
	return func(doc *openapi3.T, ops map[string]*opInfo) error {
		info := ops[op]
		if info == nil {
			return fmt.Errorf("operation %s not in the document", op)
		}
		r := info.op.Responses.Value("200")
		if r == nil || r.Value == nil || r.Value.Content.Get("application/json") == nil {
			return fmt.Errorf("%s has no JSON 200 response", op)
		}
		cp := *r.Value
		cp.Content = openapi3.NewContentWithSchema(openapi3.NewStringSchema(), []string{"text/plain"})
		info.op.Responses.Set("200", &openapi3.ResponseRef{Value: &cp})
		return nil
	}
}

func stringParam(op, name string) func(*openapi3.T, map[string]*opInfo) error {
	return func(doc *openapi3.T, ops map[string]*opInfo) error {
		info := ops[op]
		if info == nil {
			return fmt.Errorf("operation %s not in the document", op)
		}
		for _, p := range info.op.Parameters {
			if p.Value != nil && p.Value.Name == name {
				cp := *p.Value
				cp.Schema = &openapi3.SchemaRef{Value: openapi3.NewStringSchema()}
				p.Value = &cp
				return nil
			}
		}
		return fmt.Errorf("%s has no parameter %s", op, name)
	}
}

type opInfo struct {
	// doc is the document the operation is from.
	doc    *openapi3.T
	path   string
	method string
	item   *openapi3.PathItem
	op     *openapi3.Operation
}

// spec is the patched upstream documents, ready to validate against: each
// operation from the primary document, or from the legacy one when the
// primary lacks it. It is shared and read-only once built.
type spec struct {
	doc *openapi3.T
	ops map[string]*opInfo

	mu         sync.Mutex
	violations []string
}

var (
	specMu    sync.Mutex
	specCache = map[string]*openapi3.T{}
)

// legacyKey is the cache key of the legacy document; no path is empty
// twice, and a file cannot be named with a NUL.
const legacyKey = "\x00legacy"

// loadSpec parses the primary document at path (empty: $SANDPLANE_DAYTONA_SPEC,
// else the embedded one) and the embedded legacy one, once, and applies
// the exceptions to the primary.
func loadSpec(path string) (*spec, error) {
	if path == "" {
		path = os.Getenv(specEnv)
	}
	specMu.Lock()
	defer specMu.Unlock()
	legacy, err := cachedDoc(legacyKey, parseLegacySpec, nil)
	if err != nil {
		return nil, err
	}
	doc, err := cachedDoc(path, func() (*openapi3.T, error) { return parseSpec(path) }, patchSpec)
	if err != nil {
		return nil, err
	}
	ops := indexOps(legacy)
	for id, info := range indexOps(doc) {
		ops[id] = info
	}
	return &spec{doc: doc, ops: ops}, nil
}

// cachedDoc returns the document cached under key, else parses it, patches
// it and caches it. specMu is held.
func cachedDoc(key string, parse func() (*openapi3.T, error), patch func(*openapi3.T) error) (*openapi3.T, error) {
	if doc := specCache[key]; doc != nil {
		return doc, nil
	}
	doc, err := parse()
	if err != nil {
		return nil, err
	}
	if patch != nil {
		if err := patch(doc); err != nil {
			return nil, err
		}
	}
	// The simulator authenticates requests itself, with Daytona's 401;
	// the validator need not look at credentials again.
	for _, info := range indexOps(doc) {
		info.op.Security = &openapi3.SecurityRequirements{}
	}
	specCache[key] = doc
	return doc, nil
}

// patchSpec applies every SpecException to doc.
func patchSpec(doc *openapi3.T) error {
	ops := indexOps(doc)
	for _, ex := range SpecExceptions() {
		if err := ex.apply(doc, ops); err != nil {
			return fmt.Errorf("spec exception %s%s (%s): %w", ex.Operation, ex.Schema, ex.What, err)
		}
	}
	return nil
}

// parseSpec reads the document at path, or the embedded primary one for "".
func parseSpec(path string) (*openapi3.T, error) {
	if path == "" {
		doc, err := openapi3.NewLoader().LoadFromData(specs.API)
		if err != nil {
			return nil, fmt.Errorf("load the embedded Daytona %s OpenAPI document: %w", SpecVersion(), err)
		}
		return doc, nil
	}
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load Daytona OpenAPI document %s: %w", path, err)
	}
	return doc, nil
}

// parseLegacySpec reads the embedded legacy document.
func parseLegacySpec() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(specs.LegacyAPI)
	if err != nil {
		return nil, fmt.Errorf("load the embedded Daytona %s OpenAPI document: %w", LegacySpecVersion(), err)
	}
	return doc, nil
}

func indexOps(doc *openapi3.T) map[string]*opInfo {
	ops := map[string]*opInfo{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID != "" {
				ops[op.OperationID] = &opInfo{doc: doc, path: path, method: method, item: item, op: op}
			}
		}
	}
	return ops
}

func (sp *spec) input(r *http.Request, op string, params map[string]string) (*openapi3filter.RequestValidationInput, bool) {
	info := sp.ops[op]
	if info == nil {
		return nil, false
	}
	return &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: params,
		Route:      &routers.Route{Spec: info.doc, Path: info.path, PathItem: info.item, Method: info.method, Operation: info.op},
		Options: &openapi3filter.Options{
			MultiError:         true,
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		},
	}, true
}

// validateRequest checks r against the operation and turns a failure into
// the 400 the real server would give.
func (sp *spec) validateRequest(r *http.Request, op string, params map[string]string) *apiError {
	in, ok := sp.input(r, op, params)
	if !ok {
		return nil
	}
	err := openapi3filter.ValidateRequest(r.Context(), in)
	if err == nil {
		return nil
	}
	return errorf(http.StatusBadRequest, "%s", validationMessage(err))
}

// validationMessage renders kin-openapi's errors the way class-validator
// words them, joined with ", " as NestJS joins its message array.
func validationMessage(err error) string {
	var errs []error
	var me openapi3.MultiError
	if errors.As(err, &me) {
		errs = me
	} else {
		errs = []error{err}
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, oneMessage(e)...)
	}
	if len(msgs) == 0 {
		return err.Error()
	}
	return strings.Join(msgs, ", ")
}

func oneMessage(err error) []string {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		var me openapi3.MultiError
		if errors.As(err, &me) {
			var out []string
			for _, e := range me {
				out = append(out, oneMessage(e)...)
			}
			return out
		}
		return []string{err.Error()}
	}
	if p := re.Parameter; p != nil {
		switch {
		case p.Schema != nil && p.Schema.Value != nil && p.Schema.Value.Type.Is("boolean"):
			return []string{msgBoolExpected}
		case p.Name == "port":
			return []string{"Invalid port"}
		}
		var se *openapi3.SchemaError
		if errors.As(re.Err, &se) {
			return []string{schemaMessage(p.Name, se)}
		}
		if errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			return []string{p.Name + " should not be empty"}
		}
		return []string{fmt.Sprintf("%s must be a valid %s", p.Name, paramType(p))}
	}
	// A body error: one message per failing property.
	var out []string
	var me openapi3.MultiError
	if errors.As(re.Err, &me) {
		for _, e := range me {
			var se *openapi3.SchemaError
			if errors.As(e, &se) {
				out = append(out, schemaMessage(strings.Join(se.JSONPointer(), "."), se))
			}
		}
	} else {
		var se *openapi3.SchemaError
		if errors.As(re.Err, &se) {
			out = append(out, schemaMessage(strings.Join(se.JSONPointer(), "."), se))
		}
	}
	if len(out) == 0 {
		var pe *openapi3filter.ParseError
		if errors.As(re.Err, &pe) {
			return []string{"Unexpected token in JSON body"}
		}
		return []string{re.Error()}
	}
	return out
}

func paramType(p *openapi3.Parameter) string {
	if p.Schema != nil && p.Schema.Value != nil && p.Schema.Value.Type != nil {
		return strings.Join(p.Schema.Value.Type.Slice(), "|")
	}
	return "value"
}

// schemaMessage words one schema failure like class-validator.
func schemaMessage(field string, se *openapi3.SchemaError) string {
	if field == "" {
		field = "body"
	}
	sch := se.Schema
	switch se.SchemaField {
	case "type", "format":
		switch {
		case sch == nil || sch.Type == nil:
		case sch.Type.Is("integer"), sch.Type.Is("number"):
			return field + " must be a number conforming to the specified constraints"
		case sch.Type.Is("string"):
			return field + " must be a string"
		case sch.Type.Is("boolean"):
			return field + " must be a boolean value"
		case sch.Type.Is("object"):
			return field + " must be an object"
		case sch.Type.Is("array"):
			return field + " must be an array"
		}
	case "minimum":
		if sch != nil && sch.Min != nil {
			return fmt.Sprintf("%s must not be less than %g", field, *sch.Min)
		}
	case "maximum":
		if sch != nil && sch.Max != nil {
			return fmt.Sprintf("%s must not be greater than %g", field, *sch.Max)
		}
	case "enum":
		if sch != nil {
			var vals []string
			for _, v := range sch.Enum {
				vals = append(vals, fmt.Sprint(v))
			}
			return fmt.Sprintf("%s must be one of the following values: %s", field, strings.Join(vals, ", "))
		}
	case "required":
		return se.Reason
	}
	return field + ": " + se.Reason
}

// validateResponse checks one 2xx API response against the patched
// document and records any violation.
func (sp *spec) validateResponse(r *http.Request, op string, params map[string]string, status int, header http.Header, body []byte) {
	if status < 200 || status >= 300 {
		return
	}
	in, ok := sp.input(r, op, params)
	if !ok {
		return
	}
	err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		sp.mu.Lock()
		sp.violations = append(sp.violations, fmt.Sprintf("%s %s (%s) %d: %v", r.Method, r.URL.Path, op, status, err))
		sp.mu.Unlock()
	}
}

// SpecViolations returns the API responses that did not match the upstream
// document (with SpecExceptions applied) since the simulator started.
// Config.ValidateResponses must be on.
func (s *Simulator) SpecViolations() []string {
	if s.spec == nil {
		return nil
	}
	s.spec.mu.Lock()
	defer s.spec.mu.Unlock()
	out := append([]string(nil), s.spec.violations...)
	sort.Strings(out)
	return out
}
