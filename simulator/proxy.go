package simulator

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/provider/clock"
)

const previewTokenHeader = "X-Daytona-Preview-Token"

// serveToolbox proxies {toolboxProxyUrl}/{sandboxId}/<path> to the
// sandbox's toolbox, as Daytona's proxy does, bumping activity on the way.
func (s *Simulator) serveToolbox(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Now()
	id := r.PathValue("sandboxId")
	rec := &statusRecorder{ResponseWriter: w}
	c := Call{Time: start, Method: r.Method, Path: r.URL.Path, Operation: "toolbox", SandboxID: id}
	s.proxyToolbox(rec, r, id, &c)
	c.Status = rec.status
	s.calls.add(c)
}

// proxyToolbox serves a toolbox request and notes its organization and
// fault in log.
func (s *Simulator) proxyToolbox(w http.ResponseWriter, r *http.Request, id string, log *Call) {
	org, aerr := s.authenticate(r)
	if aerr != nil {
		s.writeGinError(w, r, aerr)
		return
	}
	log.Org = org
	s.mu.Lock()
	sb := s.lookupID(org, id)
	name := ""
	if sb != nil {
		name = sb.Name
	}
	s.mu.Unlock()
	if sb == nil {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "sandbox %s not found", id))
		return
	}
	if ft, ok := s.faults.match("toolbox", org, id, name); ok {
		log.Fault = ft.ID
		if e := s.applyProxyFault(r.Context(), sb, ft); e != nil {
			s.writeGinError(w, r, e)
			return
		}
	}
	s.mu.Lock()
	state, target, gone := sb.State, sb.toolboxURL, sb.gone
	s.mu.Unlock()
	switch {
	case gone:
		s.writeGinError(w, r, errorf(http.StatusNotFound, "sandbox %s not found", id))
		return
	case state != stStarted:
		s.writeGinError(w, r, errorf(http.StatusBadRequest, msgNotStarted))
		return
	case target == "":
		s.writeGinError(w, r, errorf(http.StatusServiceUnavailable, "%s", ErrNoWorkload.Error()))
		return
	}
	route, err := s.backend.Toolbox(r.Context(), id)
	if err != nil {
		s.writeRouteError(w, r, err)
		return
	}
	stop := s.trackProxied(r, sb)
	defer stop()
	s.reverseProxy(route, "/"+r.PathValue("rest")).ServeHTTP(w, r)
	return
}

// writeRouteError answers a request the backend found no route for. A port
// that is not the sandbox's gets the answer of a port nothing listens on:
// the proxy never says whether something else holds it.
func (s *Simulator) writeRouteError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrNoWorkload):
		s.writeGinError(w, r, errorf(http.StatusServiceUnavailable, "%s", err.Error()))
	case errors.Is(err, ErrNotListening):
		s.writeGinError(w, r, errorf(http.StatusBadGateway, "%s", err.Error()))
	default:
		s.writeGinError(w, r, errorf(http.StatusBadGateway, "%s: %v", ErrNotListening.Error(), err))
	}
}

// applyProxyFault applies a fault's delay, vanish and status to a proxied
// request.
func (s *Simulator) applyProxyFault(ctx context.Context, sb *sandbox, ft Fault) *apiError {
	if ft.Delay > 0 {
		if err := clock.Sleep(ctx, s.clk, durationOf(ft.Delay)); err != nil {
			return errorf(499, "client gone")
		}
	}
	if ft.Vanish {
		s.mu.Lock()
		if !sb.gone {
			s.vanishLocked(sb)
		}
		s.mu.Unlock()
	}
	if ft.Status != 0 {
		return faultError("toolbox", ft)
	}
	return nil
}

// reverseProxy forwards along route with path, dropping the caller's
// credentials: the workload never sees the API key or the preview token.
// A route with a Token (the toolbox's) carries the sandbox's own secret
// instead.
func (s *Simulator) reverseProxy(route Route, path string) *httputil.ReverseProxy {
	target := route.URL
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = target.Scheme
			pr.Out.URL.Host = target.Host
			pr.Out.URL.Path = strings.TrimRight(target.Path, "/") + path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = route.Host
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del(previewTokenHeader)
			pr.Out.Header.Del(skipActivityHeader)
			if route.Token != "" {
				pr.Out.Header.Set(previewTokenHeader, route.Token)
			}
			pr.SetXForwarded()
		},
		Transport:     route.Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			s.writeGinError(w, r, errorf(http.StatusBadGateway, "sandbox workload unreachable: %v", err))
		},
	}
}

var (
	previewHost  = regexp.MustCompile(`^([0-9]{1,5})-([A-Za-z0-9-]+)\.`)
	previewLabel = regexp.MustCompile(`^[0-9]{1,5}-[a-z0-9-]+$`)
)

// hostRouter sends requests whose Host is <port>-<id-or-token>.<domain> to
// the preview proxy, like Daytona's proxy domain.
func (s *Simulator) hostRouter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := previewHost.FindStringSubmatch(r.Host); m != nil {
			s.servePreview(w, r, m[1]+"-"+m[2], r.URL.Path)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Simulator) servePreviewPath(w http.ResponseWriter, r *http.Request) {
	s.servePreview(w, r, r.PathValue("label"), "/"+r.PathValue("rest"))
}

// servePreview proxies preview traffic. label is <port>-<sandboxId> for a
// preview link, authorised by the X-Daytona-Preview-Token header (or a
// public sandbox), or <port>-<token> for a signed preview URL.
func (s *Simulator) servePreview(w http.ResponseWriter, r *http.Request, label, path string) {
	start := s.clk.Now()
	rec := &statusRecorder{ResponseWriter: w}
	c := Call{Time: start, Method: r.Method, Path: r.URL.Path, Operation: "preview"}
	s.proxyPreview(rec, r, label, path, &c)
	c.Status = rec.status
	s.calls.add(c)
}

// proxyPreview serves a preview request and notes its sandbox, the
// sandbox's organization and the fault in log.
func (s *Simulator) proxyPreview(w http.ResponseWriter, r *http.Request, label, path string, log *Call) {
	portStr, rest, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil || port < 1 || port > 65535 {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "preview URL not found"))
		return
	}
	now := s.clk.Now()
	s.mu.Lock()
	sb := s.byID[rest]
	authorised := false
	switch {
	case sb != nil && !sb.gone:
		authorised = sb.Public || subtle.ConstantTimeCompare([]byte(r.Header.Get(previewTokenHeader)), []byte(sb.AuthToken)) == 1
	case s.signed[rest] != nil:
		t := s.signed[rest]
		if now.Before(t.expires) && t.port == port {
			sb = s.byID[t.sandboxID]
			authorised = true
		} else {
			if !now.Before(t.expires) {
				delete(s.signed, rest)
			}
			sb = nil
		}
	default:
		sb = nil
	}
	var id, name string
	if sb != nil {
		id, name = sb.ID, sb.Name
		log.SandboxID, log.Org = sb.ID, sb.OrgID
		if sb.gone {
			sb = nil
		}
	}
	s.mu.Unlock()
	if sb == nil {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "preview URL not found or expired"))
		return
	}
	if !authorised {
		s.writeGinError(w, r, errorf(http.StatusUnauthorized, "missing or invalid %s header", previewTokenHeader))
		return
	}
	if ft, ok := s.faults.match("preview", sb.OrgID, id, name); ok {
		log.Fault = ft.ID
		if e := s.applyProxyFault(r.Context(), sb, ft); e != nil {
			s.writeGinError(w, r, e)
			return
		}
	}
	s.mu.Lock()
	state, gone := sb.State, sb.gone
	s.mu.Unlock()
	if gone {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "preview URL not found or expired"))
		return
	}
	if state != stStarted {
		s.writeGinError(w, r, errorf(http.StatusBadRequest, msgNotStarted))
		return
	}
	route, err := s.backend.Port(r.Context(), id, port)
	if err != nil {
		s.writeRouteError(w, r, err)
		return
	}
	stop := s.trackProxied(r, sb)
	defer stop()
	s.reverseProxy(route, path).ServeHTTP(w, r)
	return
}

// statusRecorder notes the status of a proxied response for the call log
// and passes everything else through: bodies stream (the proxy flushes
// through Unwrap) and are never kept, and a WebSocket upgrade hijacks the
// connection (the SDKs follow logs, drive PTYs and the interpreter over
// WebSockets), noted as 101.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status < 200 { // an informational 1xx is not the answer
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack takes over the connection for an upgrade, whose 101 the proxy
// writes to the connection itself.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}
