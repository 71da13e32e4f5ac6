package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// interruptingProvider is a provider whose Toolbox call is where Ctrl-C
// lands: it ends run's context and fails as a cancelled request does.
type interruptingProvider struct {
	provider.Provider // the methods run does not reach panic
	interrupt         context.CancelFunc
	deleted           []string
}

func (p *interruptingProvider) Create(_ context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	return &provider.Sandbox{ID: "sb-1", Name: req.Name, State: provider.StateStarted}, nil
}

// Get finds the sandbox still started: a failure is the command's own.
func (p *interruptingProvider) Get(_ context.Context, id string) (*provider.Sandbox, error) {
	return &provider.Sandbox{ID: id, State: provider.StateStarted}, nil
}

func (p *interruptingProvider) Info(context.Context) (*provider.Info, error) {
	return &provider.Info{}, nil
}

func (p *interruptingProvider) Delete(_ context.Context, id string) error {
	p.deleted = append(p.deleted, id)
	return nil
}

func (p *interruptingProvider) Toolbox(ctx context.Context, _ string) (string, http.Header, error) {
	p.interrupt()
	return "", nil, provider.Errorf(provider.Unavailable, "toolbox request cancelled: %w", ctx.Err())
}

func TestRunInterruptedAnywhereExitsWithTheInterruptCode(t *testing.T) {
	fake := &interruptingProvider{}
	provider.Register("interrupting-test", func(context.Context, *url.URL) (provider.Provider, error) { return fake, nil })
	t.Cleanup(func() { provider.Unregister("interrupting-test") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake.interrupt = cancel

	var stderr bytes.Buffer
	o := &clientOptions{provider: "interrupting-test://", clk: clock.Real(), stdout: &bytes.Buffer{}, stderr: &stderr}
	code, err := runInSandbox(ctx, o, provider.CreateRequest{Name: "x"}, []string{"true"}, true)
	require.NoError(t, err)
	assert.Equal(t, interruptedCode, code)
	assert.Equal(t, []string{"sb-1"}, fake.deleted, "--rm still deletes the sandbox")
	assert.Contains(t, stderr.String(), "Deleting sandbox sb-1")
}

// slowCreator is a provider whose Create takes as long as the test says.
type slowCreator struct {
	interruptingProvider
	called, release chan struct{}
}

func (p *slowCreator) Create(ctx context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	close(p.called)
	<-p.release
	if err := ctx.Err(); err != nil {
		return nil, provider.Errorf(provider.Unavailable, "create: %v", err)
	}
	return p.interruptingProvider.Create(ctx, req)
}

func (p *slowCreator) Toolbox(context.Context, string) (string, http.Header, error) {
	return "", nil, provider.Errorf(provider.Unsupported, "no toolbox in this test")
}

func TestRunWaitsForASlowCreate(t *testing.T) {
	fake := &slowCreator{called: make(chan struct{}), release: make(chan struct{})}
	provider.Register("slow-create-test", func(context.Context, *url.URL) (provider.Provider, error) { return fake, nil })
	t.Cleanup(func() { provider.Unregister("slow-create-test") })
	clk := clocktest.NewFake(time.Time{})
	var stderr bytes.Buffer
	o := &clientOptions{provider: "slow-create-test://", clk: clk, stdout: &bytes.Buffer{}, stderr: &stderr}
	errc := make(chan error, 1)
	go func() {
		_, err := runInSandbox(context.Background(), o, provider.CreateRequest{Name: "x"}, []string{"true"}, true)
		errc <- err
	}()
	<-fake.called
	// Only an interrupt bounds the wait: a create is as slow as it is.
	clk.Advance(2 * cleanupTimeout)
	close(fake.release)
	err := <-errc
	assert.Equal(t, provider.Unsupported, provider.Code(err), "the create succeeded and run got as far as the toolbox: %v", err)
	assert.Contains(t, stderr.String(), "Sandbox: sb-1")
	assert.Equal(t, []string{"sb-1"}, fake.deleted)
}
