package toolbox

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net/http"
	"strings"

	"github.com/sandplane/sandplane/internal/netguard"
)

// TokenHeader carries the sandbox's token, as Daytona's proxy expects it on
// preview traffic. "Authorization: Bearer <token>" is accepted as well.
const TokenHeader = "X-Daytona-Preview-Token"

// bodyKind says what a route accepts as a request body, by media type.
type bodyKind int

const (
	// noBody: the route reads no body. An empty one may come with any
	// Content-Type (axios labels an empty POST as a form); a body that is
	// not JSON is refused all the same.
	noBody bodyKind = iota
	jsonBody
	formBody
	// anyBody: the route decodes JSON whatever the label; POST /init is
	// sent as */* by the generated clients.
	anyBody
	// fileBody: multipart/form-data, or the file itself whatever its type
	// (upload-v2). What keeps a cross-site page out is the token, which it
	// cannot send without a preflight, and the Origin check.
	fileBody
)

// access is what the guard needs to know of a route.
type access struct {
	body bodyKind
	// open routes answer without the token. They must reveal nothing a
	// stranger could use: the version, which sandbox this is.
	open bool
}

// guard admits a request or answers it with 403, 401 or 415, in that order:
// a foreign Host (DNS rebinding) or Origin (a cross-site page) is refused
// before the token is looked at, and the body's type only once the caller is
// known. It reports whether the request may go on.
func (s *server) guard(w http.ResponseWriter, r *http.Request, a access) bool {
	if err := s.checkHost(r.Host); err != nil {
		s.fail(w, r, err)
		return false
	}
	if err := checkOrigin(r.Header); err != nil {
		s.fail(w, r, err)
		return false
	}
	if !a.open && !s.authorized(r.Header) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandplane-toolbox"`)
		s.fail(w, r, errorf(http.StatusUnauthorized,
			"missing or invalid sandbox token: send it in the %s header (GET /v1/sandboxes/{id}/preview-url answers it)", TokenHeader))
		return false
	}
	if err := checkContentType(r.Header.Get("Content-Type"), r.ContentLength != 0, a.body); err != nil {
		s.fail(w, r, err)
		return false
	}
	return true
}

// checkHost admits loopback names (netguard.Classify) and the configured
// extra hosts. A page on a name the attacker controls that resolves to
// 127.0.0.1 (DNS rebinding) still sends its own name as Host.
func (s *server) checkHost(hostport string) error {
	if netguard.Classify(hostport).Loopback() {
		return nil
	}
	if host, ok := netguard.Hostname(hostport); ok {
		for _, h := range s.opts.AllowedHosts {
			if allowed, ok := netguard.Hostname(h); ok && host == allowed {
				return nil
			}
		}
	}
	return errorf(http.StatusForbidden, "host %q is not allowed: the toolbox answers only loopback names (127.0.0.1, localhost, [::1]) and the hosts it is configured to allow", hostport)
}

// checkOrigin refuses requests made by a page that is not itself on a
// loopback address or localhost (netguard.LoopbackOrigin), and cross-site
// requests that carry no Origin (a browser leaves it off a plain GET).
// Programs send neither header.
func checkOrigin(h http.Header) error {
	if origins, ok := h["Origin"]; ok {
		for _, o := range origins {
			if !netguard.LoopbackOrigin(o) {
				return errorf(http.StatusForbidden, "origin %q is not allowed: the toolbox answers pages on loopback names only", o)
			}
		}
		return nil
	}
	if strings.EqualFold(h.Get("Sec-Fetch-Site"), "cross-site") {
		return errorf(http.StatusForbidden, "cross-site requests are not allowed")
	}
	return nil
}

// authorized compares the presented token with the configured one in
// constant time; hashing first keeps the comparison from leaking the
// token's length. Without a configured token every caller is authorized.
func (s *server) authorized(h http.Header) bool {
	if s.opts.Token == "" {
		return true
	}
	want := sha256.Sum256([]byte(s.opts.Token))
	ok := 0
	for _, got := range presentedTokens(h) {
		sum := sha256.Sum256([]byte(got))
		ok |= subtle.ConstantTimeCompare(want[:], sum[:])
	}
	return ok == 1
}

func presentedTokens(h http.Header) []string {
	var out []string
	for _, v := range h.Values(TokenHeader) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	for _, v := range h.Values("Authorization") {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			if tok = strings.TrimSpace(tok); tok != "" {
				out = append(out, tok)
			}
		}
	}
	return out
}

// checkContentType refuses a body of a type the route does not take. The
// types a browser may send cross-site without a preflight (form encodings,
// text/plain) are refused on every JSON route.
func checkContentType(contentType string, hasBody bool, b bodyKind) error {
	if b == anyBody || b == fileBody || b == noBody && !hasBody {
		return nil
	}
	mt := ""
	if contentType != "" {
		var err error
		mt, _, err = mime.ParseMediaType(contentType)
		if err != nil {
			return errorf(http.StatusUnsupportedMediaType, "unparsable Content-Type %q", contentType)
		}
	}
	switch b {
	case jsonBody:
		if mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, "Content-Type %q is not accepted: send the body as application/json", contentType)
		}
	case formBody:
		if mt != "multipart/form-data" {
			return errorf(http.StatusUnsupportedMediaType, "Content-Type %q is not accepted: send the body as multipart/form-data", contentType)
		}
	default:
		if mt != "" && mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, "Content-Type %q is not accepted: this endpoint takes no body", contentType)
		}
	}
	return nil
}
