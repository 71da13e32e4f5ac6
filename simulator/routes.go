package simulator

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/sandplane/sandplane/internal/netguard"
	"github.com/sandplane/sandplane/provider/clock"
)

// call is one API request on its way through the middleware.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	op     string
	org    string
	params map[string]string
	body   []byte
	fault  Fault
	// faultID names the fault that shaped the answer, for the call log.
	faultID string
	// sandboxID names the sandbox for the call log.
	sandboxID string
	// after runs once the response is written (a createSandbox vanish).
	after func()
}

// reply is what a handler answers: a status and a JSON body (nil for none).
type reply struct {
	status int
	body   any
}

type handlerFunc func(*Simulator, *call) (reply, *apiError)

type route struct {
	method  string
	pattern string
	op      string
	h       handlerFunc
}

var pathParam = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// muxPatterns are where the routes ServeMux cannot take by their own
// pattern are registered. The document's
// /preview/{signedPreviewToken}/{port}/sandbox-id and
// /preview/{sandboxId}/validate/{authToken} both match
// /preview/x/validate/sandbox-id and neither is more specific, which
// ServeMux refuses; with its last segment a wildcard the first is the less
// specific, and its handler checks that segment.
var muxPatterns = map[string]string{
	"getSandboxIdFromSignedPreviewUrlToken": "/api/preview/{signedPreviewToken}/{port}/{tail}",
}

func muxPattern(rt route) string {
	if p, ok := muxPatterns[rt.op]; ok {
		return p
	}
	return rt.pattern
}

func apiRoutes() []route {
	return append([]route{
		{"GET", "/api/sandbox", "listSandboxes", part(listsOf, listAPI.listSandboxes)},
		{"POST", "/api/sandbox", "createSandbox", (*Simulator).createSandbox},
		{"GET", "/api/sandbox/paginated", "listSandboxesPaginated_deprecated", part(listsOf, listAPI.listPaginated)},
		{"GET", "/api/sandbox/{sandboxIdOrName}", "getSandbox", part(sandboxesOf, sandboxAPI.getSandbox)},
		{"DELETE", "/api/sandbox/{sandboxIdOrName}", "deleteSandbox", part(sandboxesOf, sandboxAPI.deleteSandbox)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/start", "startSandbox", part(sandboxesOf, sandboxAPI.startSandbox)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/stop", "stopSandbox", part(sandboxesOf, sandboxAPI.stopSandbox)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/pause", "pauseSandbox", part(sandboxesOf, sandboxAPI.pauseSandbox)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/archive", "archiveSandbox", part(sandboxesOf, sandboxAPI.archiveSandbox)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/recover", "recoverSandbox", part(sandboxesOf, sandboxAPI.recoverSandbox)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/resize", "resizeSandbox", part(sandboxesOf, sandboxAPI.resizeSandbox)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/backup", "createBackup", part(sandboxesOf, sandboxAPI.createBackup)},
		{"PUT", "/api/sandbox/{sandboxIdOrName}/labels", "replaceLabels", part(sandboxesOf, sandboxAPI.replaceLabels)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/autostop/{interval}", "setAutostopInterval", part(sandboxesOf, sandboxAPI.setAutostop)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/autopause/{interval}", "setAutoPauseInterval", part(sandboxesOf, sandboxAPI.setAutoPause)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/autoarchive/{interval}", "setAutoArchiveInterval", part(sandboxesOf, sandboxAPI.setAutoArchive)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/autodelete/{interval}", "setAutoDeleteInterval", part(sandboxesOf, sandboxAPI.setAutoDelete)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/ttl/{ttlMinutes}", "setTtl", part(sandboxesOf, sandboxAPI.setTTL)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/public/{isPublic}", "updatePublicStatus", part(sandboxesOf, sandboxAPI.setPublic)},
		{"POST", "/api/sandbox/{sandboxId}/last-activity", "updateLastActivity", part(sandboxesOf, sandboxAPI.lastActivity)},
		{"GET", "/api/sandbox/{sandboxIdOrName}/ports/{port}/preview-url", "getPortPreviewUrl", part(sandboxesOf, sandboxAPI.previewURL)},
		{"GET", "/api/sandbox/{sandboxIdOrName}/ports/{port}/signed-preview-url", "getSignedPortPreviewUrl", part(sandboxesOf, sandboxAPI.signedPreviewURL)},
		{"POST", "/api/sandbox/{sandboxIdOrName}/ports/{port}/signed-preview-url/{token}/expire", "expireSignedPortPreviewUrl", part(sandboxesOf, sandboxAPI.expireSignedPreviewURL)},
		{"GET", "/api/sandbox/{sandboxId}/toolbox-proxy-url", "getToolboxProxyUrl", part(sandboxesOf, sandboxAPI.toolboxProxyURLHandler)},
		{"GET", "/api/sandbox/{sandboxIdOrName}/build-logs-url", "getBuildLogsUrl", part(sandboxesOf, sandboxAPI.buildLogsURL)},
	}, slices.Concat(extraRoutes(), secretRoutes(), warmPoolRoutes(), webhookRoutes(), previewRoutes())...)
}

// publicOps need no API key.
var publicOps = map[string]bool{"HealthController_check": true, "ConfigController_getConfig": true}

func (s *Simulator) routes() http.Handler {
	s.proxies = s.newProxies()
	mux := http.NewServeMux()
	for _, rt := range apiRoutes() {
		mux.Handle(rt.method+" "+muxPattern(rt), s.apiHandler(rt))
	}
	mux.HandleFunc("GET /api/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(identHeader, "simulator")
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle(eventsPath+"/", s.events.handler)
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.writeAPIError(w, r, errorf(http.StatusNotFound, "Cannot %s %s", r.Method, r.URL.Path))
	})
	mux.HandleFunc("/toolbox/{sandboxId}/{rest...}", s.serveToolbox)
	// The deprecated toolbox routes of the API, which older SDKs use: the
	// same proxy.
	mux.HandleFunc("/api/toolbox/{sandboxId}/toolbox/{rest...}", s.serveDeprecatedToolbox)
	mux.HandleFunc("/_preview/{label}/{rest...}", s.servePreviewPath)
	mux.HandleFunc("/_preview/{label}", s.servePreviewPath)
	s.adminRoutes(mux)
	mux.HandleFunc("/", s.serveDashboard)
	return s.hostGuard(s.hostRouter(mux))
}

// hostGuard refuses requests whose Host a simulator on loopback does not
// go by, so that a web page whose name rebinds to 127.0.0.1 cannot drive it
// (create a sandbox and run commands in it with any key). Unless AnyHost.
func (s *Simulator) hostGuard(next http.Handler) http.Handler {
	if s.cfg.AnyHost {
		return next
	}
	base := ""
	if u, err := url.Parse(s.cfg.BaseURL); err == nil {
		base, _ = netguard.Hostname(u.Host)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowedHost(r.Host, base) {
			s.writeAPIError(w, r, errorf(http.StatusForbidden,
				"host %q is not allowed: the simulator answers on loopback names, *.localhost and the host of its base URL", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowedHost reports whether hostport names a simulator on loopback: a
// loopback address, localhost or a name under it (netguard.Classify;
// browsers resolve those to loopback themselves, so no DNS can rebind
// them), base, or a preview name <port>-<id>.base.
func allowedHost(hostport, base string) bool {
	if netguard.Classify(hostport).Loopback() {
		return true
	}
	host, ok := netguard.Hostname(hostport)
	if !ok || base == "" {
		return false
	}
	if host == base {
		return true
	}
	label, ok := strings.CutSuffix(host, "."+base)
	return ok && previewLabel.MatchString(label)
}

// identHeader marks the health answer, so that Identify can tell a
// simulator from whatever else holds a port.
const identHeader = "X-Sandplane"

// Identify reports whether a sandplane simulator answers at base
// (http://host:port), as a start on a taken port wants to say.
func Identify(ctx context.Context, c *http.Client, base string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/health", nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && resp.Header.Get(identHeader) == "simulator"
}

// serveDashboard stands in for Daytona's dashboard: any path outside /api
// gets HTML, which is what a DAYTONA_API_URL without /api runs into.
func (s *Simulator) serveDashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!doctype html><html><head><title>Daytona (sandplane simulator)</title></head>"+
		"<body><p>This is the sandplane Daytona simulator. The API lives under <code>/api</code>: "+
		"set DAYTONA_API_URL to this address followed by /api.</p></body></html>\n")
}

// bearer returns the API key of r, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authenticate maps r's API key to its organization. Every failure is the
// same 401, as in Daytona.
func (s *Simulator) authenticate(r *http.Request) (string, *apiError) {
	key := bearer(r)
	if key == "" {
		return "", errorf(http.StatusUnauthorized, msgInvalidCredentials)
	}
	if len(s.cfg.APIKeys) > 0 && !containsSecret(s.cfg.APIKeys, key) {
		return "", errorf(http.StatusUnauthorized, msgInvalidCredentials)
	}
	return s.orgNames.of(key), nil
}

// keyOrg is the organization of an accepted API key, or "".
func (s *Simulator) keyOrg(key string) string {
	if key == "" || len(s.cfg.APIKeys) > 0 && !containsSecret(s.cfg.APIKeys, key) {
		return ""
	}
	return s.orgNames.of(key)
}

// containsSecret reports whether key is one of keys, comparing each in
// constant time.
func containsSecret(keys []string, key string) bool {
	found := 0
	for _, k := range keys {
		found |= subtle.ConstantTimeCompare([]byte(k), []byte(key))
	}
	return key != "" && found == 1
}

// normalizeQuery rewrites qs-style "key[]" parameters to repeated keys,
// which is how the document describes arrays.
func normalizeQuery(u *url.URL) {
	if !strings.Contains(u.RawQuery, "%5B%5D") && !strings.Contains(u.RawQuery, "[]") {
		return
	}
	q := u.Query()
	for k, vs := range q {
		if base, ok := strings.CutSuffix(k, "[]"); ok {
			q[base] = append(q[base], vs...)
			delete(q, k)
		}
	}
	u.RawQuery = q.Encode()
}

// recorder keeps a copy of the response for validation.
type recorder struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.buf.Write(b)
	return r.ResponseWriter.Write(b)
}

// apiHandler runs the middleware chain of one API route: auth, faults,
// validation against the document, the handler, the call log.
func (s *Simulator) apiHandler(rt route) http.Handler {
	names := pathParam.FindAllStringSubmatch(rt.pattern, -1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.clk.Now()
		normalizeQuery(r.URL)
		c := &call{w: w, r: r, op: rt.op, params: make(map[string]string, len(names))}
		for _, n := range names {
			c.params[n[1]] = r.PathValue(n[1])
		}
		var rec *recorder
		if s.cfg.ValidateResponses && s.spec != nil {
			rec = &recorder{ResponseWriter: w}
			c.w = rec
		}
		status, faultID := s.serveAPI(c)
		if c.after != nil {
			c.after()
		}
		if rec != nil {
			s.spec.validateResponse(r, rt.op, c.params, rec.status, rec.Header(), rec.buf.Bytes())
		}
		s.calls.add(Call{Time: start, Org: c.org, Method: r.Method, Path: r.URL.Path, Operation: rt.op,
			SandboxID: c.sandboxID, Status: status, Fault: faultID})
	})
}

func (s *Simulator) serveAPI(c *call) (status int, faultID string) {
	fail := func(e *apiError) (int, string) {
		s.writeAPIError(c.w, c.r, e)
		return e.Status, c.faultID
	}
	switch {
	case publicOps[c.op]:
	case proxyOps[c.op]:
		if aerr := previewsOf(s).authenticateProxy(c.r); aerr != nil {
			return fail(aerr)
		}
	default:
		org, aerr := s.authenticate(c.r)
		if aerr != nil {
			return fail(aerr)
		}
		c.org = org
	}

	target := c.params["sandboxIdOrName"]
	if target == "" {
		target = c.params["sandboxId"]
	}
	if s.faults.Any() {
		if code, handled := s.applyFault(c, target); handled {
			return code, c.faultID
		}
	}

	if c.r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(c.r.Body, 10<<20))
		if err != nil {
			return fail(errorf(http.StatusBadRequest, "could not read the request body"))
		}
		c.body = b
		c.r.Body = io.NopCloser(bytes.NewReader(b))
		if len(bytes.TrimSpace(b)) > 0 && c.r.Header.Get("Content-Type") == "" {
			c.r.Header.Set("Content-Type", "application/json")
		}
	}
	if target != "" && !proxyOps[c.op] {
		// Daytona's access guard runs before any pipe or validation: an
		// unknown sandbox is a 404 whatever else is wrong with the request.
		// The proxy's calls see every organization's sandboxes.
		s.mu.RLock()
		_, gerr := s.lookup(c.org, target)
		s.mu.RUnlock()
		if gerr != nil {
			return fail(gerr)
		}
	}
	if s.spec != nil && !s.cfg.DisableValidation {
		if verr := s.spec.validateRequest(c.r, c.op, c.params); verr != nil {
			return fail(verr)
		}
		c.r.Body = io.NopCloser(bytes.NewReader(c.body))
	}

	rep, herr := routeHandler(c.op)(s, c)
	if herr != nil {
		return fail(herr)
	}
	if rep.status == rawReply {
		return http.StatusOK, c.faultID
	}
	if rep.body == nil {
		c.w.WriteHeader(rep.status)
		return rep.status, c.faultID
	}
	writeJSON(c.w, rep.status, rep.body)
	return rep.status, c.faultID
}

// applyFault matches the request against the faults and applies the one
// that fits: its delay, its vanish, its status. handled means the fault
// answered the request.
func (s *Simulator) applyFault(c *call, target string) (status int, handled bool) {
	var ids []string
	if target != "" {
		ids = []string{target}
		s.mu.RLock()
		if sb, err := s.lookup(c.org, target); err == nil {
			ids = append(ids, sb.ID, sb.Name)
			c.sandboxID = sb.ID
		}
		s.mu.RUnlock()
	}
	ft, ok := s.faults.Match(c.op, c.org, ids...)
	if !ok {
		return 0, false
	}
	c.faultID = ft.ID
	c.fault = ft
	if ft.Delay > 0 {
		if err := clock.Sleep(c.r.Context(), s.clk, durationOf(ft.Delay)); err != nil {
			return 499, true
		}
	}
	if ft.Vanish && target != "" {
		s.mu.Lock()
		if sb, err := s.lookup(c.org, target); err == nil {
			s.vanishLocked(sb)
		}
		s.mu.Unlock()
	}
	if ft.Status != 0 {
		e := faultError(c.op, ft)
		s.writeAPIError(c.w, c.r, e)
		return e.Status, true
	}
	return 0, false
}

var handlers = func() map[string]handlerFunc {
	m := map[string]handlerFunc{}
	for _, rt := range apiRoutes() {
		m[rt.op] = rt.h
	}
	return m
}()

func routeHandler(op string) handlerFunc { return handlers[op] }

// decodeBody reads a JSON body into v; an empty body leaves v alone.
func (c *call) decodeBody(v any) *apiError {
	if len(bytes.TrimSpace(c.body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return errorf(http.StatusBadRequest, "Unexpected token in JSON body")
	}
	return nil
}

// withTimeout is the request's context, for waits that end with the client.
func (c *call) ctx() context.Context { return c.r.Context() }
