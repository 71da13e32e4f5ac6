package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/toolbox"
	"github.com/sandplane/sandplane/toolbox/client"
)

func newToolboxWith(t *testing.T, opts toolbox.Options) string {
	t.Helper()
	opts.WorkDir = t.TempDir()
	opts.HomeDir = opts.WorkDir
	h := toolbox.NewHandler(opts)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		h.(io.Closer).Close()
	})
	return ts.URL
}

func TestFollowAndSendInput(t *testing.T) {
	url := newToolboxWith(t, toolbox.Options{})
	c := client.New(url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.CreateSession(ctx, "s"))
	id, err := c.ExecAsync(ctx, "s", `echo ready; read -r who; echo "hello $who"; echo done >&2`)
	require.NoError(t, err)

	var stdout, stderr lockedBuffer
	followed := make(chan error, 1)
	go func() { followed <- c.Follow(ctx, "s", id, &stdout, &stderr) }()
	require.Eventually(t, func() bool { return stdout.String() == "ready\n" }, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, c.SendInput(ctx, "s", id, "ada\n"))
	require.NoError(t, <-followed)
	assert.Equal(t, "ready\nada\nhello ada\n", stdout.String())
	assert.Equal(t, "done\n", stderr.String())

	err = c.SendInput(ctx, "s", id, "late\n")
	assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "%v", err)
	err = c.Follow(ctx, "s", "nope", io.Discard, io.Discard)
	assert.Equal(t, provider.NotFound, provider.Code(err), "%v", err)
}

func TestEntrypoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := client.New(newToolboxWith(t, toolbox.Options{}), nil)
	_, err := c.Entrypoint(ctx)
	assert.Equal(t, provider.NotFound, provider.Code(err), "%v", err)

	c = client.New(newToolboxWith(t, toolbox.Options{Entrypoint: "echo served; echo oops >&2"}), nil,
		client.WithHTTPClient(&http.Client{}))
	sess, err := c.Entrypoint(ctx)
	require.NoError(t, err)
	require.Len(t, sess.Commands, 1)
	var stdout, stderr lockedBuffer
	require.NoError(t, c.FollowEntrypoint(ctx, &stdout, &stderr))
	assert.Equal(t, "served\n", stdout.String())
	assert.Equal(t, "oops\n", stderr.String())
}
