package toolbox

import (
	"net/http"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// computerUseUnavailable is the daemon's answer on a sandbox whose image
// has no desktop: every computer-use route answers 503 with this message.
// The standard error fields come along so that clients reading either
// shape find the message.
type computerUseUnavailable struct {
	wire.ErrorResponse
	Details  string `json:"details"`
	Solution string `json:"solution"`
}

// handleComputerUse answers every /computeruse route: sandplane sandboxes
// have no X server, VNC or accessibility bus to drive.
func (s *server) handleComputerUse(w http.ResponseWriter, r *http.Request) {
	e := &apiError{status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE", msg: "Computer-use functionality is not available"}
	s.opts.Logger.Info("request failed", "method", r.Method, "path", r.URL.Path, "status", e.status, "error", e.msg)
	writeJSON(w, e.status, computerUseUnavailable{
		ErrorResponse: newErrorResponse(r, s.opts.Clock, e),
		Details:       "The computer-use plugin is not installed in this sandbox: it has no display server.",
		Solution:      "Use a sandbox image with computer-use support (an X server, VNC and the computer-use plugin).",
	})
}

// handleInit takes the token that the runner hands the daemon when the
// sandbox starts. The toolbox keeps it in memory only; it is never echoed
// or logged.
func (s *server) handleInit(w http.ResponseWriter, r *http.Request) {
	var req wire.InitializeRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Token == "" {
		s.fail(w, r, errorf(http.StatusBadRequest, "token is required"))
		return
	}
	s.initMu.Lock()
	s.initToken = req.Token
	s.initMu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"message": "toolbox initialized"})
}
