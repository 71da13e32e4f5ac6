package main

import (
	"bytes"
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// refusedWatcher is a provider whose event stream ends on its own, as the
// local provider's does once the daemon refuses it for good.
type refusedWatcher struct{ provider.Provider }

func (refusedWatcher) Traits() provider.Traits { return provider.Traits{Name: "refusing"} }

func (refusedWatcher) Watch(context.Context, provider.WatchOptions) (<-chan provider.Event, error) {
	ch := make(chan provider.Event, 1)
	ch <- provider.Event{Type: provider.EventSandboxesReplaced}
	close(ch)
	return ch, nil
}

func TestWatchFailsWhenTheStreamEndsBeforeCtrlC(t *testing.T) {
	provider.Register("refused-watch-test", func(context.Context, *url.URL) (provider.Provider, error) { return refusedWatcher{}, nil })
	t.Cleanup(func() { provider.Unregister("refused-watch-test") })
	cmd := newWatchCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--json", "--provider", "refused-watch-test://"})
	err := cmd.ExecuteContext(context.Background())
	require.Error(t, err, "a script must see that no more events will come")
	assert.Equal(t, 4, exitCode(err), "%v", err)
	assert.Contains(t, stdout.String(), "sandboxes_replaced", "the events before the end are printed")
}
