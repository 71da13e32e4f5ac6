package docker

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/sandplane/sandplane/provider"
)

// classify turns an error of the Docker client into a provider error. It is
// the only place Docker errors get codes. what says what failed, for the
// message; errors that already carry a code and context errors pass through.
func (r *Driver) classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var pe *provider.Error
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch {
	case client.IsErrConnectionFailed(err) && errors.Is(err, fs.ErrPermission):
		return provider.Errorf(provider.Unavailable,
			"%s: permission denied on the docker engine socket at %s: add your user to the docker group or set DOCKER_HOST: %w",
			what, r.host(), err)
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err), cutOff(err):
		return provider.Errorf(provider.Unavailable,
			"%s: docker engine not answering at %s: start dockerd or set DOCKER_HOST: %w", what, r.host(), err)
	case cerrdefs.IsNotFound(err):
		return provider.Errorf(provider.NotFound, "%s: %w", what, err)
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		return provider.Errorf(provider.FailedPrecondition, "%s: %w", what, err)
	case cerrdefs.IsInvalidArgument(err):
		return provider.Errorf(provider.InvalidArgument, "%s: %w", what, err)
	case cerrdefs.IsUnauthorized(err):
		return provider.Errorf(provider.Unauthenticated, "%s: %w", what, err)
	case cerrdefs.IsPermissionDenied(err):
		return provider.Errorf(provider.PermissionDenied, "%s: %w", what, err)
	case cerrdefs.IsResourceExhausted(err):
		return provider.Errorf(provider.ResourceExhausted, "%s: %w", what, err)
	case cerrdefs.IsNotImplemented(err):
		return provider.Errorf(provider.Unsupported, "%s: %w", what, err)
	case cerrdefs.IsCanceled(err):
		return provider.Errorf(provider.Canceled, "%s: %w", what, err)
	case cerrdefs.IsDeadlineExceeded(err):
		return provider.Errorf(provider.DeadlineExceeded, "%s: %w", what, err)
	}
	return provider.Errorf(provider.Internal, "%s: %w", what, err)
}

// cutOff reports whether err is a connection to the engine that broke
// while it answered: an engine that stopped or crashed in the middle of a
// request (a build, a stop that waits), which the client reports as the
// transport's error rather than as a failed connection.
func cutOff(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}

// as re-codes err as code unless it says the engine is unreachable or the
// caller gave up, which stay what they are so that callers retry.
func as(code provider.ErrorCode, err error) error {
	switch c := provider.Code(err); {
	case err == nil:
		return nil
	case c == provider.Unavailable, c == provider.Canceled, c == provider.DeadlineExceeded, c == code:
		return err
	}
	return &provider.Error{Code: code, Message: provider.Message(err), Err: err}
}
