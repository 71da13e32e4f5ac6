package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/drivertest"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/relay"
)

// previewHarness is a daemon whose sandboxes' ports are real HTTP servers
// of the test: the in-memory driver spawns nothing, so the test serves each
// host port the manager hands out, as the workload would.
type previewHarness struct {
	t      *testing.T
	ts     *httptest.Server
	m      *manager.Manager
	addr   string // the daemon's host:port
	root   string // the manager's
	events chan provider.Event
}

func newPreviewHarness(t *testing.T, token string, configure ...func(*Options)) *previewHarness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &previewHarness{t: t, addr: ln.Addr().String(), root: t.TempDir(), events: make(chan provider.Event, 1024)}
	hub := NewHub(nil)
	addr := NewPreviewAddr(h.addr)
	h.m, err = manager.New(manager.Options{
		OnEvent:  hub.Publish,
		Root:     h.root,
		Runtimes: map[provider.Runtime]driver.Driver{provider.RuntimeNative: drivertest.New(provider.RuntimeNative)},
		Snapshots: map[string]manager.Snapshot{
			manager.DefaultSnapshot: {Command: []string{"w"}, Ready: "none"},
			"web":                   {Command: []string{"w"}, Ready: "none", Ports: []int{3000}},
			"isolated":              {Command: []string{"w"}, Ready: "none", Isolation: "bwrap"},
		},
		PortMin: 15300, PortMax: 15399,
		Minute:      time.Minute,
		PreviewURL:  addr.URL,
		PreviewLink: addr.Link,
	})
	require.NoError(t, err)
	t.Cleanup(h.m.Close)
	opts := Options{Manager: h.m, Hub: hub, Version: "test", Token: token}
	for _, f := range configure {
		f(&opts)
	}
	s, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	h.ts = httptest.NewUnstartedServer(s.Handler())
	h.ts.Listener.Close()
	h.ts.Listener = ln
	h.ts.Start()
	t.Cleanup(h.ts.Close)
	sub, _, _, _ := hub.subscribe(0, false, manager.Filter{})
	done := make(chan struct{})
	t.Cleanup(func() { close(done); hub.unsubscribe(sub) })
	go func() {
		for {
			select {
			case ev := <-sub.ch:
				h.events <- ev
			case <-done:
				return
			}
		}
	}()
	return h
}

// serve makes the test the workload behind host port port: it answers with
// what it saw of the request, and port names which one it is.
func (h *previewHarness) serve(port int) {
	h.t.Helper()
	h.serveOn(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)))
}

// serveOn is serve on addr, a sandbox's own loopback address and port.
func (h *previewHarness) serveOn(addr netip.AddrPort) {
	h.t.Helper()
	port := int(addr.Port())
	ln, err := net.Listen("tcp", addr.String())
	require.NoError(h.t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"port": port, "host": r.Host, "uri": r.RequestURI, "header": r.Header})
	})}
	go func() { _ = srv.Serve(ln) }()
	h.t.Cleanup(func() { _ = srv.Close() })
}

type seenRequest struct {
	Port   int
	Host   string
	URI    string
	Header http.Header
}

// get sends a GET to the daemon with host as the Host ("" for its own).
func (h *previewHarness) get(host, path string, header ...string) (int, string, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest("GET", h.ts.URL+path, nil)
	require.NoError(h.t, err)
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirects.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (h *previewHarness) proxyRefreshes(id string) int {
	n := 0
	for {
		select {
		case ev := <-h.events:
			if ev.Type == provider.EventActivity && ev.Source == provider.SourceProxy && ev.Sandbox.ID == id {
				n++
			}
		default:
			return n
		}
	}
}

func TestPreviewURLNamesAPortInsideTheSandbox(t *testing.T) {
	h := newPreviewHarness(t, "")
	ctx := context.Background()
	sb, err := h.m.Create(ctx, provider.CreateRequest{ID: "web1", Snapshot: "web"})
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(h.addr)
	assert.Equal(t, "http://4000-web1.localhost:"+port, sb.PreviewURL, "a browser's preview: an origin of its own")

	code, body, _ := h.get("", "/v1/sandboxes/web1/preview-url?port=4000")
	require.Equal(t, http.StatusOK, code, body)
	var pv provider.Preview
	require.NoError(t, json.Unmarshal([]byte(body), &pv))
	assert.Equal(t, "http://"+h.addr+"/preview/4000-web1", pv.URL, "any client's: by path on the daemon")
	tok := pv.Token
	require.NotEmpty(t, tok)

	code, body, _ = h.get("", "/v1/sandboxes/web1/preview-url?port=5000")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "port 5000 is not declared by snapshot web (it declares 3000, 4000): declare it in the daemon config's snapshot ports")
	code, body, _ = h.get("", "/v1/sandboxes/web1/preview-url")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "/preview/4000-web1", "no port: the workload's")

	t.Run("each declared port reaches its host port", func(t *testing.T) {
		extra, err := h.m.PreviewTarget(ctx, "web1", 3000)
		require.NoError(t, err)
		h.serve(sb.Port)
		h.serve(extra.HostPort)
		for port, want := range map[int]int{4000: sb.Port, 3000: extra.HostPort} {
			for _, via := range []struct{ host, path string }{
				{strconv.Itoa(port) + "-web1.localhost:1", "/x?y=1"},
				{"", "/preview/" + strconv.Itoa(port) + "-web1/x?y=1"},
			} {
				code, body, _ := h.get(via.host, via.path, provider.PreviewTokenHeader, tok)
				require.Equal(t, http.StatusOK, code, body)
				var seen seenRequest
				require.NoError(t, json.Unmarshal([]byte(body), &seen))
				assert.Equal(t, want, seen.Port, "%+v", via)
				assert.Equal(t, "/x?y=1", seen.URI)
				assert.Equal(t, tok, seen.Header.Get(provider.PreviewTokenHeader), "the workload (the toolbox) gets the sandbox's token")
				assert.Equal(t, "127.0.0.1:"+strconv.Itoa(want), seen.Host, "and a loopback Host, which the toolbox's guard wants")
			}
		}
	})

	t.Run("a preview needs the sandbox's token, never the daemon's", func(t *testing.T) {
		code, body, _ := h.get("4000-web1.localhost", "/")
		assert.Equal(t, http.StatusUnauthorized, code, body)
		code, body, _ = h.get("5000-web1.localhost", "/", provider.PreviewTokenHeader, tok)
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, body, "port 5000 is not declared")
	})
}

func TestPreviewsNeedNoDaemonTokenAndReachNoAPI(t *testing.T) {
	h := newPreviewHarness(t, "daemon-token")
	ctx := context.Background()
	sb, err := h.m.Create(ctx, provider.CreateRequest{ID: "w"})
	require.NoError(t, err)
	h.serve(sb.Port)
	pv, err := h.m.PreviewURL(ctx, "w", 0)
	require.NoError(t, err)

	code, body, _ := h.get("4000-w.localhost", "/v1/sandboxes", provider.PreviewTokenHeader, pv.Token)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"port":`+strconv.Itoa(sb.Port), "a sandbox's /v1 is its own, not the daemon's API")

	// A browser still holding an older daemon's token cookie sends it to
	// every port of 127.0.0.1 and to the sandbox's hosts: the sandbox never
	// receives it.
	code, body, _ = h.get("", "/preview/4000-w/", provider.PreviewTokenHeader, pv.Token,
		"Cookie", legacyTokenCookie+"=daemon-token; app=1")
	require.Equal(t, http.StatusOK, code, body)
	var seen seenRequest
	require.NoError(t, json.Unmarshal([]byte(body), &seen))
	assert.Equal(t, []string{"app=1"}, seen.Header["Cookie"], "the sandbox's own cookie only")

	tests := []struct {
		name, host, path string
		header           []string
		status           int
	}{
		{"the API without the daemon token", "", "/v1/sandboxes", nil, http.StatusUnauthorized},
		{"a path preview opened by link", "", "/preview/4000-w/?DAYTONA_SANDBOX_AUTH_KEY=" + pv.Token, nil, http.StatusUnauthorized},
		{"the API on another name under localhost", "app.localhost", "/v1/sandboxes", []string{"Authorization", "Bearer daemon-token"}, http.StatusForbidden},
		{"a rebinding name", "evil.example:4025", "/preview/4000-w/", []string{provider.PreviewTokenHeader, pv.Token}, http.StatusForbidden},
		{"a sandbox's page calling the API", "", "/v1/sandboxes", []string{"Authorization", "Bearer daemon-token", "Origin", "http://4000-w.localhost:4025"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := h.get(tt.host, tt.path, tt.header...)
			assert.Equal(t, tt.status, code, body)
		})
	}
}

func TestPreviewTrafficIsProxyActivity(t *testing.T) {
	h := newPreviewHarness(t, "")
	ctx := context.Background()
	sb, err := h.m.Create(ctx, provider.CreateRequest{ID: "busy"})
	require.NoError(t, err)
	h.serve(sb.Port)
	pv, err := h.m.PreviewURL(ctx, "busy", 0)
	require.NoError(t, err)
	h.proxyRefreshes("busy")

	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", pv.URL+"/", nil)
			req.Header.Set(provider.PreviewTokenHeader, pv.Token)
			resp, err := http.DefaultClient.Do(req)
			if assert.NoError(t, err) {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return len(h.events) > 0 }, 5*time.Second, time.Millisecond)
	// Every request was answered and the relay refreshes once per 45 s:
	// a correct one sends nothing more. The pause only gives a wrong one
	// the time to, so a slow machine can hide a bug but never fail this.
	time.Sleep(100 * time.Millisecond) // a chance for a wrong relay only; cannot fail a right one
	assert.Equal(t, 1, h.proxyRefreshes("busy"), "200 requests within Daytona's 45 s: one activity event, source proxy")

	req, _ := http.NewRequest("GET", pv.URL+"/", nil)
	req.Header.Set(provider.PreviewTokenHeader, pv.Token)
	req.Header.Set(relay.SkipActivityHeader, "true")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	_, metrics, _ := h.get("", "/metrics")
	assert.Contains(t, metrics, `sandplane_relay_requests_total 201`)
	assert.Contains(t, metrics, `sandplane_relay_refreshes_skipped_total{reason="skip_header"} 1`)
	assert.Contains(t, metrics, `sandplane_http_requests_total{code="200",route="/preview"} 201`, "one route label for every preview")
}

func TestStoppedSandboxesPreviewAnswers503(t *testing.T) {
	h := newPreviewHarness(t, "")
	ctx := context.Background()
	sb, err := h.m.Create(ctx, provider.CreateRequest{ID: "s"})
	require.NoError(t, err)
	h.serve(sb.Port)
	pv, err := h.m.PreviewURL(ctx, "s", 0)
	require.NoError(t, err)
	code, body, _ := h.get("4000-s.localhost", "/", provider.PreviewTokenHeader, pv.Token)
	require.Equal(t, http.StatusOK, code, body)
	_, err = h.m.Stop(ctx, "s")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		code, _, _ := h.get("4000-s.localhost", "/", provider.PreviewTokenHeader, pv.Token)
		return code == http.StatusServiceUnavailable
	}, 5*time.Second, 10*time.Millisecond, "the stop reaches the relay's cache through the hub")
	_, body, _ = h.get("4000-s.localhost", "/", provider.PreviewTokenHeader, pv.Token)
	assert.Contains(t, body, "is stopped: start it, then retry")

	// Without its token, a stopped sandbox answers as one that does not
	// exist: a stranger learns neither.
	code, stopped, _ := h.get("4000-s.localhost", "/")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, missing, _ := h.get("4000-nosuch.localhost", "/")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Equal(t, strings.ReplaceAll(missing, "nosuch", "s"), stopped)
}

func TestDashboardPreviewLinkOpensThePreviewInABrowser(t *testing.T) {
	h := newPreviewHarness(t, "daemon-token")
	ctx := context.Background()
	sb, err := h.m.Create(ctx, provider.CreateRequest{ID: "page"})
	require.NoError(t, err)
	h.serve(sb.Port)
	pv, err := h.m.PreviewURL(ctx, "page", 0)
	require.NoError(t, err)

	bearer := []string{"Authorization", "Bearer daemon-token"}
	code, page, _ := h.get("", "/", bearer...)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, `<a href="/open/page" title="`+sb.PreviewURL+`"`, "the link goes through the daemon")

	code, _, _ = h.get("", "/open/page")
	assert.Equal(t, http.StatusUnauthorized, code, "behind the daemon's token")
	code, body, hdr := h.get("", "/open/page", bearer...)
	require.Equal(t, http.StatusSeeOther, code, body)
	loc, err := url.Parse(hdr.Get("Location"))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimPrefix(sb.PreviewURL, "http://"), loc.Host)
	assert.Equal(t, pv.Token, loc.Query().Get(relay.TokenParam))
	assert.Equal(t, "no-store", hdr.Get("Cache-Control"))

	// The locked dashboard's script asks for the same link as JSON.
	code, body, hdr = h.get("", "/open/page", append(bearer, "Accept", "application/json")...)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "no-store", hdr.Get("Cache-Control"))
	var asked struct{ URL string }
	require.NoError(t, json.Unmarshal([]byte(body), &asked))
	assert.Equal(t, loc.String(), asked.URL)

	// The browser follows it: the relay trades the token for a cookie of
	// the sandbox's host and loads the page again without it.
	code, _, hdr = h.get(loc.Host, loc.RequestURI(), "Sec-Fetch-Mode", "navigate")
	require.Equal(t, http.StatusTemporaryRedirect, code)
	assert.Equal(t, "/", hdr.Get("Location"))
	cookie := hdr.Get("Set-Cookie")
	require.Contains(t, cookie, relay.CookieName+"=")
	assert.NotContains(t, cookie, pv.Token)
	code, body, _ = h.get(loc.Host, "/", "Cookie", strings.Split(cookie, ";")[0], "Sec-Fetch-Mode", "navigate")
	assert.Equal(t, http.StatusOK, code, "the page loads with its cookie: %s", body)

	code, body, _ = h.get("", "/open/page?port=3000", bearer...)
	assert.Equal(t, http.StatusBadRequest, code, body)
	code, _, _ = h.get("", "/open/nobody", bearer...)
	assert.Equal(t, http.StatusNotFound, code)
}

func TestPreviewLinks(t *testing.T) {
	p := NewPreviewAddr("127.0.0.1:4025")
	tests := []struct {
		id   string
		want string
	}{
		{"3c8d4f0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f", "http://4000-3c8d4f0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f.localhost:4025"},
		{"web", "http://4000-web.localhost:4025"},
		{"Web", "http://127.0.0.1:4025/preview/4000-Web"},
		{"my.box", "http://127.0.0.1:4025/preview/4000-my.box"},
		{"under_score", "http://127.0.0.1:4025/preview/4000-under_score"},
		{"ends-", "http://127.0.0.1:4025/preview/4000-ends-"},
		{strings.Repeat("a", 60), "http://127.0.0.1:4025/preview/4000-" + strings.Repeat("a", 60)},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			assert.Equal(t, tt.want, p.Link(tt.id, 4000))
		})
	}
	p.Set("[::1]:5000")
	assert.Equal(t, "http://[::1]:5000/preview/3000-web", p.URL("web", 3000))
	assert.Equal(t, "http://3000-web.localhost:5000", p.Link("web", 3000))
}

// A sandbox without a token (made before sandboxes had them) is not open
// to anyone: its previews fail closed until a start makes one.
func TestPreviewOfASandboxWithoutATokenFailsClosed(t *testing.T) {
	h := newPreviewHarness(t, "daemon-token")
	ctx := context.Background()
	sb, err := h.m.Create(ctx, provider.CreateRequest{ID: "old"})
	require.NoError(t, err)
	h.serve(sb.Port)
	require.NoError(t, os.Remove(filepath.Join(h.root, "old", "sandbox-token")))

	code, body, _ := h.get("4000-old.localhost", "/")
	assert.NotEqual(t, http.StatusOK, code, body)
	assert.Contains(t, body, "stop and start it")
}

// A public sandbox's previews answer without its token, as Daytona's do;
// its workload still gets the token, and a private neighbour still wants it.
func TestPublicSandboxPreviewsNeedNoToken(t *testing.T) {
	h := newPreviewHarness(t, "")
	ctx := context.Background()
	pub, err := h.m.Create(ctx, provider.CreateRequest{Name: "pub", Public: true})
	require.NoError(t, err)
	assert.True(t, pub.Public)
	h.serve(pub.Port)
	priv, err := h.m.Create(ctx, provider.CreateRequest{Name: "priv"})
	require.NoError(t, err)
	assert.False(t, priv.Public)
	h.serve(priv.Port)
	pv, err := h.m.PreviewURL(ctx, "pub", 0)
	require.NoError(t, err)

	code, body, _ := h.get("4000-pub.localhost", "/")
	require.Equal(t, http.StatusOK, code, body)
	var seen seenRequest
	require.NoError(t, json.Unmarshal([]byte(body), &seen))
	assert.Equal(t, []string{pv.Token}, seen.Header[http.CanonicalHeaderKey(provider.PreviewTokenHeader)], "the workload still gets its token")

	code, body, _ = h.get("4000-priv.localhost", "/")
	assert.Equal(t, http.StatusUnauthorized, code, body)
}

// Under --activity client-push preview traffic is served but moves no idle
// clock (refresh-activity and mutations are the manager's, unchanged).
func TestClientPushActivityIgnoresPreviewTraffic(t *testing.T) {
	h := newPreviewHarness(t, "", func(o *Options) { o.PreviewNotActivity = true })
	ctx := context.Background()
	sb, err := h.m.Create(ctx, provider.CreateRequest{Name: "quiet"})
	require.NoError(t, err)
	h.serve(sb.Port)
	pv, err := h.m.PreviewURL(ctx, "quiet", 0)
	require.NoError(t, err)
	h.proxyRefreshes("quiet")
	before, err := h.m.Get(ctx, "quiet")
	require.NoError(t, err)

	for range 3 {
		code, body, _ := h.get("4000-quiet.localhost", "/", provider.PreviewTokenHeader, pv.Token)
		require.Equal(t, http.StatusOK, code, body)
	}
	time.Sleep(100 * time.Millisecond) // a chance for a wrong relay only; cannot fail a right one
	assert.Equal(t, 0, h.proxyRefreshes("quiet"), "no activity event of source proxy")
	after, err := h.m.Get(ctx, "quiet")
	require.NoError(t, err)
	assert.Equal(t, before.LastActivityAt, after.LastActivityAt, "the idle clock did not move")

	_, info, _ := h.get("", "/v1/info")
	assert.Contains(t, info, `"activity":"client-push"`)
}

// A sandbox with a network of its own is reached on its own loopback
// address, where browsers send no preview cookie, and its preview answer
// warns of nothing; one on the host's network can listen on 127.0.0.1,
// where they send every preview's, and its answer says so in a Warning.
func TestPreviewWarnsOfASandboxOnTheHostsNetwork(t *testing.T) {
	h := newPreviewHarness(t, "")
	ctx := context.Background()
	iso, err := h.m.Create(ctx, provider.CreateRequest{ID: "iso", Snapshot: "isolated"})
	require.NoError(t, err)
	shared, err := h.m.Create(ctx, provider.CreateRequest{ID: "shared"})
	require.NoError(t, err)

	code, body, header := h.get("", "/v1/sandboxes/iso/preview-url")
	require.Equal(t, http.StatusOK, code, body)
	assert.Empty(t, header.Values("Warning"))
	var pv provider.Preview
	require.NoError(t, json.Unmarshal([]byte(body), &pv))
	own := netip.AddrPortFrom(launcher.OwnAddress(iso.Port), uint16(iso.Port))
	h.serveOn(own)
	code, body, _ = h.get("4000-iso.localhost:1", "/", provider.PreviewTokenHeader, pv.Token)
	require.Equal(t, http.StatusOK, code, body)
	var seen seenRequest
	require.NoError(t, json.Unmarshal([]byte(body), &seen))
	assert.Equal(t, own.String(), seen.Host, "the relay reaches the sandbox at its own address")

	code, body, header = h.get("", "/v1/sandboxes/shared/preview-url")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, []string{`299 sandplane "sandbox shared shares the host's network (isolation: none): it can listen on 127.0.0.1, ` +
		`where browsers send the preview cookies of every sandbox, and read the cookies of other previews; ` +
		`isolate it (isolation: bwrap, or docker's own network) to keep them from it"`}, header.Values("Warning"))
	_, _, header = h.get("", "/open/"+shared.ID, "Accept", "application/json")
	assert.Len(t, header.Values("Warning"), 1, "the dashboard's preview link warns too")
}
