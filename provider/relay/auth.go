package relay

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/provider"
)

// Names on the wire, as Daytona's proxy uses them.
const (
	// TokenHeader carries a private sandbox's preview token.
	TokenHeader = provider.PreviewTokenHeader
	// TokenParam carries it in a link a browser opens.
	TokenParam = "DAYTONA_SANDBOX_AUTH_KEY"
	// SkipActivityHeader set to "true" asks for no activity refresh.
	SkipActivityHeader = "X-Daytona-Skip-Last-Activity-Update"
	// CookieName is the relay's access cookie.
	CookieName = "sandplane_preview"
)

// access is the outcome of the token check.
type access int

const (
	allowed access = iota
	denied
	redirected // a browser got its cookie and a clean URL to load
)

// authorize checks a private sandbox's token: the header, else the query
// parameter (exchanged for a cookie), else the cookie. A token that is
// present and wrong is refused without looking further.
func (rl *Relay) authorize(w http.ResponseWriter, r *http.Request, rt route, e *entry) access {
	want := e.target.Token
	if want == "" {
		return allowed
	}
	if got := r.Header.Get(TokenHeader); got != "" {
		if equal(got, want) {
			return allowed
		}
		return rl.deny(w, r, rt, "the preview token in "+TokenHeader+" is not this sandbox's")
	}
	if rt.prefix != "" {
		// Every path route shares the relay's origin (the daemon's, with
		// its API and dashboard): a cookie or a link token there would let
		// one sandbox's page, or any page served at that origin, act as
		// another sandbox's. Only the header, which a page cannot get
		// without the token, opens a path route.
		rl.writeError(w, r, provider.Errorf(provider.Unauthenticated,
			"sandbox %s port %d: it does not exist or is private; a path route opens only with its preview token in the %s header: in a browser open %s instead",
			rt.id, rt.port, TokenHeader, rl.hostURL(r, strconv.Itoa(rt.port)+"-"+rt.id)))
		return denied
	}
	if got, _, found := cutParam(r.URL.RawQuery, TokenParam); found {
		if !equal(got, want) {
			return rl.deny(w, r, rt, "the preview token in "+TokenParam+" is not this sandbox's")
		}
		http.SetCookie(w, rl.cookie(r, rt, e))
		if topLevelNavigation(r) {
			// A browser loads the page again without the token in its
			// address bar, history or Referer.
			_, rest, _ := cutParam(r.URL.RawQuery, TokenParam)
			u := url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: rest}
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, u.RequestURI(), http.StatusTemporaryRedirect)
			return redirected
		}
		return allowed
	}
	mac := rl.cookieValue(rt, e)
	for _, c := range r.CookiesNamed(CookieName) {
		if !equal(c.Value, mac) {
			continue
		}
		if crossOrigin(r) {
			// Under *.localhost every sandbox is the same site, so SameSite
			// alone would let one sandbox's page use another's cookie.
			return rl.deny(w, r, rt, "its cookie came with a request from another origin")
		}
		return allowed
	}
	return rl.deny(w, r, rt, "it does not exist or is private")
}

// crossOrigin reports whether a browser sent r on behalf of a page of
// another origin; a top-level navigation (a link followed) is fine.
func crossOrigin(r *http.Request) bool {
	if topLevelNavigation(r) {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	o := r.Header.Get("Origin")
	return o != "" && !sameHost(o, r.Host)
}

// topLevelNavigation reports whether r is a browser loading a page in its
// window (a link followed, an address typed): not a frame, which another
// sandbox's page could embed to act through this one's cookie.
func topLevelNavigation(r *http.Request) bool {
	dest := r.Header.Get("Sec-Fetch-Dest")
	return r.Header.Get("Sec-Fetch-Mode") == "navigate" && (dest == "document" || dest == "") &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// sameHost reports whether origin names the host of the request. Schemes
// and ports are left out: a TLS terminator in front changes both.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && hostname(u.Host) == hostname(host)
}

func (rl *Relay) deny(w http.ResponseWriter, r *http.Request, rt route, why string) access {
	rl.writeError(w, r, provider.Errorf(provider.Unauthenticated,
		"sandbox %s port %d: %s; send its preview token in the %s header, or open the preview link once with ?%s=<token>",
		rt.id, rt.port, why, TokenHeader, TokenParam))
	return denied
}

// cookie is host-only: only host routes set one, and a host-routed sandbox
// has a host of its own. HttpOnly keeps it from the sandbox's own scripts;
// SameSite=Lax sends it on the top-level navigation that follows the
// redirect, which Strict would not after a cross-site link.
func (rl *Relay) cookie(r *http.Request, rt route, e *entry) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: rl.cookieValue(rt, e), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	}
}

// cookieValue is a MAC of the sandbox, port and token under the relay's key:
// the cookie never holds the token, works for this sandbox and port only,
// and stops working when the token rotates (Daytona makes a new one on every
// start).
func (rl *Relay) cookieValue(rt route, e *entry) string {
	m := hmac.New(sha256.New, rl.cookieKey)
	m.Write([]byte("sandplane-relay-v1\x00" + e.target.ID + "\x00" + strconv.Itoa(rt.port) + "\x00" + e.target.Token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// cutParam finds the first name=value in a raw query and returns its
// unescaped value and the query without every occurrence of name, the rest
// kept byte for byte.
func cutParam(rawQuery, name string) (value, rest string, found bool) {
	if !strings.Contains(rawQuery, name) {
		return "", rawQuery, false
	}
	var kept []string
	for _, part := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == name {
			if !found {
				value, _ = url.QueryUnescape(v)
				found = true
			}
			continue
		}
		kept = append(kept, part)
	}
	return value, strings.Join(kept, "&"), found
}

// stripCookies removes the cookies named names from a Cookie header,
// keeping the sandbox's own cookies as they were.
func stripCookies(h http.Header, names []string) {
	lines := h.Values("Cookie")
	if !slices.ContainsFunc(lines, func(l string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return strings.Contains(l, n) })
	}) {
		return
	}
	var out []string
	changed := false
	for _, line := range lines {
		var kept []string
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if slices.Contains(names, name) {
				changed = true
				continue
			}
			kept = append(kept, strings.TrimSpace(part))
		}
		if len(kept) > 0 {
			out = append(out, strings.Join(kept, "; "))
		}
	}
	if !changed {
		return
	}
	h.Del("Cookie")
	for _, line := range out {
		h.Add("Cookie", line)
	}
}
