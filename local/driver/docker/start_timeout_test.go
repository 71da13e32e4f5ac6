package docker

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// hungEngine is an engine that takes every request and never answers one,
// as a wedged dockerd does: each call returns only when its context ends.
type hungEngine struct {
	once  sync.Once
	asked chan struct{} // closed at the first request
}

func (h *hungEngine) RoundTrip(r *http.Request) (*http.Response, error) {
	h.once.Do(func() { close(h.asked) })
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// A create's context has no deadline: an engine that never answers must
// still end the Start, with a message that points at the engine.
func TestStartOnAHungEngineEnds(t *testing.T) {
	engine := &hungEngine{asked: make(chan struct{})}
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://127.0.0.1:2375"),
		client.WithHTTPClient(&http.Client{Transport: engine}), client.WithVersion("1.41"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	clk := clocktest.NewFake(time.Now())
	r, err := New(WithClock(clk), WithClient(cli))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })

	done := make(chan error, 1)
	go func() {
		_, err := r.Start(context.Background(), driver.Spec{SandboxID: "hung", Root: t.TempDir(), Image: "img", Port: 4100, SandboxPort: 4100})
		done <- err
	}()
	select {
	case <-engine.asked:
	case <-time.After(30 * time.Second):
		t.Fatal("Start never asked the engine")
	}
	clk.Advance(startTimeout - time.Second)
	select {
	case err := <-done:
		t.Fatalf("Start ended before its bound: %v", err)
	default:
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
		assert.Contains(t, provider.Message(err), "did not finish starting the container within 5m0s: check that it answers (docker info)")
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not end at its bound")
	}
}
