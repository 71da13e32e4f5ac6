package relay

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// stubProvider answers the four calls the adapter makes; any other call
// panics on the nil embedded interface.
type stubProvider struct {
	provider.Provider
	sb        provider.Sandbox
	getErr    error
	minute    string
	infoCalls int
	preview   string
	token     string
	refreshed []string
}

func (s *stubProvider) Get(context.Context, string) (*provider.Sandbox, error) {
	if s.getErr != nil {
		return nil, s.getErr
	}
	sb := s.sb
	return &sb, nil
}

func (s *stubProvider) Info(context.Context) (*provider.Info, error) {
	s.infoCalls++
	return &provider.Info{Minute: s.minute}, nil
}

func (s *stubProvider) PreviewURL(_ context.Context, _ string, port int) (*provider.Preview, error) {
	if port == 9 {
		return nil, provider.Errorf(provider.InvalidArgument, "port 9 is not published")
	}
	return &provider.Preview{URL: s.preview, Token: s.token}, nil
}

func (s *stubProvider) Traits() provider.Traits { return provider.Traits{Name: "stub"} }

func (s *stubProvider) RefreshActivity(_ context.Context, id string) error {
	s.refreshed = append(s.refreshed, id)
	return nil
}

func TestFromProvider(t *testing.T) {
	ctx := context.Background()
	started := provider.Sandbox{ID: "abc123", Name: "demo", State: provider.StateStarted, AutoStopInterval: 15}

	t.Run("a started sandbox: canonical id, interval in the provider's minutes", func(t *testing.T) {
		p := &stubProvider{sb: started, minute: "2s", preview: "http://127.0.0.1:4100"}
		r := FromProvider(p)
		tg, err := r.Resolve(ctx, "demo", 4100)
		require.NoError(t, err)
		assert.Equal(t, "abc123", tg.ID)
		assert.Equal(t, "http://127.0.0.1:4100", tg.URL.String())
		assert.Equal(t, 30*time.Second, tg.AutoStop)
		assert.Equal(t, 2*time.Second, tg.Minute)
		assert.Empty(t, tg.Token, "a URL-only preview answer (a signed URL) makes a public target")
		assert.Equal(t, http.Header{SkipActivityHeader: {"true"}}, tg.Header,
			"no token to send; the upstream proxy leaves activity to the relay")
		_, err = r.Resolve(ctx, "demo", 4100)
		require.NoError(t, err)
		assert.Equal(t, 1, p.infoCalls, "the minute is asked once")
		require.NoError(t, r.RefreshActivity(ctx, tg.ID))
		assert.Equal(t, []string{"abc123"}, p.refreshed)
	})
	t.Run("a preview token makes the sandbox private and goes upstream", func(t *testing.T) {
		tg, err := FromProvider(&stubProvider{sb: started, minute: "1m0s", preview: "http://127.0.0.1:4100", token: "s3cret"}).Resolve(ctx, "demo", 4100)
		require.NoError(t, err)
		assert.Equal(t, "s3cret", tg.Token)
		assert.Equal(t, []string{"s3cret"}, tg.Header[provider.PreviewTokenHeader])
	})
	t.Run("a backend without a minute: Daytona's", func(t *testing.T) {
		tg, err := FromProvider(&stubProvider{sb: started, preview: "https://3000-x.proxy.example"}).Resolve(ctx, "demo", 3000)
		require.NoError(t, err)
		assert.Equal(t, 15*time.Minute, tg.AutoStop)
	})
	for _, st := range []provider.State{provider.StateStopped, provider.StateStarting, provider.StateStopping, provider.StateError} {
		t.Run("a "+string(st)+" sandbox is not served", func(t *testing.T) {
			sb := started
			sb.State = st
			_, err := FromProvider(&stubProvider{sb: sb, preview: "http://x"}).Resolve(ctx, "demo", 1)
			assert.Equal(t, provider.FailedPrecondition, provider.Code(err))
		})
	}
	t.Run("errors keep their codes", func(t *testing.T) {
		_, err := FromProvider(&stubProvider{getErr: provider.Errorf(provider.NotFound, "no")}).Resolve(ctx, "x", 1)
		assert.Equal(t, provider.NotFound, provider.Code(err))
		_, err = FromProvider(&stubProvider{sb: started, preview: "http://x"}).Resolve(ctx, "demo", 9)
		assert.Equal(t, provider.InvalidArgument, provider.Code(err))
	})
}

type watchingStub struct {
	*stubProvider
	events chan provider.Event
}

func (w watchingStub) Watch(context.Context, provider.WatchOptions) (<-chan provider.Event, error) {
	return w.events, nil
}

func TestFromProviderStale(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Run("events that change a target name their sandbox; a snapshot names all", func(t *testing.T) {
		w := watchingStub{&stubProvider{}, make(chan provider.Event, 10)}
		ch, err := FromProvider(w).(Invalidator).Stale(ctx)
		require.NoError(t, err)
		sb := &provider.Sandbox{ID: "a"}
		for _, ev := range []provider.Event{
			{Type: provider.EventSandboxesReplaced},
			{Type: provider.EventActivity, Sandbox: sb},
			{Type: provider.EventCreated, Sandbox: sb},
			{Type: provider.EventStopped, Sandbox: sb},
			{Type: provider.EventStarted, Sandbox: sb},
			{Type: provider.EventUpdated, Sandbox: sb},
			{Type: provider.EventDeleted, Sandbox: sb},
		} {
			w.events <- ev
		}
		close(w.events)
		var got []string
		for id := range ch {
			got = append(got, id)
		}
		assert.Equal(t, []string{"", "a", "a", "a", "a"}, got)
	})
	t.Run("a provider without events", func(t *testing.T) {
		_, err := FromProvider(&stubProvider{}).(Invalidator).Stale(ctx)
		assert.Equal(t, provider.Unsupported, provider.Code(err))
	})
}
