package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// apiError is an error the API answers with a NestJS body.
type apiError struct {
	Status  int
	Message string
	// Code is the body's machine-readable code; empty, apiCode(Status).
	Code string
	// Header is added to the response (Retry-After and friends).
	Header http.Header
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Message) }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{Status: status, Message: fmt.Sprintf(format, args...)}
}

// The messages are Daytona's, word for word.
const (
	msgInvalidCredentials = "Invalid credentials"
	msgInProgress         = "Sandbox state change in progress"
	msgErrored            = "Sandbox is in an errored state"
	msgNotStoppable       = "Sandbox is not in a stoppable state"
	msgNotPausable        = "Sandbox must be in started state to pause"
	msgNotValidState      = "Sandbox is not in valid state"
	msgNotStopped         = "Sandbox is not stopped"
	msgEphemeralArchive   = "Ephemeral sandboxes cannot be archived"
	msgUnexpected         = "An unexpected error occurred."
	msgModified           = "Sandbox was modified by another operation"
	msgBoolExpected       = "Validation failed (boolean string is expected)"
	msgThrottled          = "ThrottlerException: Too Many Requests"
	msgNotStarted         = "failed to resolve container IP after 3 attempts: no IP address found. Is the Sandbox started?"
)

func notFound(idOrName string) *apiError {
	return errorf(http.StatusNotFound, "Sandbox with ID or name %s not found", idOrName)
}

// nestBody is the body of Daytona's AllExceptionsFilter, with the code
// and source that SDK 0.218 reads beside the fields older SDKs read
// (statusCode, error, message). The SDK picks its class from (source,
// code) when it knows the pair and from the status otherwise; it knows no
// DAYTONA_API pair, so for the API the status decides (400
// DaytonaValidationError, 404 DaytonaNotFoundError, 409
// DaytonaConflictError, 429 DaytonaRateLimitError, ...) and the code is
// there for callers that read err.code.
type nestBody struct {
	Path       string `json:"path"`
	Timestamp  string `json:"timestamp"`
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Message    string `json:"message"`
	Code       string `json:"code"`
	Source     string `json:"source"`
}

// apiCode is the API's code for status: the upper-case name of the status,
// as the daemon's codes spell theirs (Daytona's server after v0.190 is not
// public; the SDKs read the field, and this spelling is the one its
// toolbox document gives for the same statuses).
func apiCode(status int) string {
	if status == http.StatusServiceUnavailable {
		return "SERVICE_UNAVAILABLE"
	}
	if status >= 500 && status != http.StatusBadGateway && status != http.StatusGatewayTimeout {
		return "INTERNAL_SERVER_ERROR"
	}
	text := http.StatusText(status)
	if text == "" {
		return "INTERNAL_SERVER_ERROR"
	}
	return strings.ToUpper(strings.NewReplacer(" ", "_", "-", "_", "'", "").Replace(text))
}

// code is e's body code.
func (e *apiError) code() string {
	if e.Code != "" {
		return e.Code
	}
	return apiCode(e.Status)
}

func (s *Simulator) writeAPIError(w http.ResponseWriter, r *http.Request, e *apiError) {
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	msg := e.Message
	if e.Status >= 500 && msg == "" {
		msg = msgUnexpected
	}
	writeJSON(w, e.Status, nestBody{
		Path:       r.URL.RequestURI(),
		Timestamp:  iso(s.clk.Now()),
		StatusCode: e.Status,
		Error:      http.StatusText(e.Status),
		Message:    msg,
		Code:       e.code(),
		Source:     wire.SourceAPI,
	})
}

// writeGinError answers e with the error body of the toolbox, the runner
// and the proxy (gin's, in Daytona), built where the toolbox builds its own.
func (s *Simulator) writeGinError(w http.ResponseWriter, r *http.Request, e *apiError) {
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	writeJSON(w, e.Status, ginBody(r.URL.Path, r.Method, s.clk.Now(), e))
}

// ginBody is the proxy's own error body for e: the daemon's shape and
// codes, with source DAYTONA_PROXY, since no toolbox answered.
func ginBody(path, method string, now time.Time, e *apiError) wire.ErrorResponse {
	code := wire.ErrorCode(e.Status)
	if e.Code != "" {
		code = e.Code
	}
	return wire.ErrorResponse{StatusCode: e.Status, Message: e.Message, Code: code, Source: wire.SourceProxy,
		Timestamp: now.UTC(), Path: path, Method: method}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	if e, ok := v.(encodedJSON); ok {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(*e.b)))
		w.WriteHeader(status)
		_, _ = w.Write(*e.b)
		e.release()
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"statusCode":500,"error":"Internal Server Error","message":"An unexpected error occurred.","code":"INTERNAL_SERVER_ERROR","source":"DAYTONA_API"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
