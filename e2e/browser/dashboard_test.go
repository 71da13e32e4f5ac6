package browser

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/browsertest"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native/nsinit"
	"github.com/sandplane/sandplane/provider"
)

var update = flag.Bool("update", false, "rewrite docs/dashboard.png from this run")

func TestMain(m *testing.M) {
	nsinit.Main() // before flag.Parse, which would refuse an init's flags
	flag.Parse()
	os.Exit(testdaemon.Main(m))
}

// startDaemon runs `sandplane serve` with its own root and a one-second
// interval minute, so that auto-stop shows within the test.
func startDaemon(t *testing.T) *testdaemon.Daemon {
	t.Helper()
	d := testdaemon.Start(t, testdaemon.Options{Minute: time.Second, Ports: 100})
	t.Cleanup(func() {
		// The sandboxes go first: a daemon outlives nothing it started.
		if list, err := d.P.List(context.Background(), provider.ListOptions{}); err == nil {
			for _, s := range list {
				_ = d.P.Delete(context.Background(), s.ID)
			}
		}
	})
	return d
}

// browser starts a headless Chromium with a fresh profile; Cleanup ends it.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, "the dashboard's browser tests", chromedp.WindowSize(1360, 760), chromedp.Flag("hide-scrollbars", true))
}

// step runs actions with a generous bound, so that a broken page fails the
// test instead of hanging it.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, actions...), what)
}

func eval[T any](t *testing.T, ctx context.Context, js string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](js, opts...))
	require.NoError(t, err, js)
	return v
}

// present waits until an element matches sel. It polls a query instead of
// holding on to a node, because the page re-renders its rows on every
// event and a held node may be replaced before it is checked.
func present(sel string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
}

func absent(sel string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`document.querySelector(%q) === null`, sel))
}

func poll(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(40*time.Second))(ctx, t)
		return chromedp.Void{}, err
	}
}

// click clicks the element sel names at the moment of the click, for the
// same reason.
func click(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) throw new Error("nothing matches %s"); el.click(); return true })()`, sel, strings.ReplaceAll(sel, `"`, `'`)))(ctx, t)
		return chromedp.Void{}, err
	}
}

func row(name, state string) string {
	return fmt.Sprintf(`#rows tr[data-name=%q][data-state=%q]`, name, state)
}

func TestDashboardInABrowser(t *testing.T) {
	d := startDaemon(t)
	ctx := browser(t)
	bg := context.Background()

	// Sandboxes from elsewhere, for the page to show from its first load.
	_, err := d.P.Create(bg, provider.CreateRequest{Name: "agent-triage-17", Labels: map[string]string{"origin": "harness", "task": "triage"}, AutoStopInterval: ptr(600)})
	require.NoError(t, err)
	idle, err := d.P.Create(bg, provider.CreateRequest{Name: "agent-review-4", Labels: map[string]string{"origin": "harness", "task": "review"}, AutoStopInterval: ptr(1)})
	require.NoError(t, err)

	step(t, ctx, "load the page",
		chromedp.Navigate(d.URL+"/"),
		present(`#live[data-status="live"]`),
		present(row("agent-triage-17", "started")),
	)
	// A reload would lose this; it must survive every step below.
	eval[string](t, ctx, `window.__sameDocument = "yes"`)

	// Create from the page, with snapshot, runtime, labels and auto-stop.
	step(t, ctx, "create from the form",
		chromedp.SendKeys(chromedp.CSS(`#create-form input[name=name]`), "from-browser"),
		chromedp.SetValue(chromedp.CSS(`#create-form select[name=runtime]`), "native"),
		chromedp.SendKeys(chromedp.CSS(`#create-form input[name=labels]`), "task=demo, team=web"),
		chromedp.SendKeys(chromedp.CSS(`#create-form input[name=autoStopInterval]`), "120"),
		chromedp.Click(chromedp.CSS(`#create-button`)),
		present(row("from-browser", "started")),
	)
	made, err := d.P.Get(bg, "from-browser")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"origin": "web-ui", "task": "demo", "team": "web"}, made.Labels)
	assert.Equal(t, 120, made.AutoStopInterval)
	assert.Equal(t, provider.RuntimeNative, made.Runtime)
	assert.Equal(t, "web-ui", eval[string](t, ctx, `document.querySelector('#rows tr[data-name="from-browser"] .badge').textContent`))

	// Stop from the page: the row turns stopped without a reload.
	step(t, ctx, "stop from the page",
		click(`#rows tr[data-name="from-browser"] button[data-action=stop]`),
		present(row("from-browser", "stopped")),
		present(`#rows tr[data-name="from-browser"] button[data-action=start]`),
	)
	// Changes made elsewhere arrive from the event stream.
	_, err = d.P.Start(bg, "from-browser")
	require.NoError(t, err)
	step(t, ctx, "see a start made through the API", present(row("from-browser", "started")))
	step(t, ctx, "see an auto-stop, highlighted",
		present(row("agent-review-4", "stopped")),
		present(`#rows tr[data-name="agent-review-4"] td.reason .auto`),
	)
	got, err := d.P.Get(bg, idle.ID)
	require.NoError(t, err)
	assert.Equal(t, provider.ErrorReasonAutoStopped, got.ErrorReason)

	// An error from the API shows its message.
	step(t, ctx, "create a duplicate",
		chromedp.SendKeys(chromedp.CSS(`#create-form input[name=name]`), "from-browser"),
		chromedp.Click(chromedp.CSS(`#create-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#error:not([hidden])`)),
	)
	assert.Contains(t, eval[string](t, ctx, `document.getElementById("error-text").textContent`), `a sandbox named "from-browser" already exists`)
	step(t, ctx, "dismiss the error",
		chromedp.Click(chromedp.CSS(`#error-close`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#error`)),
	)
	eval[string](t, ctx, `document.querySelector("#create-form input[name=name]").value = ""`)

	// Names and labels are user input: they show as text and never run.
	_, err = d.P.Create(bg, provider.CreateRequest{Name: "hostile", AutoStopInterval: ptr(0),
		Labels: map[string]string{"note": `<img src=x onerror="window.__injected=1">`}})
	require.NoError(t, err)
	step(t, ctx, "see a hostile label", present(row("hostile", "started")))
	assert.Contains(t, eval[string](t, ctx, `document.querySelector('#rows tr[data-name="hostile"] .labels').textContent`), `<img src=x`)
	assert.False(t, eval[bool](t, ctx, `"__injected" in window`))

	// Delete asks first; declining keeps the sandbox, accepting removes it.
	answer := make(chan bool, 2)
	answer <- false
	answer <- true
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	var dialogText []string
	var mu sync.Mutex
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			mu.Lock()
			dialogText = append(dialogText, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: <-answer})
		}
	}()
	step(t, ctx, "decline a delete", click(`#rows tr[data-name="hostile"] button[data-action=delete]`))
	require.Eventually(t, func() bool { return len(answer) == 1 }, 20*time.Second, 10*time.Millisecond, "no confirmation asked")
	_, err = d.P.Get(bg, "hostile")
	require.NoError(t, err, "declined: the sandbox stays")
	step(t, ctx, "accept a delete",
		click(`#rows tr[data-name="hostile"] button[data-action=delete]`),
		absent(`#rows tr[data-name="hostile"]`),
	)
	_, err = d.P.Get(bg, "hostile")
	assert.True(t, provider.IsNotFound(err), "accepted: the sandbox is gone")
	mu.Lock()
	assert.Contains(t, strings.Join(dialogText, "\n"), `Delete sandbox "hostile"?`)
	mu.Unlock()

	assert.Equal(t, "yes", eval[string](t, ctx, `window.__sameDocument`), "every change arrived without a reload")
	assert.Equal(t, "live", eval[string](t, ctx, `document.getElementById("live").dataset.status`))

	// The rows match the API's list, in its order.
	list, err := d.P.List(bg, provider.ListOptions{})
	require.NoError(t, err)
	var want []string
	for _, s := range list {
		want = append(want, s.Name+":"+string(s.State))
	}
	shown := eval[[]string](t, ctx, `[...document.querySelectorAll("#rows tr[data-id]")].map(tr => tr.dataset.name + ":" + tr.dataset.state)`)
	assert.Equal(t, want, shown)

	if *update {
		// One sandbox from the CLI, so the picture shows every origin.
		_, err = d.P.Create(bg, provider.CreateRequest{Name: "run-3f9c2a1e", Labels: map[string]string{"origin": "cli"}})
		require.NoError(t, err)
		step(t, ctx, "settle", present(row("run-3f9c2a1e", "started")))
		// The picture shows the default root, not this run's temp dir.
		eval[string](t, ctx, `document.querySelector(".meta code").textContent = "~/.local/state/sandplane"`)
		sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "dashboard.png"), png, 0o644))
	}
}

func ptr[T any](v T) *T { return &v }

// TestDashboardWithATokenInABrowser signs in to a daemon that needs a token
// and proves the promise of the threat model: the dashboard works with the
// token kept in its tab, the browser holds it in no cookie, and a server on
// another port of 127.0.0.1 (where a sandbox may listen) that the same
// browser visits receives no credential.
func TestDashboardWithATokenInABrowser(t *testing.T) {
	const token = "e2e-dashboard-token+0123456789"
	d := testdaemon.Start(t, testdaemon.Options{Minute: time.Second, Ports: 100, Token: token})
	bg := context.Background()
	t.Cleanup(func() {
		if list, err := d.P.List(bg, provider.ListOptions{}); err == nil {
			for _, s := range list {
				_ = d.P.Delete(bg, s.ID)
			}
		}
	})
	ctx := browser(t)
	made, err := d.P.Create(bg, provider.CreateRequest{Name: "behind-the-token", AutoStopInterval: ptr(0)})
	require.NoError(t, err)

	// A bystander on another port of 127.0.0.1: what the browser sends it.
	var mu sync.Mutex
	var sent []string
	bystander := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Cookie"), r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "<!doctype html><title>bystander</title>")
	}))
	t.Cleanup(bystander.Close)

	step(t, ctx, "a locked page asks for the token and shows nothing",
		chromedp.Navigate(d.URL+"/"),
		present(`#signin:not([hidden])`),
	)
	assert.NotContains(t, eval[string](t, ctx, `document.body.innerText`), "behind-the-token")
	step(t, ctx, "a wrong token is refused",
		chromedp.SendKeys(chromedp.CSS(`#signin input[name=token]`), "wrong"),
		chromedp.Click(chromedp.CSS(`#signin-button`)),
		present(`#signin:not([hidden])`),
		poll(`document.getElementById("signin-why").textContent.includes("refused")`),
	)
	assert.Empty(t, eval[string](t, ctx, `document.getElementById("meta").textContent`), "nothing of the daemon shows with a wrong token")

	step(t, ctx, "open it with ?token= once",
		chromedp.Navigate(d.URL+"/?token="+url.QueryEscape(token)),
		present(`#live[data-status="live"]`),
		present(row("behind-the-token", "started")),
	)
	assert.Equal(t, d.URL+"/", eval[string](t, ctx, `location.href`), "the token left the address bar")
	assert.Contains(t, eval[string](t, ctx, `document.getElementById("meta").textContent`), "one interval minute = 1s")

	step(t, ctx, "create from the form, with the token",
		chromedp.SendKeys(chromedp.CSS(`#create-form input[name=name]`), "made-in-the-tab"),
		chromedp.Click(chromedp.CSS(`#create-button`)),
		present(row("made-in-the-tab", "started")),
	)
	_, err = d.P.Get(bg, "made-in-the-tab")
	require.NoError(t, err)

	// The preview link asks the daemon with the token, then opens the
	// sandbox's own host, where its toolbox runs a command.
	step(t, ctx, "open the preview", click(`#rows tr[data-name="behind-the-token"] a[href^="/open/"]`))
	var previewTarget *target.Info
	require.Eventually(t, func() bool {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			return false
		}
		for _, info := range infos {
			if info.Type == "page" && strings.HasPrefix(info.URL, "http://4000-"+made.ID+".localhost:") && !strings.Contains(info.URL, "DAYTONA_SANDBOX_AUTH_KEY") {
				previewTarget = info
				return true
			}
		}
		return false
	}, 40*time.Second, 50*time.Millisecond, "no preview tab opened")
	pctx, cancelPreview := chromedp.NewContext(ctx, chromedp.WithTargetID(previewTarget.TargetID))
	defer cancelPreview()
	out := eval[string](t, pctx, `fetch("/process/execute", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({command: "echo ran-in-preview"})}).then(r => r.text()).then(t => (window.opener === null ? "no opener: " : "opener: ") + t)`, chromedp.EvalAwaitPromise)
	assert.Contains(t, out, "ran-in-preview")
	assert.True(t, strings.HasPrefix(out, "no opener: "), "the preview cannot reach back into the dashboard: %s", out)

	logs := eval[string](t, ctx, `document.querySelector('#rows tr[data-name="behind-the-token"] a[href^="/logs/"]').href`)
	step(t, ctx, "the logs page reads with the token",
		chromedp.Navigate(logs),
		poll(`document.getElementById("meta") && document.getElementById("meta").textContent.includes(`+fmt.Sprintf("%q", made.ID)+`)`),
	)

	// What the browser holds and sends elsewhere.
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{d.URL + "/", bystander.URL + "/"}})
	require.NoError(t, err)
	for _, c := range cookies.Cookies {
		assert.NotContains(t, c.Value, "e2e-dashboard-token", "cookie %s", c.Name)
	}
	step(t, ctx, "visit the bystander", chromedp.Navigate(bystander.URL+"/"), poll(`document.title === "bystander"`))
	assert.Zero(t, eval[int](t, ctx, `sessionStorage.length`), "another port cannot read the dashboard's storage")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, sent)
	for _, h := range sent {
		assert.NotContains(t, h, "e2e-dashboard-token", "a server on another port received the daemon token")
	}
}
