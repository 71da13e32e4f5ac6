package simulator

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/provider/clock"
)

const previewTokenHeader = "X-Daytona-Preview-Token"

var proxyTransport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{}).DialContext,
	MaxIdleConnsPerHost: 32,
	ForceAttemptHTTP2:   false,
}

// serveToolbox proxies {toolboxProxyUrl}/{sandboxId}/<path> to the
// sandbox's toolbox, as Daytona's proxy does, bumping activity on the way.
func (s *Simulator) serveToolbox(w http.ResponseWriter, r *http.Request) {
	start := s.clk.Now()
	id := r.PathValue("sandboxId")
	rec := &recorder{ResponseWriter: w}
	faultID := s.proxyToolbox(rec, r, id)
	s.calls.add(Call{Time: start, Method: r.Method, Path: r.URL.Path, Operation: "toolbox", SandboxID: id,
		Status: rec.status, Fault: faultID})
}

func (s *Simulator) proxyToolbox(w http.ResponseWriter, r *http.Request, id string) (faultID string) {
	org, aerr := s.authenticate(r)
	if aerr != nil {
		s.writeGinError(w, r, aerr)
		return ""
	}
	s.mu.Lock()
	sb := s.lookupID(org, id)
	name := ""
	if sb != nil {
		name = sb.Name
	}
	s.mu.Unlock()
	if sb == nil {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "sandbox %s not found", id))
		return ""
	}
	if ft, ok := s.faults.match("toolbox", id, name); ok {
		faultID = ft.ID
		if e := s.applyProxyFault(r.Context(), sb, ft); e != nil {
			s.writeGinError(w, r, e)
			return faultID
		}
	}
	s.mu.Lock()
	state, target, gone := sb.State, sb.toolboxURL, sb.gone
	s.mu.Unlock()
	switch {
	case gone:
		s.writeGinError(w, r, errorf(http.StatusNotFound, "sandbox %s not found", id))
		return faultID
	case state != stStarted:
		s.writeGinError(w, r, errorf(http.StatusBadRequest, msgNotStarted))
		return faultID
	case target == "":
		s.writeGinError(w, r, errorf(http.StatusServiceUnavailable, "%s", ErrNoWorkload.Error()))
		return faultID
	}
	u, err := url.Parse(target)
	if err != nil {
		s.writeGinError(w, r, errorf(http.StatusBadGateway, "bad toolbox address"))
		return faultID
	}
	stop := s.trackProxied(r, sb)
	defer stop()
	s.reverseProxy(u, "/"+r.PathValue("rest")).ServeHTTP(w, r)
	return faultID
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

// reverseProxy forwards to target with path, dropping the caller's
// credentials: the workload never sees the API key or the preview token.
func (s *Simulator) reverseProxy(target *url.URL, path string) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = target.Scheme
			pr.Out.URL.Host = target.Host
			pr.Out.URL.Path = strings.TrimRight(target.Path, "/") + path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del(previewTokenHeader)
			pr.Out.Header.Del(skipActivityHeader)
			pr.SetXForwarded()
		},
		Transport:     proxyTransport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			s.writeGinError(w, r, errorf(http.StatusBadGateway, "sandbox workload unreachable: %v", err))
		},
	}
}

var previewHost = regexp.MustCompile(`^([0-9]{1,5})-([A-Za-z0-9-]+)\.`)

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
	rec := &recorder{ResponseWriter: w}
	id, faultID := s.proxyPreview(rec, r, label, path)
	s.calls.add(Call{Time: start, Method: r.Method, Path: r.URL.Path, Operation: "preview", SandboxID: id,
		Status: rec.status, Fault: faultID})
}

func (s *Simulator) proxyPreview(w http.ResponseWriter, r *http.Request, label, path string) (id, faultID string) {
	portStr, rest, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil || port < 1 || port > 65535 {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "preview URL not found"))
		return "", ""
	}
	now := s.clk.Now()
	s.mu.Lock()
	sb := s.byID[rest]
	authorised := false
	switch {
	case sb != nil && !sb.gone:
		authorised = sb.Public || r.Header.Get(previewTokenHeader) == sb.AuthToken
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
	var name string
	if sb != nil {
		id, name = sb.ID, sb.Name
		if sb.gone {
			sb = nil
		}
	}
	s.mu.Unlock()
	if sb == nil {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "preview URL not found or expired"))
		return id, ""
	}
	if !authorised {
		s.writeGinError(w, r, errorf(http.StatusUnauthorized, "missing or invalid %s header", previewTokenHeader))
		return id, ""
	}
	if ft, ok := s.faults.match("preview", id, name); ok {
		faultID = ft.ID
		if e := s.applyProxyFault(r.Context(), sb, ft); e != nil {
			s.writeGinError(w, r, e)
			return id, faultID
		}
	}
	s.mu.Lock()
	state, gone := sb.State, sb.gone
	s.mu.Unlock()
	if gone {
		s.writeGinError(w, r, errorf(http.StatusNotFound, "preview URL not found or expired"))
		return id, faultID
	}
	if state != stStarted {
		s.writeGinError(w, r, errorf(http.StatusBadRequest, msgNotStarted))
		return id, faultID
	}
	target, err := s.backend.PortURL(id, port)
	if err != nil {
		s.writeGinError(w, r, errorf(http.StatusServiceUnavailable, "%v", err))
		return id, faultID
	}
	stop := s.trackProxied(r, sb)
	defer stop()
	s.reverseProxy(target, path).ServeHTTP(w, r)
	return id, faultID
}
