package provider

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type named struct {
	Provider
	host string
}

func TestOpen(t *testing.T) {
	Register("test-open", func(ctx context.Context, u *url.URL) (Provider, error) { return named{host: u.Host}, nil })
	p, err := Open(context.Background(), "test-open://h:1")
	require.NoError(t, err)
	assert.Equal(t, "h:1", p.(named).host)

	t.Setenv(EnvProvider, "test-open")
	p, err = Open(context.Background(), "")
	require.NoError(t, err, "a bare scheme from the environment works")
	assert.Equal(t, "", p.(named).host)

	_, err = Open(context.Background(), "nope://")
	assert.Equal(t, InvalidArgument, Code(err))
	assert.Contains(t, err.Error(), "test-open://")
	assert.Contains(t, err.Error(), EnvProvider)
	assert.Panics(t, func() { Register("test-open", nil) })

	Unregister("test-open")
	assert.NotContains(t, Schemes(), "test-open://", "unregistered")
	_, err = Open(context.Background(), "test-open://")
	assert.Equal(t, InvalidArgument, Code(err))
}
