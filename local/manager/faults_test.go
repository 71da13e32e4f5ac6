package manager

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/runtime"
	"github.com/sandplane/sandplane/local/runtime/runtimetest"
	"github.com/sandplane/sandplane/provider"
)

// A daemon restarted without a runtime (docker's engine was down, say) keeps
// that runtime's sandboxes as they are; every operation on them must answer
// with a coded error, never a panic, and reads must keep working.
func TestSandboxOfADisabledRuntime(t *testing.T) {
	dockerRT := runtimetest.New(provider.RuntimeDocker)
	h := newHarness(t, func(o *Options) {
		o.Runtimes[provider.RuntimeDocker] = dockerRT
		o.Snapshots[DefaultSnapshot] = Snapshot{Command: []string{"workload"}, Image: "img", Ready: "none"}
	})
	ctx := context.Background()
	h.create(provider.CreateRequest{Id: "boxed", Runtime: provider.RuntimeDocker})
	h.create(provider.CreateRequest{Id: "native"})

	h.opts.Runtimes = map[provider.Runtime]runtime.Runtime{provider.RuntimeNative: h.rt}
	h.restart()

	assert.Equal(t, provider.StateStarted, h.get("boxed").State, "kept as recorded")
	assert.Len(t, h.m.List(ctx, nil), 2)
	calls := map[string]func() error{
		"stop":   func() error { _, err := h.m.Stop(ctx, "boxed"); return err },
		"start":  func() error { _, err := h.m.Start(ctx, "boxed"); return err },
		"delete": func() error { return h.m.Delete(ctx, "boxed") },
		"logs":   func() error { _, err := h.m.EntrypointLogs(ctx, "boxed"); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = call() })
			require.Error(t, err)
			assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
			assert.Contains(t, provider.Message(err), "docker")
		})
	}
	assert.Equal(t, 1, dockerRT.Running(), "the workload is left alone, not forgotten")
	assert.Equal(t, provider.StateStarted, h.get("boxed").State)
}
