package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sandplane/sandplane/provider/wire"
)

// ErrorCode classifies an error. The set and its HTTP mapping are fixed by the
// contract (components.schemas.ErrorCode).
type ErrorCode = wire.ErrorCode

const (
	NotFound           = wire.NotFound
	AlreadyExists      = wire.AlreadyExists
	InvalidArgument    = wire.InvalidArgument
	FailedPrecondition = wire.FailedPrecondition
	// PreflightFailed is a FailedPrecondition found before anything was
	// spawned: an unknown snapshot, a missing command or image.
	PreflightFailed = wire.PreflightFailed
	// CreateFailed means the workload did not come up; everything the create
	// did was rolled back.
	CreateFailed    = wire.CreateFailed
	Unsupported     = wire.Unsupported
	Unavailable     = wire.Unavailable
	Unauthenticated = wire.Unauthenticated
	// PermissionDenied: the caller is known but not allowed, for example a
	// request whose Host or Origin is not loopback.
	PermissionDenied  = wire.PermissionDenied
	ResourceExhausted = wire.ResourceExhausted
	Internal          = wire.Internal
)

// httpStatus is the one table between codes and HTTP statuses.
var httpStatus = map[ErrorCode]int{
	NotFound:           http.StatusNotFound,
	AlreadyExists:      http.StatusConflict,
	InvalidArgument:    http.StatusBadRequest,
	FailedPrecondition: http.StatusConflict,
	PreflightFailed:    http.StatusUnprocessableEntity,
	CreateFailed:       http.StatusInternalServerError,
	Unsupported:        http.StatusNotImplemented,
	Unavailable:        http.StatusServiceUnavailable,
	Unauthenticated:    http.StatusUnauthorized,
	PermissionDenied:   http.StatusForbidden,
	ResourceExhausted:  http.StatusTooManyRequests,
	Internal:           http.StatusInternalServerError,
}

// HTTPStatus returns the status that carries code on the wire.
func HTTPStatus(code ErrorCode) int {
	if s, ok := httpStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// CodeForHTTPStatus classifies a status from a server that does not send a
// code of its own. Statuses shared by several codes get the general one.
func CodeForHTTPStatus(status int) ErrorCode {
	switch status {
	case http.StatusNotFound:
		return NotFound
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return InvalidArgument
	case http.StatusConflict, http.StatusPreconditionFailed:
		return FailedPrecondition
	case http.StatusUnauthorized:
		return Unauthenticated
	case http.StatusForbidden:
		return PermissionDenied
	case http.StatusTooManyRequests:
		return ResourceExhausted
	case http.StatusNotImplemented:
		return Unsupported
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Unavailable
	}
	return Internal
}

// Valid reports whether code is one of the contract's codes.
func Valid(code ErrorCode) bool {
	_, ok := httpStatus[code]
	return ok
}

// Error is an error with a code. Message is written for the person who reads
// it: what went wrong and what to do.
type Error struct {
	Code    ErrorCode
	Message string
	Err     error // the native cause, if any
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return fmt.Sprintf("%s: %v", e.Code, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message. A %w verb keeps the cause.
func Errorf(code ErrorCode, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Code returns the code of err: its own when it carries one, unavailable for
// a cancelled or expired context, internal otherwise, and "" for nil.
func Code(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Unavailable
	}
	return Internal
}

// Message returns the human part of err without its code prefix.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// IsNotFound is shorthand for Code(err) == NotFound.
func IsNotFound(err error) bool { return Code(err) == NotFound }
