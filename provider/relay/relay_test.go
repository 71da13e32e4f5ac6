package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// echo answers with what the upstream saw of the request.
func echo(w http.ResponseWriter, r *http.Request) {
	_ = json.NewEncoder(w).Encode(map[string]any{
		"host": r.Host, "uri": r.RequestURI, "header": r.Header,
	})
}

type seen struct {
	Host   string
	URI    string
	Header http.Header
}

func decodeSeen(t *testing.T, rec *httptest.ResponseRecorder) seen {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var s seen
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &s))
	return s
}

type apiError struct {
	Error struct{ Code, Message string }
}

func decodeError(t *testing.T, rec *httptest.ResponseRecorder, status int) apiError {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	var e apiError
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
	return e
}

func TestRouting(t *testing.T) {
	up := upstream(t, echo)
	upURL, _ := url.Parse(up.URL)
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	prefixed := target("sb2", up.URL+"/_preview/3000-tok")
	f.backend.set("sb2", prefixed)

	tests := []struct {
		name, host, path string
		wantURI          string
	}{
		{"by host", "3000-sb1.localhost:4030", "/a/b?x=1", "/a/b?x=1"},
		{"by path", "", "/3000-sb1/a/b?x=1", "/a/b?x=1"},
		{"by path, escaped", "", "/3000-sb1/a%2Fb", "/a%2Fb"},
		{"by path on localhost", "localhost:4030", "/3000-sb1/", "/"},
		{"an upstream with a path of its own", "3000-sb2.localhost", "/a?x=1", "/_preview/3000-tok/a?x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := decodeSeen(t, f.do(t, "GET", tt.host, tt.path, nil))
			assert.Equal(t, tt.wantURI, s.URI)
			assert.Equal(t, upURL.Host, s.Host, "the upstream sees its own host")
			assert.NotEmpty(t, s.Header.Get("X-Forwarded-Host"))
		})
	}
	assert.Equal(t, 2, f.backend.resolveCount(), "resolutions are cached")
}

func TestPathWithoutSlashRedirects(t *testing.T) {
	f := newFixture(t)
	rec := f.do(t, "GET", "", "/3000-sb1?x=1", nil)
	assert.Equal(t, http.StatusPermanentRedirect, rec.Code)
	assert.Equal(t, "/3000-sb1/?x=1", rec.Header().Get("Location"))
}

// A provider gives no preview token for a stopped sandbox (the daemon
// answers a preview of one with failed_precondition): the relay checks the
// caller against the token it last knew, so that a stranger still learns
// nothing while the sandbox's user is told it stopped.
func TestAStrangerCannotTellAStoppedSandboxItResolvedBefore(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t, WithCacheTTL(-1))
	running := target("sb1", up.URL)
	running.Token = "s3cret"
	f.backend.set("sb1", running)
	withToken := http.Header{TokenHeader: {"s3cret"}}
	require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-sb1.localhost", "/", withToken).Code)

	f.backend.failWith("sb1", Target{ID: "sb1"}, provider.Errorf(provider.FailedPrecondition, "sandbox sb1 is stopped"))
	stranger := decodeError(t, f.do(t, "GET", "3000-sb1.localhost", "/", nil), http.StatusUnauthorized)
	missing := decodeError(t, f.do(t, "GET", "3000-nope.localhost", "/", nil), http.StatusUnauthorized)
	assert.Equal(t, strings.ReplaceAll(missing.Error.Message, "nope", "sb1"), stranger.Error.Message, "a stranger's answer is a missing sandbox's")
	owner := decodeError(t, f.do(t, "GET", "3000-sb1.localhost", "/", withToken), http.StatusServiceUnavailable)
	assert.Contains(t, owner.Error.Message, "sandbox sb1 is stopped: start it, then retry")
}

func TestErrorsAreClearAndImmediate(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t)
	f.backend.set("up", target("up", up.URL))
	f.backend.fail("stopped", provider.Errorf(provider.FailedPrecondition, "sandbox stopped is stopped"))
	f.backend.fail("down", provider.Errorf(provider.Unavailable, "the daemon does not answer"))
	f.backend.fail("badport", provider.Errorf(provider.InvalidArgument, "only the sandbox port is published"))

	tests := []struct {
		name, host, path string
		status           int
		code             provider.ErrorCode
		message          string
	}{
		{"stopped sandbox", "3000-stopped.localhost", "/", 503, provider.Unavailable, "sandbox stopped is stopped: start it, then retry"},
		{"unknown sandbox", "3000-nope.localhost", "/", 401, provider.Unauthenticated, "sandbox nope port 3000: it does not exist or is private"},
		{"backend down", "3000-down.localhost", "/", 503, provider.Unavailable, "retry shortly"},
		{"bad port", "3000-badport.localhost", "/", 400, provider.InvalidArgument, "only the sandbox port is published"},
		{"no sandbox in the address", "", "/", 404, provider.NotFound, "use http://<port>-<id>.localhost"},
		{"a host that is not ours", "evil.example:4030", "/3000-up/", 403, provider.PermissionDenied, "not served here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := decodeError(t, f.do(t, "GET", tt.host, tt.path, nil), tt.status)
			assert.Equal(t, string(tt.code), e.Error.Code)
			assert.Contains(t, e.Error.Message, tt.message)
		})
	}
	assert.Zero(t, f.relay.Stats().RefreshesSent, "nothing was proxied, nothing refreshed")
}

// A stranger learns nothing of a private sandbox: not whether it exists,
// nor its state, nor which ports it declares. Each answer without the token
// is the answer a missing sandbox gives, credential for credential; with the
// token, the real reason.
func TestAStrangerCannotTellMissingFromPrivate(t *testing.T) {
	up := upstream(t, ok)
	f := newFixture(t)
	running := target("running", up.URL)
	running.Token = "s3cret"
	f.backend.set("running", running)
	f.backend.failWith("stopped", Target{ID: "stopped", Token: "s3cret"}, provider.Errorf(provider.FailedPrecondition, "sandbox stopped is stopped"))
	f.backend.failWith("badport", Target{ID: "badport", Token: "s3cret"}, provider.Errorf(provider.InvalidArgument, "port 3000 is not declared"))

	credentials := []struct {
		name   string
		header http.Header
		query  string
	}{
		{"none", nil, ""},
		{"a wrong header", http.Header{TokenHeader: {"guess"}}, ""},
		{"a wrong link token", nil, "?" + TokenParam + "=guess"},
		{"a forged cookie", http.Header{"Cookie": {CookieName + "=forged"}}, ""},
	}
	for _, c := range credentials {
		for _, byHost := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, host route %v", c.name, byHost), func(t *testing.T) {
				answer := func(id string) (int, string) {
					host, path := "3000-"+id+".localhost", "/"+c.query
					if !byHost {
						host, path = "", "/3000-"+id+"/"+c.query
					}
					rec := f.do(t, "GET", host, path, c.header)
					return rec.Code, strings.ReplaceAll(rec.Body.String(), id, "<id>")
				}
				wantCode, wantBody := answer("missing")
				require.Equal(t, http.StatusUnauthorized, wantCode, wantBody)
				for _, id := range []string{"running", "stopped", "badport"} {
					code, body := answer(id)
					assert.Equal(t, wantCode, code, id)
					assert.Equal(t, wantBody, body, id)
				}
			})
		}
	}

	// A path route's refusal names the host route to open in a browser,
	// on the relay's own port.
	e := decodeError(t, f.do(t, "GET", "", "/3000-running/", nil), 401)
	assert.Contains(t, e.Error.Message, "in a browser open http://3000-running.localhost:4030/ instead")

	// With the token, the reason.
	withToken := http.Header{TokenHeader: {"s3cret"}}
	e = decodeError(t, f.do(t, "GET", "3000-stopped.localhost", "/", withToken), 503)
	assert.Contains(t, e.Error.Message, "sandbox stopped is stopped: start it, then retry")
	e = decodeError(t, f.do(t, "GET", "3000-badport.localhost", "/", withToken), 400)
	assert.Contains(t, e.Error.Message, "port 3000 is not declared")

	// Where ids are random (Daytona's), a missing sandbox may say so.
	f2 := newFixture(t, WithRevealMissing(true))
	e = decodeError(t, f2.do(t, "GET", "3000-nope.localhost", "/", nil), 404)
	assert.Contains(t, e.Error.Message, "no sandbox nope")
}

// deadURL is a loopback address where nothing listens.
func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

func TestReResolveWhenUpstreamRefuses(t *testing.T) {
	up := upstream(t, ok)
	t.Run("moved: the request follows", func(t *testing.T) {
		f := newFixture(t)
		f.backend.set("sb1", target("sb1", up.URL))
		require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-sb1.localhost", "/", nil).Code)
		// The sandbox restarts on another port; the cache still has the old one.
		f.backend.set("sb1", target("sb1", deadURL(t)))
		f.clk.Advance(31 * time.Second)
		require.Equal(t, http.StatusServiceUnavailable, f.do(t, "GET", "3000-sb1.localhost", "/", nil).Code)
		f.backend.set("sb1", target("sb1", up.URL))
		rec := f.do(t, "GET", "3000-sb1.localhost", "/", nil)
		assert.Equal(t, http.StatusOK, rec.Code, "the refused request was re-resolved and retried at the new address")
	})
	t.Run("stopped: 503 at once", func(t *testing.T) {
		f := newFixture(t)
		f.backend.set("sb1", target("sb1", deadURL(t)))
		// First resolution gives the dead address; by the time the request
		// fails, the backend knows the sandbox stopped.
		f.relay.res.res = stopAfterResolve{f.backend, "sb1"}
		e := decodeError(t, f.do(t, "GET", "3000-sb1.localhost", "/", nil), http.StatusServiceUnavailable)
		assert.Contains(t, e.Error.Message, "is stopped: start it, then retry")
	})
	t.Run("refused, still the same address: a clear 503", func(t *testing.T) {
		f := newFixture(t)
		dead := deadURL(t)
		f.backend.set("sb1", target("sb1", dead))
		e := decodeError(t, f.do(t, "GET", "3000-sb1.localhost", "/", nil), http.StatusServiceUnavailable)
		assert.Contains(t, e.Error.Message, "does not answer on port 3000 (connection refused)")
		assert.NotContains(t, e.Error.Message, dead, "the upstream URL, which may hold a token, is never shown")
	})
}

// stopAfterResolve answers the first resolution from b, then says stopped.
type stopAfterResolve struct {
	*fakeBackend
	id string
}

func (s stopAfterResolve) Resolve(ctx context.Context, id string, port int) (Target, error) {
	t, err := s.fakeBackend.Resolve(ctx, id, port)
	s.fakeBackend.fail(s.id, provider.Errorf(provider.FailedPrecondition, "sandbox %s is stopped", s.id))
	return t, err
}

func TestMovedRequestIsRetriedAtTheNewAddress(t *testing.T) {
	up := upstream(t, echo)
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", deadURL(t)))
	f.relay.res.res = moveAfterResolve{f.backend, "sb1", target("sb1", up.URL)}
	s := decodeSeen(t, f.do(t, "GET", "3000-sb1.localhost", "/x", nil))
	assert.Equal(t, "/x", s.URI)
	assert.Equal(t, 2, f.backend.resolveCount())
}

type moveAfterResolve struct {
	*fakeBackend
	id   string
	next Target
}

func (m moveAfterResolve) Resolve(ctx context.Context, id string, port int) (Target, error) {
	t, err := m.fakeBackend.Resolve(ctx, id, port)
	m.fakeBackend.set(m.id, m.next)
	return t, err
}

func TestUpstream502ReResolves(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	assert.Equal(t, http.StatusBadGateway, f.do(t, "GET", "3000-sb1.localhost", "/", nil).Code, "a sandbox that still runs: its 502 passes")
	assert.Equal(t, 2, f.backend.resolveCount(), "and the relay resolved again")

	f.relay.res.res = stopAfterResolve{f.backend, "sb1"}
	f.backend.set("sb1", target("sb1", up.URL))
	f.clk.Advance(time.Minute) // past the cache
	e := decodeError(t, f.do(t, "GET", "3000-sb1.localhost", "/", nil), http.StatusServiceUnavailable)
	assert.Contains(t, e.Error.Message, "is stopped: start it, then retry")
}

func TestPrivateSandbox(t *testing.T) {
	up := upstream(t, echo)
	f := newFixture(t)
	priv := target("sb1", up.URL)
	priv.Token = "s3cret"
	priv.Header = http.Header{TokenHeader: {"s3cret"}}
	f.backend.set("sb1", priv)
	f.backend.set("sb2", func() Target { t := target("sb2", up.URL); t.Token = "other"; return t }())
	host := "3000-sb1.localhost:4030"

	t.Run("no token", func(t *testing.T) {
		e := decodeError(t, f.do(t, "GET", host, "/", nil), http.StatusUnauthorized)
		assert.Contains(t, e.Error.Message, "it does not exist or is private")
		assert.Contains(t, e.Error.Message, TokenHeader)
		assert.NotContains(t, e.Error.Message, "s3cret")
	})
	t.Run("wrong header", func(t *testing.T) {
		decodeError(t, f.do(t, "GET", host, "/", http.Header{TokenHeader: {"nope"}}), http.StatusUnauthorized)
	})
	t.Run("header: passes, and the target's token goes upstream", func(t *testing.T) {
		s := decodeSeen(t, f.do(t, "GET", host, "/", http.Header{TokenHeader: {"s3cret"}}))
		assert.Equal(t, []string{"s3cret"}, s.Header[TokenHeader])
	})
	t.Run("query parameter: a cookie, and the parameter never reaches the upstream", func(t *testing.T) {
		rec := f.do(t, "GET", host, "/page?a=1&"+TokenParam+"=s3cret&b=2", nil)
		s := decodeSeen(t, rec)
		assert.Equal(t, "/page?a=1&b=2", s.URI)
		c := cookieOf(t, rec)
		assert.True(t, c.HttpOnly)
		assert.Equal(t, http.SameSiteLaxMode, c.SameSite)
		assert.Equal(t, "/", c.Path)
		assert.Empty(t, c.Domain, "host-only: the sandbox's own host")
		assert.NotContains(t, c.Value, "s3cret", "the cookie does not hold the token")

		s = decodeSeen(t, f.do(t, "GET", host, "/next", http.Header{"Cookie": {"app=1; " + CookieName + "=" + c.Value}}))
		assert.Equal(t, []string{"app=1"}, s.Header["Cookie"], "the relay's cookie stays here, the sandbox's go on")
	})
	t.Run("a browser navigation is sent back without the token in its address", func(t *testing.T) {
		rec := f.do(t, "GET", host, "/page?a=1&"+TokenParam+"=s3cret", http.Header{"Sec-Fetch-Mode": {"navigate"}})
		assert.Equal(t, http.StatusTemporaryRedirect, rec.Code)
		assert.Equal(t, "/page?a=1", rec.Header().Get("Location"))
		assert.NotEmpty(t, cookieOf(t, rec).Value)
	})
	t.Run("wrong query parameter", func(t *testing.T) {
		rec := f.do(t, "GET", host, "/?"+TokenParam+"=nope", nil)
		decodeError(t, rec, http.StatusUnauthorized)
		assert.Empty(t, rec.Result().Cookies())
	})
	t.Run("a path route, one origin for every sandbox, opens with the header only", func(t *testing.T) {
		rec := f.do(t, "GET", "", "/3000-sb1/?"+TokenParam+"=s3cret", nil)
		e := decodeError(t, rec, http.StatusUnauthorized)
		assert.Contains(t, e.Error.Message, "3000-sb1.localhost", "names the host form a browser opens")
		assert.Empty(t, rec.Result().Cookies(), "no cookie for a shared origin")
		host := cookieOf(t, f.do(t, "GET", "3000-sb1.localhost", "/?"+TokenParam+"=s3cret", nil))
		decodeError(t, f.do(t, "GET", "", "/3000-sb1/x", http.Header{"Cookie": {CookieName + "=" + host.Value}}), http.StatusUnauthorized)
		decodeSeen(t, f.do(t, "GET", "", "/3000-sb1/x", http.Header{TokenHeader: {"s3cret"}}))
	})
	t.Run("a cookie opens its own sandbox and port only", func(t *testing.T) {
		c := cookieOf(t, f.do(t, "GET", host, "/?"+TokenParam+"=s3cret", nil))
		cookie := http.Header{"Cookie": {CookieName + "=" + c.Value}}
		decodeError(t, f.do(t, "GET", "3000-sb2.localhost", "/", cookie), http.StatusUnauthorized)
		decodeError(t, f.do(t, "GET", "3001-sb1.localhost", "/", cookie), http.StatusUnauthorized)
	})
	t.Run("a cookie sent for another origin's page does not count", func(t *testing.T) {
		c := cookieOf(t, f.do(t, "GET", host, "/?"+TokenParam+"=s3cret", nil))
		cookie := CookieName + "=" + c.Value
		tests := []struct {
			name   string
			hdr    http.Header
			status int
		}{
			{"a fetch from another sandbox's page", http.Header{"Sec-Fetch-Site": {"same-site"}, "Sec-Fetch-Mode": {"cors"}}, 401},
			{"an old browser's POST from another origin", http.Header{"Origin": {"http://3000-sb2.localhost:4030"}}, 401},
			{"the sandbox's own page", http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://" + host}}, 200},
			{"a link followed from elsewhere", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"navigate"}}, 200},
			{"an address typed in", http.Header{"Sec-Fetch-Site": {"none"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"document"}}, 200},
			{"a frame in another sandbox's page", http.Header{"Sec-Fetch-Site": {"same-site"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"iframe"}}, 401},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.hdr.Set("Cookie", cookie)
				assert.Equal(t, tt.status, f.do(t, "GET", host, "/", tt.hdr).Code)
			})
		}
		assert.Equal(t, http.StatusOK, f.do(t, "GET", host, "/", http.Header{
			TokenHeader: {"s3cret"}, "Sec-Fetch-Site": {"cross-site"},
		}).Code, "the token itself works from anywhere, as on Daytona")
	})
	t.Run("a rotated token ends the cookie", func(t *testing.T) {
		c := cookieOf(t, f.do(t, "GET", host, "/?"+TokenParam+"=s3cret", nil))
		rotated := priv
		rotated.Token = "n3w"
		f.backend.set("sb1", rotated)
		f.clk.Advance(time.Minute)
		decodeError(t, f.do(t, "GET", host, "/", http.Header{"Cookie": {CookieName + "=" + c.Value}}), http.StatusUnauthorized)
		f.backend.set("sb1", priv)
		f.clk.Advance(time.Minute)
	})
	t.Run("a public sandbox needs nothing and forwards the client's headers as they are", func(t *testing.T) {
		f.backend.set("pub", target("pub", up.URL))
		s := decodeSeen(t, f.do(t, "GET", "3000-pub.localhost", "/", http.Header{"Cookie": {"app=1"}}))
		assert.Equal(t, []string{"app=1"}, s.Header["Cookie"])
	})
}

func cookieOf(t *testing.T, rec *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	cs := rec.Result().Cookies()
	require.Len(t, cs, 1)
	require.Equal(t, CookieName, cs[0].Name)
	return cs[0]
}

func TestStreamIsNotBuffered(t *testing.T) {
	// The upstream sends one event and then waits until the client has read
	// it through the relay: a buffered relay would deadlock here.
	read := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: one\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("data: two\n\n"))
	})
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	srv := upstream(t, f.relay.ServeHTTP)
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Host = "3000-sb1.localhost"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "data: one\n", line)
	close(read)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "\ndata: two\n\n", string(rest))
}

func TestWebSocketPassesThroughAndCounts(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	})
	f := newFixture(t, WithIdleKeepAlive(time.Minute))
	f.backend.set("sb1", target("sb1", up.URL))
	srv := upstream(t, f.relay.ServeHTTP)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, srv.URL+"/ws", &websocket.DialOptions{Host: "3000-sb1.localhost"})
	require.NoError(t, err)
	defer c.CloseNow()
	beat := func() int {
		f.clk.Advance(50 * time.Second)
		f.settle(t)
		return len(f.backend.drain())
	}
	f.settle(t)
	require.Equal(t, 1, len(f.backend.drain()))
	for i := 0; i < 4; i++ {
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("hi")))
		_, msg, err := c.Read(ctx)
		require.NoError(t, err)
		assert.Equal(t, "echo: hi", string(msg))
		assert.Equal(t, 1, beat(), "a WebSocket with traffic keeps its sandbox alive (beat %d)", i)
	}
	assert.Equal(t, 1, beat(), "idle for one beat: under the limit")
	assert.Equal(t, 0, beat(), "idle past the limit")
	require.NoError(t, c.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool { return f.relay.Stats().OpenConnections == 0 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, f.clk.Waiters())
}

// The metrics path serves the host's handler on the relay's own host only,
// and the observer is attached to the relay it observes.
func TestMetricsPath(t *testing.T) {
	up := upstream(t, ok)
	ob := &attachObserver{}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })
	f := newFixture(t, WithMetricsPath("/metrics", metrics), WithObserver(ob))
	require.Same(t, f.relay, ob.rl)
	f.backend.set("sb1", target("sb1", up.URL))

	assert.Equal(t, "metrics", f.do(t, "GET", "", "/metrics", nil).Body.String())
	// On a sandbox's host the path is the sandbox's.
	assert.Equal(t, "ok", f.do(t, "GET", "3000-sb1.localhost", "/metrics", nil).Body.String())
}

// attachObserver keeps the relay it is attached to, or fails Attach with err.
type attachObserver struct {
	rl  *Relay
	err error
}

func (o *attachObserver) Attach(rl *Relay) error { o.rl = rl; return o.err }

func TestOptionsValidated(t *testing.T) {
	h := http.NotFoundHandler()
	tests := []struct {
		name string
		opts []Option
		want provider.ErrorCode
	}{
		{"metrics path not absolute", []Option{WithMetricsPath("metrics", h)}, provider.InvalidArgument},
		{"metrics path without a handler", []Option{WithMetricsPath("/metrics", nil)}, provider.InvalidArgument},
		{"observer refuses", []Option{WithObserver(&attachObserver{err: provider.Errorf(provider.AlreadyExists, "taken")})}, provider.AlreadyExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl, err := New(newBackend(), tt.opts...)
			assert.Nil(t, rl)
			assert.Equal(t, tt.want, provider.Code(err))
		})
	}
}

func TestCutParam(t *testing.T) {
	tests := []struct{ raw, value, rest string }{
		{"a=1&" + TokenParam + "=x&b=2", "x", "a=1&b=2"},
		{TokenParam + "=x%2By", "x+y", ""},
		{"a=%zz&" + TokenParam + "=x&" + TokenParam + "=y", "x", "a=%zz"},
		{"a=1", "", "a=1"},
	}
	for _, tt := range tests {
		value, rest, _ := cutParam(tt.raw, TokenParam)
		assert.Equal(t, tt.value, value, tt.raw)
		assert.Equal(t, tt.rest, rest, tt.raw)
	}
}

func TestStripCookies(t *testing.T) {
	names := []string{CookieName, "daemon_token"}
	h := http.Header{"Cookie": {"a=1; " + CookieName + "=x; b=2", CookieName + "=y", "daemon_token=t; c=3"}}
	stripCookies(h, names)
	assert.Equal(t, []string{"a=1; b=2", "c=3"}, h["Cookie"])
	h = http.Header{"Cookie": {"a=1"}}
	stripCookies(h, names)
	assert.Equal(t, []string{"a=1"}, h["Cookie"])
}

// invalidating is a backend with a stream of stale ids.
type invalidating struct {
	*fakeBackend
	streams chan chan string
	errs    chan error
}

func (i invalidating) Stale(ctx context.Context) (<-chan string, error) {
	select {
	case err := <-i.errs:
		return nil, err
	default:
	}
	select {
	case ch := <-i.streams:
		return ch, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestStaleEventsDropCachedTargets(t *testing.T) {
	up := upstream(t, ok)
	clk := clocktest.NewFake(time.Time{})
	b := newBackend()
	b.set("sb1", target("sb1", up.URL))
	b.set("sb2", target("sb2", up.URL))
	inv := invalidating{b, make(chan chan string), make(chan error, 1)}
	inv.errs <- provider.Errorf(provider.Unavailable, "no daemon yet")
	rl, err := New(inv, WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rl.Close() })
	f := &fixture{clk: clk, backend: b, relay: rl}
	get := func(id string) {
		require.Equal(t, http.StatusOK, f.do(t, "GET", "3000-"+id+".localhost", "/", nil).Code)
	}
	// The first Stale failed: the relay asks again a cache lifetime later.
	// Waited for first: what the failure drops and resolves again (the
	// sandboxes with a request open) is not what this test counts.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, clk.BlockUntilWaiters(ctx, 1))
	get("sb1")
	get("sb2")
	require.Equal(t, 2, b.resolveCount())

	stream := make(chan string)
	clk.Advance(30 * time.Second)
	inv.streams <- stream
	get("sb1") // re-resolved: the failed attempt dropped the cache
	get("sb2")
	require.Equal(t, 4, b.resolveCount())

	// send hands ids to the loop; once the marker after them is taken, they
	// have all been handled.
	send := func(ids ...string) {
		for _, id := range append(ids, "no-such-sandbox") {
			stream <- id
		}
	}
	send("sb1")
	get("sb1")
	get("sb2")
	assert.Equal(t, 5, b.resolveCount(), "only the stale sandbox was resolved again")
	send("")
	get("sb1")
	get("sb2")
	assert.Equal(t, 7, b.resolveCount(), "a fresh snapshot drops everything")
	close(stream)
	require.NoError(t, rl.Close(), "Close ends the loop")
}

func TestOriginOfTheSandboxsOwnPageBecomesTheUpstreams(t *testing.T) {
	up := upstream(t, echo)
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	s := decodeSeen(t, f.do(t, "POST", "3000-sb1.localhost:4030", "/", http.Header{"Origin": {"http://3000-sb1.localhost:4030"}}))
	assert.Equal(t, up.URL, s.Header.Get("Origin"))
	s = decodeSeen(t, f.do(t, "POST", "3000-sb1.localhost:4030", "/", http.Header{"Origin": {"http://evil.example"}}))
	assert.Equal(t, "http://evil.example", s.Header.Get("Origin"), "a foreign origin is the sandbox's to refuse")
}

// A request refused by a sandbox that moved goes to the new address only if
// the caller proves access there too: a start gives a sandbox a new token.
func TestARetryAfterAMoveChecksTheNewToken(t *testing.T) {
	up1 := upstream(t, ok)
	up2 := upstream(t, echo)
	f := newFixture(t)
	old := target("sb1", up1.URL)
	old.Token = "old-token"
	old.Header = http.Header{TokenHeader: {"old-token"}}
	f.backend.set("sb1", old)
	host := "3000-sb1.localhost"
	require.Equal(t, http.StatusOK, f.do(t, "GET", host, "/", http.Header{TokenHeader: {"old-token"}}).Code)

	// The sandbox restarts elsewhere with a new token (Daytona rotates it on
	// every start); the cache still holds the old entry.
	up1.Close()
	nw := target("sb1", up2.URL)
	nw.Token = "new-token"
	nw.Header = http.Header{TokenHeader: {"new-token"}}
	f.backend.set("sb1", nw)

	rec := f.do(t, "GET", host, "/", http.Header{TokenHeader: {"old-token"}})
	assert.Equal(t, http.StatusUnauthorized, rec.Code,
		"the revoked token reached the restarted sandbox: %s", rec.Body.String())
	// and the next one is refused, proving the token is revoked
	assert.Equal(t, http.StatusUnauthorized, f.do(t, "GET", host, "/", http.Header{TokenHeader: {"old-token"}}).Code)
}

// A client of an upgraded connection that half-closes (sends FIN, keeps
// reading) gets the rest of the upstream's answer.
func TestAnUpgradedConnectionPassesAHalfCloseOn(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "tcp")
		w.WriteHeader(http.StatusSwitchingProtocols)
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(brw) // until the client's EOF
		_, _ = c.Write([]byte("got " + string(b)))
	})
	f := newFixture(t)
	f.backend.set("sb1", target("sb1", up.URL))
	srv := upstream(t, f.relay.ServeHTTP)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: 3000-sb1.localhost\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	_, err = io.WriteString(c, "hello")
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "got hello", string(rest))
}
