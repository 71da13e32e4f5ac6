package browser

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// shown is what the table shows, name:state per row, in its order.
func shown(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll("#rows tr[data-id]")].map(tr => tr.dataset.name + ":" + tr.dataset.state)`)
}

// rendered waits until the page's script, not the server, drew the row of
// name in state: only the script fills a row's action buttons, and it
// draws rows from the event stream alone, so a row with buttons came from
// the stream of the page's session.
func rendered(name, state string) chromedp.Action[chromedp.Void] {
	return present(row(name, state) + ` td.actions button[data-action=delete]`)
}

// TestDashboardOpensASessionInABrowser opens /?session=ID in Chromium, the
// link an agent's harness hands out for its session. The server renders
// the session's rows, and the page's script then follows
// /v1/events?sessionId=ID: the table must stay that session's, a stopped
// sandbox must show stopped with its reason, a sandbox made later in the
// session must appear and one of another session must not.
func TestDashboardOpensASessionInABrowser(t *testing.T) {
	d := startDaemon(t)
	ctx := browser(t)
	bg := context.Background()

	// Auto-stop off: with a one-second minute, the default would stop
	// sandboxes under the test's feet and change the states it checks.
	for _, req := range []provider.CreateRequest{
		{Name: "turn-a1", SessionID: ptr("sess-a"), AutoStopInterval: ptr(0)},
		{Name: "turn-a2", SessionID: ptr("sess-a"), AutoStopInterval: ptr(0)},
		{Name: "turn-b1", SessionID: ptr("sess-b"), AutoStopInterval: ptr(0)},
		{Name: "loose", AutoStopInterval: ptr(0)},
	} {
		_, err := d.P.Create(bg, req)
		require.NoError(t, err, req.Name)
	}
	_, err := d.P.Stop(bg, "turn-a2")
	require.NoError(t, err)

	step(t, ctx, "open the session's page",
		chromedp.Navigate(d.URL+"/?session=sess-a"),
		present(`#live[data-status="live"]`),
		rendered("turn-a1", "started"),
		rendered("turn-a2", "stopped"),
	)
	// One render draws every row: once both are there, the table is whole.
	assert.Equal(t, []string{"turn-a1:started", "turn-a2:stopped"}, shown(t, ctx), "the session's sandboxes only")
	assert.Equal(t, "stopped", eval[string](t, ctx, `document.querySelector('#rows tr[data-name="turn-a2"] td.reason').textContent`), "a stopped sandbox shows its reason")
	assert.True(t, eval[bool](t, ctx, `document.querySelector('#rows tr[data-name="turn-a2"] button[data-action=start]') !== null`), "a stopped sandbox offers start")
	assert.Equal(t, "sess-a", eval[string](t, ctx, `document.getElementById("session").dataset.session`))
	assert.Contains(t, eval[string](t, ctx, `document.getElementById("session").textContent`), "its sandboxes only")
	eval[string](t, ctx, `window.__sameDocument = "yes"`)

	// Another session's sandbox first, then this session's: the stream is
	// ordered, so once the second shows, the first would have too.
	_, err = d.P.Create(bg, provider.CreateRequest{Name: "turn-b2", SessionID: ptr("sess-b"), AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	_, err = d.P.Create(bg, provider.CreateRequest{Name: "turn-a3", SessionID: ptr("sess-a"), AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	step(t, ctx, "see a sandbox made later in the session", rendered("turn-a3", "started"))
	assert.Equal(t, []string{"turn-a1:started", "turn-a2:stopped", "turn-a3:started"}, shown(t, ctx), "another session's sandbox stays out")
	// A stop made elsewhere arrives too, with its reason.
	_, err = d.P.Stop(bg, "turn-a1")
	require.NoError(t, err)
	step(t, ctx, "see a stop made through the API", rendered("turn-a1", "stopped"))
	assert.Equal(t, "stopped", eval[string](t, ctx, `document.querySelector('#rows tr[data-name="turn-a1"] td.reason').textContent`))
	assert.Equal(t, "yes", eval[string](t, ctx, `window.__sameDocument`), "every change arrived without a reload")

	// A session without sandboxes says so; the server says it first, so
	// the script's own empty row is proved by the session getting one
	// sandbox and losing it again.
	step(t, ctx, "open a session with no sandbox",
		chromedp.Navigate(d.URL+"/?session=sess-none"),
		present(`#live[data-status="live"]`),
		present(`#session[data-session="sess-none"]`),
		poll(`document.querySelector("#rows tr.empty") !== null && document.querySelector("#rows tr.empty").textContent === "No sandbox belongs to session sess-none."`),
	)
	assert.Empty(t, shown(t, ctx))
	_, err = d.P.Create(bg, provider.CreateRequest{Name: "turn-none", SessionID: ptr("sess-none"), AutoStopInterval: ptr(0)})
	require.NoError(t, err)
	step(t, ctx, "its first sandbox shows", rendered("turn-none", "started"), absent(`#rows tr.empty`))
	require.NoError(t, d.P.Delete(bg, "turn-none"))
	step(t, ctx, "and when it goes, the session says it has none again",
		absent(`#rows tr[data-name="turn-none"]`),
		poll(`document.querySelector("#rows tr.empty") !== null && document.querySelector("#rows tr.empty").textContent === "No sandbox belongs to session sess-none."`),
	)

	// The unfiltered page links each sandbox to its session's page.
	step(t, ctx, "open every sandbox",
		chromedp.Navigate(d.URL+"/"),
		present(`#live[data-status="live"]`),
		rendered("turn-b2", "started"),
		absent(`#session`),
	)
	assert.Equal(t, []string{"turn-a1:stopped", "turn-a2:stopped", "turn-b1:started", "loose:started", "turn-b2:started", "turn-a3:started"}, shown(t, ctx))
	assert.False(t, eval[bool](t, ctx, `document.querySelector('#rows tr[data-name="loose"] small.session') !== null`), "a sandbox of no session links to none")
	step(t, ctx, "follow a row's session link", click(`#rows tr[data-name="turn-b1"] small.session a`))
	require.Eventually(t, func() bool {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		return err == nil && loc == d.URL+"/?session=sess-b"
	}, 40*time.Second, 20*time.Millisecond, "the session link leads to the session's page")
	step(t, ctx, "the session's page takes over",
		present(`#session[data-session="sess-b"]`),
		present(`#live[data-status="live"]`),
		rendered("turn-b1", "started"),
		rendered("turn-b2", "started"),
	)
	assert.Equal(t, []string{"turn-b1:started", "turn-b2:started"}, shown(t, ctx))
}
