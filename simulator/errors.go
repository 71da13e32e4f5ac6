package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// apiError is an error the API answers with a NestJS body.
type apiError struct {
	Status  int
	Message string
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

// nestBody is the body of Daytona's AllExceptionsFilter.
type nestBody struct {
	Path       string `json:"path"`
	Timestamp  string `json:"timestamp"`
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Message    string `json:"message"`
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
	writeJSON(w, e.Status, wire.NewErrorResponse(r, s.clk.Now(), e.Status, wire.ErrorCode(e.Status), e.Message))
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
		b = []byte(`{"statusCode":500,"error":"Internal Server Error","message":"An unexpected error occurred."}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
