package toolbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/wire"
)

// apiError is a failure with the status and code it is answered with.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// errorf makes an apiError whose code follows from status.
func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, code: wire.ErrorCode(status), msg: fmt.Sprintf(format, args...)}
}

// codedf makes an apiError with one of the daemon's domain codes
// (wire.Code...), which SDK 0.218 maps to a class of its own.
func codedf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return errorf(http.StatusInternalServerError, "%v", err)
}

// newErrorResponse is e's body in answer to r, at the time c tells.
func newErrorResponse(r *http.Request, c clock.Clock, e *apiError) wire.ErrorResponse {
	return wire.NewErrorResponse(r, c.Now(), e.status, e.code, e.msg)
}

func writeError(w http.ResponseWriter, r *http.Request, c clock.Clock, err error) {
	e := asAPIError(err)
	writeJSON(w, e.status, newErrorResponse(r, c, e))
}

// fail answers err and logs it without any request body.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := asAPIError(err)
	s.opts.Logger.Info("request failed", "method", r.Method, "path", r.URL.Path, "status", e.status, "error", e.msg)
	writeError(w, r, s.opts.Clock, e)
}

// errs adapts a handler that returns its error instead of answering it:
// fail answers it, so the handler reads as its steps.
func (s *server) errs(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// A value JSON cannot hold (a NaN, say) is the toolbox's fault: the
		// caller still gets Daytona's error shape, as JSON.
		status = http.StatusInternalServerError
		b, _ = json.Marshal(wire.ErrorResponse{StatusCode: status, Code: wire.ErrorCode(status), Source: wire.SourceDaemon,
			Message: "the toolbox could not encode its answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// readJSON decodes a JSON request body of at most limit bytes into v.
// Unknown fields are ignored, as gin's binding does.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errorf(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", limit)
		}
		return nil, errorf(http.StatusBadRequest, "reading request body: %v", err)
	}
	return body, nil
}

func decodeJSON(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &apiError{status: http.StatusBadRequest, code: "INVALID_REQUEST_BODY", msg: "invalid request body: " + err.Error()}
	}
	return nil
}
