package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/browsertest"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/relay"
)

// cookieJarEnv makes this test binary, run as a sandbox's workload, the
// server of the cookie tests (serveCookieJar) instead of running tests.
const cookieJarEnv = "SANDPLANE_TEST_COOKIE_JAR"

// seenRequest is what the cookie jar server saw of one request.
type seenRequest struct {
	Host   string `json:"host"`
	Cookie string `json:"cookie"`
}

// serveCookieJar is a sandbox's workload that steals what it can: it
// listens on 127.0.0.1:$PORT, remembers the Host and Cookie of every
// request, answers /seen with them, and /go?to=URL with a redirect to URL,
// as a page of a sandbox can send a browser anywhere.
func serveCookieJar() int {
	var mu sync.Mutex
	var seen []seenRequest
	mux := http.NewServeMux()
	mux.HandleFunc("/seen", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, seenRequest{Host: r.Host, Cookie: r.Header.Get("Cookie")})
		mu.Unlock()
		if to := r.URL.Query().Get("to"); r.URL.Path == "/go" && to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = fmt.Fprintln(w, "cookie jar")
	})
	if err := http.ListenAndServe(net.JoinHostPort("127.0.0.1", os.Getenv("PORT")), mux); err != nil {
		fmt.Fprintln(os.Stderr, "cookie jar:", err)
		return 1
	}
	return 0
}

// cookieJarConfig declares the cookie jar as two snapshots: isolated, and
// on the host's network (isolation: none, which cannot keep a sandbox off
// 127.0.0.1: the attack works there, and the daemon warns of it).
func cookieJarConfig(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	snap := func(name, isolation string) string {
		return fmt.Sprintf("  %s:\n    command: [%q, \"-test.run=^$\"]\n    env: {%s: \"1\"}\n    isolation: %s\n",
			name, exe, cookieJarEnv, isolation)
	}
	return "snapshots:\n" + snap("jar", "bwrap") + snap("shared-jar", "none")
}

// navigate loads u in the browser, within a bound, and returns the load's
// error (a refused connection is one).
func navigate(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return chromedp.Do(ctx, chromedp.Navigate(u))
}

// openPreview logs the browser into the preview of port 4000 of s, as the
// dashboard's link does (the token once, traded for a cookie), and returns
// the preview's origin and the cookie's value.
func openPreview(t *testing.T, ctx context.Context, d *testdaemon.Daemon, s *provider.Sandbox) (string, string) {
	t.Helper()
	pv, err := d.P.PreviewURL(context.Background(), s.ID, 4000)
	require.NoError(t, err)
	_, daemonPort, err := net.SplitHostPort(d.Addr)
	require.NoError(t, err)
	origin := "http://4000-" + s.ID + ".localhost:" + daemonPort
	require.NoError(t, navigate(ctx, origin+"/?"+url.Values{relay.TokenParam: {pv.Token}}.Encode()))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := chromedp.Call(cctx, network.GetCookies, network.GetCookiesParams{URLs: []string{origin + "/"}})
	require.NoError(t, err)
	for _, c := range res.Cookies {
		if c.Name == relay.CookieName {
			return origin, c.Value
		}
	}
	t.Fatalf("the browser holds no preview cookie of %s", origin)
	return "", ""
}

// seenBy is what s's cookie jar saw, asked through its preview by path.
func seenBy(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox) []seenRequest {
	t.Helper()
	seen, status, body := askSeen(t, d, s)
	require.Equal(t, http.StatusOK, status, body)
	return seen
}

// askSeen asks s's cookie jar what it saw, and returns the answer's status
// and, unless it is 200, body.
func askSeen(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox) ([]seenRequest, int, string) {
	t.Helper()
	pv, err := d.P.PreviewURL(context.Background(), s.ID, 4000)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, pv.URL+"/seen", nil)
	require.NoError(t, err)
	req.Header.Set(relay.TokenHeader, pv.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, string(b)
	}
	var seen []seenRequest
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&seen))
	return seen, resp.StatusCode, ""
}

// attack has the page of thief's preview send the browser to victim's
// preview host at thief's own host port, and returns the browser's error:
// the browser resolves victim's host to 127.0.0.1 and [::1], and attaches
// victim's cookie to whatever listens there on that port.
func attack(t *testing.T, ctx context.Context, d *testdaemon.Daemon, thief, victim *provider.Sandbox) error {
	t.Helper()
	thiefOrigin, _ := openPreview(t, ctx, d, thief)
	trap := "http://4000-" + victim.ID + ".localhost:" + strconv.Itoa(thief.Port) + "/steal"
	return navigate(ctx, thiefOrigin+"/go?"+url.Values{"to": {trap}}.Encode())
}

// stole reports whether any request thief's server saw carried cookie.
func stole(seen []seenRequest, cookie string) bool {
	for _, r := range seen {
		if strings.Contains(r.Cookie, cookie) {
			return true
		}
	}
	return false
}

// TestPreviewCookiesCannotBeStolen drives a real Chromium through the
// attack on preview cookies: a page of sandbox B sends the browser to
// http://4000-<A>.localhost:<B's host port>/, and the browser attaches A's
// preview cookie, since cookies are scoped by host and never by port. An
// isolated B's host port is on its own address, where *.localhost does not
// resolve, and B cannot listen on the host's 127.0.0.1 at all: it sees no
// cookie of A's. A B on the host's network (isolation: none) can listen
// there, and does steal it, which is why its preview carries a warning.
// After a daemon restart the adopted sandboxes keep their addresses.
func TestPreviewCookiesCannotBeStolen(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed: apt-get install bubblewrap")
	}
	ctx := browsertest.Start(t, "the preview cookie attack in a real browser")
	d := testdaemon.Start(t, testdaemon.Options{Config: cookieJarConfig(t)})
	create := func(snapshot string) *provider.Sandbox {
		s, err := d.P.Create(context.Background(), provider.CreateRequest{Snapshot: snapshot, AutoStopInterval: ptr(0)})
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.P.Delete(context.Background(), s.ID) })
		require.Equal(t, provider.StateStarted, s.State)
		return s
	}
	a, b, shared := create("jar"), create("jar"), create("shared-jar")
	_, cookieA := openPreview(t, ctx, d, a)

	t.Run("isolated", func(t *testing.T) {
		err := attack(t, ctx, d, b, a)
		seen := seenBy(t, d, b)
		assert.NotEmpty(t, seen, "B's page sent the browser on")
		assert.False(t, stole(seen, cookieA), "B read A's preview cookie: %v", seen)
		for _, r := range seen {
			assert.NotContains(t, r.Host, a.ID, "B was reached at A's preview host")
		}
		if assert.Error(t, err, "the browser reached something at 127.0.0.1:%d", b.Port) {
			assert.Contains(t, err.Error(), "ERR_CONNECTION_REFUSED", "nothing listens on B's port where *.localhost resolves")
		}
		for _, host := range []string{"127.0.0.1", "::1"} {
			if c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(b.Port))); err == nil {
				c.Close()
				t.Errorf("something listens on %s:%d, where *.localhost resolves", host, b.Port)
			}
		}
		warning := previewWarning(t, d, b)
		assert.Empty(t, warning, "an isolated sandbox's preview warns of nothing")
	})

	t.Run("on the host's network", func(t *testing.T) {
		// Nothing keeps a process on the host's network off 127.0.0.1: the
		// attack works, as docs/security.md says, and the preview says so.
		require.NoError(t, attack(t, ctx, d, shared, a))
		assert.True(t, stole(seenBy(t, d, shared), cookieA), "the unisolated sandbox read A's cookie")
		assert.Contains(t, previewWarning(t, d, shared), "shares the host's network")
	})

	t.Run("after a restart", func(t *testing.T) {
		d = d.Restart(t)
		for _, s := range []*provider.Sandbox{a, b} {
			got, err := d.P.Get(context.Background(), s.ID)
			require.NoError(t, err)
			require.Equal(t, provider.StateStarted, got.State, "adopted")
			// The restarted daemon answers at once and checks its
			// sandboxes in the background: unavailable until then.
			var seen []seenRequest
			require.Eventually(t, func() bool {
				var status int
				seen, status, _ = askSeen(t, d, s)
				return status == http.StatusOK
			}, 20*time.Second, 20*time.Millisecond, "the preview never reached the adopted sandbox %s", s.ID)
			assert.NotEmpty(t, seen, "the preview reaches the adopted sandbox at its own address")
			assert.True(t, portFree(s.Port), "nothing of sandbox %s listens on 127.0.0.1:%d", s.ID, s.Port)
			conn, err := net.Dial("tcp", net.JoinHostPort(launcher.OwnAddress(s.Port).String(), strconv.Itoa(s.Port)))
			require.NoError(t, err, "the adopted sandbox still listens on its own address")
			conn.Close()
		}
		_, cookieA = openPreview(t, ctx, d, a) // the restarted relay signs with a new key
		err := attack(t, ctx, d, b, a)
		assert.False(t, stole(seenBy(t, d, b), cookieA), "B read A's preview cookie after the restart")
		assert.Error(t, err, "the browser reached something at 127.0.0.1:%d", b.Port)
	})
}

// previewWarning is the Warning header of s's preview answer.
func previewWarning(t *testing.T, d *testdaemon.Daemon, s *provider.Sandbox) string {
	t.Helper()
	resp, err := http.Get(d.URL + "/v1/sandboxes/" + s.ID + "/preview-url?port=4000")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp.Header.Get("Warning")
}
