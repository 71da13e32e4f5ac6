package docker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/provider"
)

// A launch on docker counts the container up only once its workload
// answers HTTP: the engine's proxy accepts on the published port before
// anything in the container listens, and then holds or drops the
// connection as it likes, so an accepted connection proves nothing. Once
// Launch returns, the first request answers; a container whose workload
// never does fails the launch with unavailable and is removed.
func TestLaunchIsReadyWhenTheContainerAnswers(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	tests := []struct {
		name    string
		serves  bool          // whether the server listens on the published port
		timeout time.Duration // the launch's ReadyTimeout
	}{
		{name: "serving", serves: true, timeout: 30 * time.Second},
		// The short deadline holds whatever the machine's speed: nothing
		// ever answers there.
		{name: "published port with nothing behind it", serves: false, timeout: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := launcher.New(launcher.Config{Driver: h.rt, ReadyTimeout: tt.timeout, StopGrace: time.Second})
			require.NoError(t, err)
			spec := h.spec()
			var started []driver.Handle
			w, err := l.Launch(ctx, launcher.Request{
				Spec:  spec,
				Ready: launcher.ReadyHTTP("/"),
				Prepare: func(_ context.Context, s *driver.Spec) error {
					port := s.Port
					if !tt.serves {
						port = freePort(t) // the server listens elsewhere
					}
					s.Env = map[string]string{"PORT": strconv.Itoa(port)}
					return nil
				},
				Record: func(hd driver.Handle, _ int) error { started = append(started, hd); return nil },
			})
			if tt.serves {
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.End(context.Background(), w.Handle) })
				_, err := get(baseURL(w.Port) + "/")
				assert.NoError(t, err, "the first request after the launch is answered")
				return
			}
			require.Error(t, err)
			assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
			assert.Contains(t, err.Error(), "did not answer HTTP on port")
			require.Len(t, started, 1)
			for _, c := range h.containersOfRoot(ctx) {
				assert.NotEqual(t, started[0].ContainerID, c.ID, "the container that never answered is removed")
			}
		})
	}
}
