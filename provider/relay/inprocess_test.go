package relay

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// The options for a backend in the relay's own process: the daemon's and
// the simulator's.

func TestPathPrefix(t *testing.T) {
	up := upstream(t, echo)
	f := newFixture(t, WithPathPrefix("/preview/"))
	f.backend.set("sb1", target("sb1", up.URL))

	tests := []struct {
		name, path string
		wantURI    string
	}{
		{"under the prefix", "/preview/3000-sb1/a/b?x=1", "/a/b?x=1"},
		{"escaped", "/preview/3000-sb1/a%2Fb", "/a%2Fb"},
		{"the prefixed root", "/preview/3000-sb1/", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantURI, decodeSeen(t, f.do(t, "GET", "", tt.path, nil)).URI)
		})
	}
	t.Run("without a slash: redirected under the prefix", func(t *testing.T) {
		rec := f.do(t, "GET", "", "/preview/3000-sb1?x=1", nil)
		assert.Equal(t, http.StatusPermanentRedirect, rec.Code)
		assert.Equal(t, "/preview/3000-sb1/?x=1", rec.Header().Get("Location"))
	})
	for _, path := range []string{"/3000-sb1/", "/previewx/3000-sb1/", "/preview/", "/preview"} {
		t.Run("not routed: "+path, func(t *testing.T) {
			e := decodeError(t, f.do(t, "GET", "", path, nil), http.StatusNotFound)
			assert.Contains(t, e.Error.Message, "/preview/<port>-<id>/")
		})
	}
	t.Run("host routing is unchanged", func(t *testing.T) {
		assert.Equal(t, "/a", decodeSeen(t, f.do(t, "GET", "3000-sb1.localhost", "/a", nil)).URI)
	})
}

func TestPathPrefixRoutesOpenWithTheHeaderOnly(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t, WithPathPrefix("/preview"))
	tg := target("sb1", up.URL)
	tg.Token = "secret-token"
	f.backend.set("sb1", tg)
	rec := f.do(t, "GET", "", "/preview/3000-sb1/?"+TokenParam+"=secret-token", nil)
	require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	assert.Empty(t, rec.Result().Cookies(), "no cookie on the origin every path route shares")
	rec = f.do(t, "GET", "", "/preview/3000-sb1/", http.Header{TokenHeader: {"secret-token"}})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

func TestAnyDomainRoutesByTheFirstLabel(t *testing.T) {
	up := upstream(t, echo)
	f := newFixture(t, WithDomain("*"), WithPathPrefix("/_preview"))
	f.backend.set("sb1", target("sb1", up.URL))
	for _, host := range []string{"3000-sb1.localhost:4030", "3000-sb1.preview.localhost", "3000-SB1.sim.example.com"} {
		t.Run(host, func(t *testing.T) {
			assert.Equal(t, "/x", decodeSeen(t, f.do(t, "GET", host, "/x", nil)).URI)
		})
	}
	t.Run("any other host is the server's own", func(t *testing.T) {
		assert.Equal(t, "/x", decodeSeen(t, f.do(t, "GET", "sim.example.com", "/_preview/3000-sb1/x", nil)).URI)
		e := decodeError(t, f.do(t, "GET", "sim.example.com:4791", "/x", nil), http.StatusNotFound)
		assert.Equal(t, "no sandbox at this address: use http://<port>-<id>.sim.example.com:4791/, or http://sim.example.com:4791/_preview/<port>-<id>/", e.Error.Message)
		e = decodeError(t, f.do(t, "GET", "127.0.0.1:4791", "/x", nil), http.StatusNotFound)
		assert.Contains(t, e.Error.Message, "use http://<port>-<id>.localhost:4791/", "an address has no subdomains")
	})
	t.Run("a path route's refusal names a host route a browser opens", func(t *testing.T) {
		private := target("sb2", up.URL)
		private.Token = "secret-token"
		f.backend.set("sb2", private)
		e := decodeError(t, f.do(t, "GET", "127.0.0.1:4791", "/_preview/3000-sb2/", nil), http.StatusUnauthorized)
		assert.Contains(t, e.Error.Message, "in a browser open http://3000-sb2.localhost:4791/ instead")
	})
	for _, host := range []string{"3000-sb1", "3000-sb1.", "x.3000-sb1.localhost"} {
		t.Run("not a sandbox's: "+host, func(t *testing.T) {
			_, ok := parseHost(host, anyDomain)
			assert.False(t, ok)
		})
	}
}

func TestForward(t *testing.T) {
	up := upstream(t, echo)
	f := newFixture(t)
	tg := target("sb1", up.URL)
	tg.Header = http.Header{TokenHeader: {"sandbox-secret"}}
	f.backend.set("sb1", tg)
	forward := func(id string, port int, path, rawQuery string) *httptest.ResponseRecorder {
		u := "http://sim.test/toolbox/sb1/ignored"
		if rawQuery != "" {
			u += "?" + rawQuery
		}
		req := httptest.NewRequest("GET", u, nil)
		req.Header.Set(TokenHeader, "the caller's")
		rec := httptest.NewRecorder()
		f.relay.Forward(rec, req, id, port, path)
		return rec
	}

	s := decodeSeen(t, forward("sb1", 2280, "/process/execute", "a=1"))
	assert.Equal(t, "/process/execute?a=1", s.URI, "the upstream sees the path it was given, with the query")
	assert.Equal(t, "sandbox-secret", s.Header.Get(TokenHeader), "the target's header replaces the caller's")
	assert.Equal(t, "/", decodeSeen(t, forward("sb1", 2280, "", "")).URI)
	assert.Equal(t, uint64(2), f.relay.Stats().Requests)
	f.settle(t)
	assert.Equal(t, []string{"sb1"}, f.backend.drain(), "forwarded requests are activity, debounced as any")

	decodeError(t, forward("no-such", 2280, "/", ""), http.StatusUnauthorized) // as a private one would

	decodeError(t, forward("../etc", 2280, "/", ""), http.StatusNotFound)
	decodeError(t, forward("sb1", 0, "/", ""), http.StatusNotFound)
}

func TestInlineRefreshIsDoneWhenTheResponseArrives(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t, WithInlineRefresh(true), WithRefreshTimeout(-1), WithResolveTimeout(-1), WithCacheTTL(-1))
	f.backend.set("sb1", target("sb1", up.URL))
	for i := 0; i < 3; i++ {
		rec := f.do(t, "GET", "3000-sb1.localhost", "/", nil)
		require.Equal(t, http.StatusOK, rec.Code)
		// No waiting: the refresh was sent, and answered, before the
		// request went upstream.
		assert.Equal(t, []string{"sb1"}, f.backend.drain(), "request %d", i)
		assert.Zero(t, f.relay.Stats().RefreshesInFlight)
		assert.Zero(t, f.clk.Waiters(), "no timer for a refresh, a resolution or the request")
		f.clk.Advance(45 * time.Second)
	}
}

func TestNegativeCacheTTLResolvesEveryRequest(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t, WithCacheTTL(-1))
	tg := target("sb1", up.URL)
	tg.Token = "first"
	f.backend.set("sb1", tg)
	hdr := func(tok string) http.Header { return http.Header{TokenHeader: {tok}} }
	require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-sb1.localhost", "/", hdr("first")).Code)
	require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-sb1.localhost", "/", hdr("first")).Code)
	assert.Equal(t, 2, f.backend.resolveCount())

	tg.Token = "rotated"
	f.backend.set("sb1", tg)
	assert.Equal(t, http.StatusUnauthorized, f.do(t, "GET", "3000-sb1.localhost", "/", hdr("first")).Code,
		"a rotated token counts from the next request")
	f.backend.fail("sb1", provider.Errorf(provider.FailedPrecondition, "sandbox sb1 is stopped"))
	assert.Equal(t, http.StatusServiceUnavailable, f.do(t, "GET", "3000-sb1.localhost", "/", hdr("rotated")).Code,
		"and so does a stop")
}

func TestHeartbeatOfAnOpenRequestCountsFromItsBump(t *testing.T) {
	// The request's bump comes first, then its connection: the one timer it
	// arms is the heartbeat, a beat after the bump, even when the last
	// refresh was long ago.
	send := make(chan string)
	up := sseUpstream(t, send)
	f := newFixture(t, WithInlineRefresh(true), WithRefreshTimeout(-1), WithResolveTimeout(-1), WithDaytonaTiming(true))
	tg := target("sb1", up.URL)
	tg.AutoStop = 15 * time.Minute
	f.backend.set("sb1", tg)
	srv := upstream(t, f.relay.ServeHTTP)
	f.clk.Advance(time.Hour)
	s := openStream(t, srv.URL, "3000-sb1.localhost")
	assert.Equal(t, "data: hello", s.next(t))
	assert.Equal(t, []string{"sb1"}, f.backend.drain())
	require.NoError(t, f.clk.BlockUntilWaiters(context.Background(), 1))
	assert.Equal(t, 1, f.clk.Waiters())

	f.clk.Advance(49 * time.Second)
	assert.Empty(t, f.backend.drain(), "Daytona's 50 s, not a third of fifteen minutes")
	f.clk.Advance(time.Second)
	require.Eventually(t, func() bool { return len(f.backend.calls) == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"sb1"}, f.backend.drain(), "the heartbeat")
	s.cancel()
}

func TestNegativeDurationsAreAccepted(t *testing.T) {
	_, err := New(newBackend(), WithRefreshTimeout(-1), WithResolveTimeout(-1), WithCacheTTL(-1))
	assert.NoError(t, err)
	_, err = New(newBackend(), WithPathPrefix("preview"))
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
}

func TestWriteErrorAnswersInTheBackendsShape(t *testing.T) {
	var seen []string
	f := newFixture(t, WithWriteError(func(w http.ResponseWriter, r *http.Request, err error) {
		seen = append(seen, r.Host)
		w.WriteHeader(provider.HTTPStatus(provider.Code(err)))
		_, _ = io.WriteString(w, "backend says: "+provider.Message(err))
	}))
	up := upstream(t, ok)
	priv := target("priv", up.URL)
	priv.Token = "s3cret"
	f.backend.set("priv", priv)

	rec := f.do(t, "GET", "3000-nope.localhost", "/", nil)
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.True(t, strings.HasPrefix(rec.Body.String(), "backend says: sandbox nope port 3000: it does not exist or is private"), rec.Body.String())
	rec = f.do(t, "GET", "3000-priv.localhost", "/", nil)
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.True(t, strings.HasPrefix(rec.Body.String(), "backend says: sandbox priv port 3000: it does not exist or is private"), rec.Body.String())
	assert.Equal(t, []string{"3000-nope.localhost", "3000-priv.localhost"}, seen, "with the request it answers")
}
