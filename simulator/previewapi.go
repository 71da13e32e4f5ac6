package simulator

import (
	"crypto/subtle"
	"net/http"
	"strconv"
)

// previewAPI answers the preview tag of the API: the calls Daytona's proxy
// makes to decide whether a preview request passes (is the sandbox public,
// is this its token, may this user see it, which sandbox a signed URL
// opens, its signing key, whether to show the warning page).
//
// All but hasSandboxAccess are the proxy's own calls, which Daytona lets
// only the proxy's credential make: the simulator is its own proxy, and its
// admin key stands for that credential, so that a proxy run in front of
// the simulator, or a test playing one, can make them. An API key gets the
// guard's 403. Like Daytona, the answers never tell a private sandbox from
// a missing one: both are 404.
type previewAPI struct{ *Simulator }

func previewsOf(s *Simulator) previewAPI { return previewAPI{s} }

// proxyOps are the operations only the proxy's credential may call.
var proxyOps = map[string]bool{
	"isSandboxPublic": true, "isValidAuthToken": true, "getSigningKey": true,
	"getSandboxIdFromSignedPreviewUrlToken": true, "isPreviewWarningEnabled": true,
}

func previewRoutes() []route {
	return []route{
		{"GET", "/api/preview/{sandboxId}/public", "isSandboxPublic", part(previewsOf, previewAPI.isPublic)},
		{"GET", "/api/preview/{sandboxId}/validate/{authToken}", "isValidAuthToken", part(previewsOf, previewAPI.isValidToken)},
		{"GET", "/api/preview/{sandboxId}/access", "hasSandboxAccess", part(previewsOf, previewAPI.hasAccess)},
		{"GET", "/api/preview/{sandboxId}/signing-key", "getSigningKey", part(previewsOf, previewAPI.signingKey)},
		{"GET", "/api/preview/{sandboxId}/preview-warning", "isPreviewWarningEnabled", part(previewsOf, previewAPI.previewWarning)},
		{"GET", "/api/preview/{signedPreviewToken}/{port}/sandbox-id", "getSandboxIdFromSignedPreviewUrlToken", part(previewsOf, previewAPI.signedSandboxID)},
	}
}

// authenticateProxy admits the proxy's credential, the admin key.
func (s previewAPI) authenticateProxy(r *http.Request) *apiError {
	if subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.cfg.AdminKey)) == 1 {
		return nil
	}
	return errorf(http.StatusForbidden, "Forbidden resource: only Daytona's proxy calls this; the simulator's admin key stands for its credential")
}

// sandbox is the live sandbox of the path's id, in any organization (the
// proxy's view), or the 404 that hides which it is.
func (s previewAPI) sandbox(c *call, test func(*sandbox) bool) *apiError {
	id := c.params["sandboxId"]
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.rows.Get(id)
	if sb == nil || sb.gone || !test(sb) {
		return errorf(http.StatusNotFound, "Sandbox with ID %s not found", id)
	}
	c.sandboxID = sb.ID
	return nil
}

func (s previewAPI) isPublic(c *call) (reply, *apiError) {
	if e := s.sandbox(c, func(sb *sandbox) bool { return sb.Public }); e != nil {
		return reply{}, e
	}
	return reply{http.StatusOK, true}, nil
}

func (s previewAPI) isValidToken(c *call) (reply, *apiError) {
	token := c.params["authToken"]
	valid := func(sb *sandbox) bool { return subtle.ConstantTimeCompare([]byte(sb.AuthToken), []byte(token)) == 1 }
	if e := s.sandbox(c, valid); e != nil {
		return reply{}, e
	}
	return reply{http.StatusOK, true}, nil
}

// hasAccess answers whether the caller's organization owns the sandbox:
// each API key is its own organization's only member.
func (s previewAPI) hasAccess(c *call) (reply, *apiError) {
	if e := s.sandbox(c, func(sb *sandbox) bool { return sb.OrgID == c.org }); e != nil {
		return reply{}, e
	}
	return reply{http.StatusOK, true}, nil
}

// signingKey is the sandbox's signing key, as getSandboxSigningKey gives
// its owner.
func (s previewAPI) signingKey(c *call) (reply, *apiError) {
	var key string
	e := s.sandbox(c, func(sb *sandbox) bool {
		key = sb.signingKeyLocked(false)
		return true
	})
	if e != nil {
		return reply{}, e
	}
	return textReply(c, key), nil
}

// previewWarning is off: the simulator's proxy shows no warning page
// before a preview, so a proxy asking is told the same.
func (s previewAPI) previewWarning(c *call) (reply, *apiError) {
	if e := s.sandbox(c, func(*sandbox) bool { return true }); e != nil {
		return reply{}, e
	}
	return reply{http.StatusOK, map[string]bool{"enabled": false}}, nil
}

// signedSandboxID is the sandbox a signed preview token opens port of,
// while the token lives.
func (s previewAPI) signedSandboxID(c *call) (reply, *apiError) {
	if c.r.PathValue("tail") != "sandbox-id" { // see muxPatterns
		return reply{}, errorf(http.StatusNotFound, "Cannot GET %s", c.r.URL.Path)
	}
	port, err := strconv.Atoi(c.params["port"])
	if err != nil || port < 1 || port > 65535 {
		return reply{}, errorf(http.StatusBadRequest, "port must be a number from 1 to 65535")
	}
	s.mu.Lock()
	sb := proxyAPI{s.Simulator}.signedSandboxLocked(c.params["signedPreviewToken"], port)
	id := ""
	if sb != nil && !sb.gone {
		id = sb.ID
	}
	s.mu.Unlock()
	if id == "" {
		return reply{}, errorf(http.StatusNotFound, "Invalid or expired token")
	}
	c.sandboxID = id
	return textReply(c, id), nil
}

// textReply writes s as the text body NestJS sends for a string a handler
// returns.
func textReply(c *call, s string) reply {
	h := c.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(s)))
	h.Set("Cache-Control", "no-store")
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write([]byte(s))
	return reply{status: rawReply}
}
