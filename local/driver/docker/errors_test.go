package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func TestClassify(t *testing.T) {
	r, err := New(WithHost("tcp://127.0.0.1:1"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })

	coded := provider.Errorf(provider.AlreadyExists, "taken")
	tests := []struct {
		name string
		err  error
		want provider.ErrorCode
	}{
		{"nil", nil, ""},
		{"not found", fmt.Errorf("no such container: %w", cerrdefs.ErrNotFound), provider.NotFound},
		{"conflict", cerrdefs.ErrConflict, provider.FailedPrecondition},
		{"invalid argument", cerrdefs.ErrInvalidArgument, provider.InvalidArgument},
		{"engine unavailable", cerrdefs.ErrUnavailable, provider.Unavailable},
		{"engine gone mid-answer", fmt.Errorf("read build output: %w", io.ErrUnexpectedEOF), provider.Unavailable},
		{"connection reset", &net.OpError{Op: "read", Net: "unix", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, provider.Unavailable},
		{"broken pipe", &net.OpError{Op: "write", Net: "unix", Err: os.NewSyscallError("write", syscall.EPIPE)}, provider.Unavailable},
		{"unauthorized", cerrdefs.ErrUnauthenticated, provider.Unauthenticated},
		{"permission denied", cerrdefs.ErrPermissionDenied, provider.PermissionDenied},
		{"not implemented", cerrdefs.ErrNotImplemented, provider.Unsupported},
		{"unknown", errors.New("boom"), provider.Internal},
		{"already coded", coded, provider.AlreadyExists},
		{"context cancelled", context.Canceled, provider.Canceled},
		{"context deadline", context.DeadlineExceeded, provider.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.classify("do it", tt.err)
			assert.Equal(t, tt.want, provider.Code(got))
			if tt.err != nil {
				assert.ErrorIs(t, got, tt.err, "the cause is kept")
			}
		})
	}
}

func TestAs(t *testing.T) {
	assert.NoError(t, as(provider.CreateFailed, nil))
	internal := provider.Errorf(provider.Internal, "boom")
	got := as(provider.CreateFailed, internal)
	assert.Equal(t, provider.CreateFailed, provider.Code(got))
	assert.Equal(t, "boom", provider.Message(got))
	assert.ErrorIs(t, got, internal)

	down := provider.Errorf(provider.Unavailable, "engine down")
	assert.Same(t, down, as(provider.CreateFailed, down), "unavailable stays unavailable")
}
