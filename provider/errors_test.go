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
		{"deadline", context.DeadlineExceeded, Unavailable},
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
	} {
		assert.Equal(t, want, CodeForHTTPStatus(status), status)
	}
}
