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
	// Canceled: the caller gave up (its context was cancelled) before the
	// operation ended. The operation may or may not have taken effect.
	Canceled = wire.Canceled
	// DeadlineExceeded: the caller's deadline passed, or the backend did not
	// answer in time. The operation may or may not have taken effect.
	DeadlineExceeded = wire.DeadlineExceeded
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
	// No standard status says "the client left"; 499 is nginx's, the one
	// proxies and log readers know.
	Canceled:         499,
	DeadlineExceeded: http.StatusGatewayTimeout,
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
	case 499:
		return Canceled
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

// Is reports whether target is the sentinel of e's code (ErrNotFound for
// not_found...), or the context error that canceled and deadline_exceeded
// stand for, so that errors.Is(err, context.Canceled) holds for a
// cancellation the server reported too. Codes are compared, not messages.
func (e *Error) Is(target error) bool {
	switch target {
	case context.Canceled:
		return e.Code == Canceled
	case context.DeadlineExceeded:
		return e.Code == DeadlineExceeded
	}
	t, ok := target.(*Error)
	return ok && sentinels[e.Code] == t
}

// The sentinel errors, one per code: errors.Is(err, provider.ErrNotFound)
// holds for every error whose code is not_found, wherever it was made. A
// bare context error carries no *Error: Code(err) classifies it, and
// errors.Is(err, context.Canceled) matches it and its coded forms alike.
var (
	ErrNotFound           = sentinel(NotFound)
	ErrAlreadyExists      = sentinel(AlreadyExists)
	ErrInvalidArgument    = sentinel(InvalidArgument)
	ErrFailedPrecondition = sentinel(FailedPrecondition)
	ErrPreflightFailed    = sentinel(PreflightFailed)
	ErrCreateFailed       = sentinel(CreateFailed)
	ErrUnsupported        = sentinel(Unsupported)
	ErrUnavailable        = sentinel(Unavailable)
	ErrUnauthenticated    = sentinel(Unauthenticated)
	ErrPermissionDenied   = sentinel(PermissionDenied)
	ErrResourceExhausted  = sentinel(ResourceExhausted)
	ErrInternal           = sentinel(Internal)
	ErrCanceled           = sentinel(Canceled)
	ErrDeadlineExceeded   = sentinel(DeadlineExceeded)
)

var sentinels = map[ErrorCode]*Error{}

func sentinel(code ErrorCode) *Error {
	e := &Error{Code: code, Message: string(code)}
	sentinels[code] = e
	return e
}

// Errorf returns an *Error with a formatted message. A %w verb keeps the cause.
func Errorf(code ErrorCode, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Code returns the code of err: its own when it carries one, canceled or
// deadline_exceeded for a context's end, internal otherwise, and "" for nil.
func Code(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
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
