package native

import (
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"syscall"

	"github.com/sandplane/sandplane/provider"
)

// phase says what the runtime was doing when a native error happened; the
// same errno means different things to the caller in different phases.
type phase int

const (
	// phasePreflight checks a spec: anything wrong is the spec's fault.
	phasePreflight phase = iota
	// phaseSpawn forks and execs the workload.
	phaseSpawn
	// phaseInspect reads /proc to learn about a process.
	phaseInspect
	// phaseControl signals processes and reads logs.
	phaseControl
)

// classify turns an os or syscall error met during ph into a provider error.
// It is the only place native errors get codes. what says what failed, for the
// message; errors that already carry a code and context errors pass through.
func classify(ph phase, what string, err error) error {
	if err == nil {
		return nil
	}
	var pe *provider.Error
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ee *exec.Error
	if errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound) && ph <= phaseSpawn {
		return provider.Errorf(provider.PreflightFailed,
			"command %q not found on PATH: install it or fix the snapshot's command: %w", ee.Name, err)
	}
	var code provider.ErrorCode
	switch {
	case exhausted(err):
		code = provider.ResourceExhausted
	case ph == phasePreflight:
		code = provider.PreflightFailed
	case ph == phaseSpawn && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.ENOTDIR)):
		// The executable or the directory changed between the checks and
		// the exec: still the spec's fault, not the machine's.
		code = provider.PreflightFailed
	case ph == phaseSpawn:
		code = provider.CreateFailed
	case ph == phaseInspect:
		code = provider.Unavailable
	default:
		code = provider.Internal
	}
	return provider.Errorf(code, "%s: %w", what, err)
}

func exhausted(err error) bool {
	for _, e := range []syscall.Errno{syscall.EAGAIN, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE, syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
