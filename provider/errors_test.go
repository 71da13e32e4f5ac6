package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCode(t *testing.T) {
	cause := io.ErrUnexpectedEOF
	tests := []struct {
		name string
		err  error
		want ErrorCode
	}{
		{"nil", nil, ""},
		{"coded", Errorf(NotFound, "x"), NotFound},
		{"wrapped coded", fmt.Errorf("ctx: %w", Errorf(AlreadyExists, "y")), AlreadyExists},
		{"deadline", context.DeadlineExceeded, DeadlineExceeded},
		{"cancelled", context.Canceled, Canceled},
		{"wrapped cancelled", fmt.Errorf("get: %w", context.Canceled), Canceled},
		{"coded around a cancellation", Errorf(Unavailable, "gave up: %w", context.Canceled), Unavailable},
		{"plain", errors.New("boom"), Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Code(tt.err)) })
	}
	err := Errorf(Internal, "read: %w", cause)
	assert.ErrorIs(t, err, cause, "%%w keeps the cause")
	assert.Equal(t, "read: unexpected EOF", Message(err))
	assert.Equal(t, "internal: read: unexpected EOF", err.Error())
}

func TestCodeForHTTPStatus(t *testing.T) {
	for status, want := range map[int]ErrorCode{
		404: NotFound, 400: InvalidArgument, 409: FailedPrecondition, 401: Unauthenticated,
		403: PermissionDenied, 429: ResourceExhausted, 503: Unavailable, 502: Unavailable, 500: Internal, 418: Internal,
		499: Canceled,
	} {
		assert.Equal(t, want, CodeForHTTPStatus(status), status)
	}
}

func TestSentinels(t *testing.T) {
	decoded := &Error{Code: NotFound, Message: "sandbox x not found"} // as a client decodes it
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"made here", Errorf(NotFound, "no sandbox %s", "x"), ErrNotFound, true},
		{"decoded from the wire", decoded, ErrNotFound, true},
		{"wrapped", fmt.Errorf("get: %w", decoded), ErrNotFound, true},
		{"other code", Errorf(AlreadyExists, "x"), ErrNotFound, false},
		{"sentinel itself", ErrUnavailable, ErrUnavailable, true},
		{"a coded error is not a sentinel", Errorf(NotFound, "x"), decoded, false},
		{"plain error", errors.New("boom"), ErrInternal, false},
		{"server-reported cancellation is context.Canceled", &Error{Code: Canceled}, context.Canceled, true},
		{"server-reported deadline is context.DeadlineExceeded", &Error{Code: DeadlineExceeded}, context.DeadlineExceeded, true},
		{"a deadline is not a cancellation", &Error{Code: DeadlineExceeded}, context.Canceled, false},
		{"cause kept under another code", Errorf(Unavailable, "gave up: %w", context.Canceled), context.Canceled, true},
		{"raw context error matches its sentinel through Code only", context.Canceled, ErrCanceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, errors.Is(tt.err, tt.target)) })
	}
	for code := range httpStatus {
		assert.Equal(t, code, Code(sentinels[code]), "every code has its sentinel")
	}
}
