package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// interruptingProvider is a provider whose Toolbox call is where Ctrl-C
// lands: it ends run's context and fails as a cancelled request does.
type interruptingProvider struct {
	provider.Provider // the methods run does not reach panic
	interrupt         context.CancelFunc
	deleted           []string
}

func (p *interruptingProvider) Create(_ context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	return &provider.Sandbox{Id: "sb-1", Name: req.Name, State: provider.StateStarted}, nil
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
