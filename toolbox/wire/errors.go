package wire

import (
	"net/http"
	"time"
)

// ErrorResponse is the daemon's error body (Daytona's common-go
// ErrorResponse), which every failure of the toolbox answers with:
//
//	{"statusCode":400,"message":"...","code":"BAD_REQUEST",
//	 "timestamp":"...","path":"/process/execute","method":"POST"}
//
// Bodies that say more (a bulk upload's partial failure, computer use's
// 503) embed it, so that a client reading only these fields finds them.
type ErrorResponse struct {
	StatusCode int       `json:"statusCode"`
	Message    string    `json:"message"`
	Code       string    `json:"code"`
	Timestamp  time.Time `json:"timestamp"`
	Path       string    `json:"path"`
	Method     string    `json:"method"`
}

// NewErrorResponse is the body that answers r with status, code and
// message at now, which it gives in UTC. Code is usually ErrorCode(status);
// the daemon names some failures more precisely (INVALID_REQUEST_BODY).
func NewErrorResponse(r *http.Request, now time.Time, status int, code, message string) ErrorResponse {
	return ErrorResponse{
		StatusCode: status,
		Message:    message,
		Code:       code,
		Timestamp:  now.UTC(),
		Path:       r.URL.Path,
		Method:     r.Method,
	}
}

// ErrorCode is the daemon's code for status (the simulator's proxies use
// it too); a status it has no name for
// is INTERNAL_SERVER_ERROR, as the daemon's own fallback says.
func ErrorCode(status int) string {
	if code, ok := errorCodes[status]; ok {
		return code
	}
	return "INTERNAL_SERVER_ERROR"
}

var errorCodes = map[int]string{
	http.StatusBadRequest:            "BAD_REQUEST",
	http.StatusUnauthorized:          "UNAUTHORIZED",
	http.StatusForbidden:             "FORBIDDEN",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusRequestTimeout:        "REQUEST_TIMEOUT",
	http.StatusConflict:              "CONFLICT",
	http.StatusGone:                  "GONE",
	http.StatusRequestEntityTooLarge: "PAYLOAD_TOO_LARGE",
	http.StatusUnsupportedMediaType:  "UNSUPPORTED_MEDIA_TYPE",
	http.StatusUnprocessableEntity:   "UNPROCESSABLE_ENTITY",
	// The toolbox never answers 429; the simulator's proxies do, for a
	// rate-limit fault, and a client reads the code.
	http.StatusTooManyRequests: "TOO_MANY_REQUESTS",
}
