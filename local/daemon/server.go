package daemon

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	middleware "github.com/oapi-codegen/nethttp-middleware"

	"github.com/sandplane/sandplane/internal/netguard"
	"github.com/sandplane/sandplane/local/daemon/internal/api"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/relay"
	"github.com/sandplane/sandplane/provider/wire"
)

// maxBody bounds request bodies; the largest legitimate one is a create with
// its env.
const maxBody = 1 << 20

// Options configure a Server.
type Options struct {
	Manager *manager.Manager
	Version string
	// Token, when set, is required as "Authorization: Bearer <token>" on every
	// /v1 request except GET /v1/info, which probes use to recognise the
	// daemon.
	Token string
	// Hub feeds GET /v1/events; it must be the manager's OnEvent.
	Hub    *Hub
	Clock  clock.Clock
	Logger *slog.Logger
	// Containment is how native sandboxes are contained, for GET /v1/info
	// ("pid-namespace" or "process-group"); empty when none run here.
	Containment string
	// Isolation is the native runtime's isolation of snapshots that name
	// none, for GET /v1/info ("bwrap" or "none"); IsolationFallback says
	// why it is none when nobody asked for that.
	Isolation         string
	IsolationFallback error
	// PreviewIdleKeepAlive, when positive, is how long an open preview
	// connection that moves no bytes keeps counting as activity.
	PreviewIdleKeepAlive time.Duration
	// PreviewNotActivity, set by `serve --activity client-push`, keeps
	// preview traffic from moving the idle clock: only refresh-activity and
	// mutating calls do.
	PreviewNotActivity bool
}

// Server serves the API, the dashboard and the sandboxes' previews.
type Server struct {
	opts     Options
	hub      *Hub
	metrics  *metrics
	previews *relay.Relay
	handler  http.Handler
}

// New builds the server's handler.
func New(opts Options) (*Server, error) {
	if opts.Manager == nil {
		return nil, errors.New("daemon: a manager is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Hub == nil {
		return nil, errors.New("daemon: a hub (the manager's OnEvent) is required")
	}
	s := &Server{opts: opts, hub: opts.Hub}
	s.metrics = newMetrics(s)
	v1, err := s.v1Handler()
	if err != nil {
		return nil, err
	}
	if s.previews, err = newPreviewRelay(s); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", v1)
	mux.HandleFunc("GET /v1/events", s.events)
	s.routeOps(mux)
	s.routeDashboard(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, provider.Errorf(provider.NotFound, "no such page %s: the API is under /v1, the dashboard at /, previews under %s/<port>-<id>/", r.URL.Path, PreviewPath))
	})
	api := limitBodies(s.cors(s.authenticate(mux)))
	s.handler = s.recoverer(s.logRequests(s.loopbackOnly(s.splitPreviews(api))))
	return s, nil
}

// Handler is the server's root handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the preview proxy's heartbeats.
func (s *Server) Close() error { return s.previews.Close() }

// splitPreviews sends preview traffic to the relay, which has its own
// token rules (each sandbox's), bodies of any size and upgrades; the rest
// goes to next.
func (s *Server) splitPreviews(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if previewRequest(r) {
			s.previews.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitBodies bounds request bodies to maxBody.
func limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) v1Handler() (http.Handler, error) {
	spec, err := api.Spec()
	if err != nil {
		return nil, fmt.Errorf("load embedded contract: %w", err)
	}
	validate := middleware.OapiRequestValidatorWithOptions(spec, &middleware.Options{
		DoNotValidateServers:  true,
		SilenceServersWarning: true,
		Prefix:                "/v1",
		Options: openapi3filter.Options{
			// Authentication is the token middleware's job.
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         false,
		},
		ErrorHandlerWithOpts: func(ctx context.Context, err error, w http.ResponseWriter, r *http.Request, _ middleware.ErrorHandlerOpts) {
			if errors.Is(err, routers.ErrMethodNotAllowed) {
				writeMethodNotAllowed(w, r, allowedMethods(spec, strings.TrimPrefix(r.URL.Path, "/v1")))
				return
			}
			writeError(w, classifyValidation(r, err))
		},
	})
	strict := api.NewStrictHandlerWithOptions(strictAPI{s}, []api.StrictMiddlewareFunc{withRequest}, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, provider.Errorf(provider.InvalidArgument, "bad request: %v", err))
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, err)
		},
	})
	inner := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseURL: "/v1",
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, provider.Errorf(provider.InvalidArgument, "%v", err))
		},
	})
	return jsonBodies(validate(inner)), nil
}

// jsonBodies treats every request body as JSON, the only kind the API
// takes, so that `curl -d '{...}'` (which claims a form) just works. It
// reads the body whole first: one over maxBody is refused with 413, and one
// with anything but blanks after its JSON value with 400, since decoders
// downstream stop at the end of the first value and would act on a request
// the client did not send.
func jsonBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if r.ContentLength != 0 && (ct == "" || strings.HasPrefix(ct, "application/x-www-form-urlencoded")) {
			r.Header.Set("Content-Type", "application/json")
		}
		if r.ContentLength > maxBody {
			writeTooLarge(w)
			return
		}
		body, err := io.ReadAll(r.Body)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			writeTooLarge(w)
			return
		case err != nil:
			writeError(w, provider.Errorf(provider.InvalidArgument, "read request body: %v", err))
			return
		}
		if err := oneJSONValue(body); err != nil {
			writeError(w, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// oneJSONValue fails when body holds a JSON value followed by more than
// blanks. A body that is not JSON at all is left to the validator, whose
// message points at the field at fault. invalid_argument.
func oneJSONValue(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return provider.Errorf(provider.InvalidArgument, "request body has data after its JSON value (at byte %d): send exactly one JSON value", dec.InputOffset())
	}
	return nil
}

// writeTooLarge answers a body over maxBody: 413, with the contract's error
// body (invalid_argument: the request must change to succeed).
func writeTooLarge(w http.ResponseWriter) {
	writeErrorStatus(w, http.StatusRequestEntityTooLarge,
		provider.Errorf(provider.InvalidArgument, "request body is larger than %d bytes: send less (env values and labels are the usual culprits)", maxBody))
}

// writeMethodNotAllowed answers a method the path does not take as HTTP
// says (RFC 9110, section 15.5.6): 405 with the methods it takes in Allow.
// invalid_argument: the request must change.
func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeErrorStatus(w, http.StatusMethodNotAllowed, provider.Errorf(provider.InvalidArgument,
		"method %s is not allowed on %s: it takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// allowedMethods lists, sorted, the methods the contract gives the path
// that matches path ({param} templates match one segment).
func allowedMethods(spec *openapi3.T, path string) []string {
	var allow []string
	for tmpl, item := range spec.Paths.Map() {
		if !matchTemplate(tmpl, path) {
			continue
		}
		for method := range item.Operations() {
			allow = append(allow, method)
		}
	}
	slices.Sort(allow)
	return slices.Compact(allow)
}

// matchTemplate reports whether path fits the contract's path template.
func matchTemplate(tmpl, path string) bool {
	want, got := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return false
	}
	for i, seg := range want {
		param := strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}")
		if (param && got[i] == "") || (!param && seg != got[i]) {
			return false
		}
	}
	return true
}

// classifyValidation turns a kin-openapi failure into a coded error whose
// message points at the field at fault.
func classifyValidation(r *http.Request, err error) error {
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return provider.Errorf(provider.NotFound, "no route %s %s: see openapi/controlplane.yaml for the API", r.Method, r.URL.Path)
	}
	var re *openapi3filter.RequestError
	if errors.As(err, &re) {
		msg := re.Error()
		if re.Parameter != nil {
			msg = fmt.Sprintf("parameter %q: %v", re.Parameter.Name, re.Err)
		} else if re.RequestBody != nil && re.Err != nil {
			msg = "request body: " + schemaMessage(re.Err)
		}
		return provider.Errorf(provider.InvalidArgument, "%s", firstLine(msg))
	}
	return provider.Errorf(provider.InvalidArgument, "%s", firstLine(err.Error()))
}

// schemaMessage says what is wrong with a request body in a reader's
// words: the field, and the rule it breaks, as the contract's x-rule
// spells it for fields whose pattern no one should have to read. Only
// such fields (names and ids, never secrets) have their value quoted.
func schemaMessage(err error) string {
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		return err.Error()
	}
	field := strings.Join(se.JSONPointer(), ".")
	if rule, ok := se.Schema.Extensions["x-rule"].(string); ok && se.SchemaField == "pattern" {
		return fmt.Sprintf("%s %q must %s", field, fmt.Sprint(se.Value), rule)
	}
	if field == "" {
		return se.Reason
	}
	return field + ": " + se.Reason
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// writeError answers with the contract's error body and the status its code
// maps to.
func writeError(w http.ResponseWriter, err error) {
	writeErrorStatus(w, 0, err)
}

// writeErrorStatus is writeError with another status than the code's; 0
// means the code's.
func writeErrorStatus(w http.ResponseWriter, status int, err error) {
	code := provider.Code(err)
	if !provider.Valid(code) {
		code = provider.Internal
	}
	if status == 0 {
		status = provider.HTTPStatus(code)
	}
	var body wire.ErrorResponse
	body.Error.Code = code
	body.Error.Message = provider.Message(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// loopbackOnly refuses requests whose Host is not a loopback name
// (netguard.Classify), so a web page on another origin cannot reach the
// daemon through DNS rebinding. Names under localhost are loopback
// (browsers resolve them themselves); they carry previews, never the API.
func (s *Server) loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !netguard.Classify(r.Host).Loopback() {
			writeError(w, provider.Errorf(provider.PermissionDenied, "host %q is not loopback: sandplane answers only on 127.0.0.1, localhost and [::1], and previews on <port>-<id>.localhost", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cors allows cross-origin calls only from pages served on localhost or a
// loopback address (netguard.LoopbackOrigin), such as a developer's own web
// UI; never from a preview's page under localhost, which is a sandbox's.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !netguard.LoopbackOrigin(origin) {
			writeError(w, provider.Errorf(provider.PermissionDenied, "origin %q is not allowed: only pages on localhost may call the daemon", origin))
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// legacyTokenCookie is the cookie in which daemons before this one kept the
// token for the dashboard. No credential lives in a cookie any more: a
// browser sends a cookie of 127.0.0.1 to every port of 127.0.0.1, so a
// sandbox's server on its host port would receive it. The dashboard keeps
// the token in the tab's sessionStorage, which is per origin (port
// included), and sends it as a header. A stale cookie is cleared when the
// dashboard loads and stripped from every preview.
const legacyTokenCookie = "sandplane_token"

// authenticatedKey marks, in a request's context, a request that carried
// the token.
type authenticatedKey struct{}

// authenticated reports whether the request of ctx may see everything:
// it carried the token, or none is configured.
func (s *Server) authenticated(ctx context.Context) bool {
	return s.opts.Token == "" || ctx.Value(authenticatedKey{}) != nil
}

// refusedTokenKey marks an open request that carried a token other than the
// daemon's, so that GET /v1/info can tell the caller its token is wrong
// rather than missing.
type refusedTokenKey struct{}

// callerAuth is what the request's credentials are worth, as GET /v1/info
// tells its caller: the daemon holds no remote credential, so the evidence
// it has is the caller's own token, taken now.
func (s *Server) callerAuth(ctx context.Context) provider.Auth {
	auth := provider.Auth{State: provider.AuthRequired, Since: s.opts.Clock.Now()}
	switch {
	case s.opts.Token == "":
		auth.State, auth.Why = provider.AuthAuthenticated, "the daemon was started without a token: it takes every local caller"
	case s.authenticated(ctx):
		auth.State, auth.Why = provider.AuthAuthenticated, "this request carried the daemon's token"
	case ctx.Value(refusedTokenKey{}) != nil:
		auth.Why = "this request's bearer token is not the daemon's: send the token it was started with (its --token-file, or SANDPLANE_TOKEN)"
	default:
		auth.Why = "this request carried no token: send Authorization: Bearer <token> with the token the daemon was started with (its --token-file, or SANDPLANE_TOKEN)"
	}
	return auth
}

// bearer returns the token of an Authorization header. The scheme is
// case-insensitive (RFC 9110, section 11.1).
func bearer(header string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.opts.Token == "" {
		return next
	}
	want := []byte(s.opts.Token)
	valid := func(got string) bool { return subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Opening the dashboard as /?token=... once moves the token into
		// the fragment, which the page keeps in its tab and which no
		// request, log or Referer carries.
		if t := r.URL.Query().Get("token"); r.Method == http.MethodGet && r.URL.Path == "/" && t != "" {
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, "/#token="+url.PathEscape(t), http.StatusSeeOther)
			return
		}
		got := bearer(r.Header.Get("Authorization"))
		if valid(got) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, true)))
			return
		}
		// Open to probes, which get only what tells a sandplane daemon
		// from a squatter, and to the dashboard's pages, which without the
		// token are an empty shell that asks for it.
		if openPath(r) || dashboardShell(r) {
			if got != "" {
				r = r.WithContext(context.WithValue(r.Context(), refusedTokenKey{}, true))
			}
			next.ServeHTTP(w, r)
			return
		}
		writeError(w, provider.Errorf(provider.Unauthenticated,
			"missing or wrong token: send Authorization: Bearer <token> as configured with --token-file or SANDPLANE_TOKEN, or open the dashboard once as /#token=<token>"))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush keeps streaming responses streaming through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs method, path, status and duration, and counts them in
// the metrics. Never bodies, never
// query values (they may carry labels a user considers private).
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.opts.Clock.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		took := s.opts.Clock.Since(start)
		s.metrics.observe(r, rec.status, took)
		s.opts.Logger.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"duration", took.Round(time.Microsecond))
	})
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.opts.Logger.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
				writeError(w, provider.Errorf(provider.Internal, "internal error: the daemon log has details"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
