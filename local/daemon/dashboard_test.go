package daemon

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func TestDashboardServesItsAssets(t *testing.T) {
	ts, _ := newTestServer(t, "")
	tests := []struct {
		path        string
		status      int
		contentType string
		contains    string
	}{
		{"/", 200, "text/html; charset=utf-8", `<script src="/ui/app.js" defer></script>`},
		{"/ui/app.js", 200, "text/javascript; charset=utf-8", "EventSource"},
		{"/ui/style.css", 200, "text/css; charset=utf-8", ".dot"},
		{"/ui/nothing.js", 404, "", ""},
		{"/ui/../server.go", 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			a := do(t, ts, "GET", tt.path, "")
			assert.Equal(t, tt.status, a.status, a.body)
			if tt.status != 200 {
				return
			}
			assert.Equal(t, tt.contentType, a.header.Get("Content-Type"))
			assert.Contains(t, a.body, tt.contains)
		})
	}
	page := do(t, ts, "GET", "/", "")
	assert.Contains(t, page.header.Get("Content-Security-Policy"), "script-src 'self'", "no inline script may run")
}

func TestDashboardListsSandboxesWithoutJavaScript(t *testing.T) {
	ts, m := newTestServer(t, "")
	ctx := context.Background()
	_, err := m.Create(ctx, provider.CreateRequest{Name: "first", Labels: map[string]string{"origin": "harness", "task": "42"}})
	require.NoError(t, err)
	_, err = m.Create(ctx, provider.CreateRequest{Name: "second", Labels: map[string]string{"origin": "cli"}})
	require.NoError(t, err)
	_, err = m.Stop(ctx, "second")
	require.NoError(t, err)

	body := do(t, ts, "GET", "/", "").body
	assert.Contains(t, body, `data-name="first" data-state="started"`)
	assert.Contains(t, body, `data-name="second" data-state="stopped"`)
	assert.Contains(t, body, `<span class="badge" data-origin="harness">harness</span>`)
	assert.Contains(t, body, `<small class="labels">task=42</small>`)
	assert.Less(t, strings.Index(body, `data-name="first"`), strings.Index(body, `data-name="second"`), "in the API's order: oldest first, then by id")
	assert.Contains(t, body, `<option selected>default</option>`, "the create form offers the daemon's snapshots")
}

// TestDashboardEscapesUserInput renders what a hostile caller could put in a
// sandbox, since names, labels and reasons all reach the page.
func TestDashboardEscapesUserInput(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	hostile := `<img src=x onerror=alert(1)>`
	sb := provider.Sandbox{
		ID: "abc", Name: "abc", State: provider.StateStarted, Runtime: provider.RuntimeNative, Snapshot: "default",
		Labels:      map[string]string{"origin": `"><script>alert(1)</script>`, "k": hostile},
		ErrorReason: hostile, PreviewURL: "javascript:alert(1)", Port: 4100,
		CreatedAt: now.Add(-time.Hour), LastActivityAt: now.Add(-time.Minute), AutoStopInterval: 15,
	}
	var buf bytes.Buffer
	require.NoError(t, templates.ExecuteTemplate(&buf, "index.html", dashboardData{Now: now, Minute: time.Minute, Sandboxes: []provider.Sandbox{sb}}))
	out := buf.String()
	assert.NotContains(t, out, "<script>alert")
	assert.NotContains(t, out, "<img src=x")
	assert.NotContains(t, out, `href="javascript:`)
	assert.Contains(t, out, "&lt;img src=x onerror=alert(1)&gt;")
}

func TestDashboardRowShowsIdleAgainstAutoStop(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	base := provider.Sandbox{ID: "s", Name: "s", Runtime: provider.RuntimeNative, Snapshot: "default", CreatedAt: now.Add(-90 * time.Minute), Labels: map[string]string{}}
	tests := []struct {
		name     string
		mutate   func(*provider.Sandbox)
		minute   time.Duration
		contains []string
		absent   []string
	}{
		{
			name: "started, half idle",
			mutate: func(s *provider.Sandbox) {
				s.State, s.AutoStopInterval, s.LastActivityAt = provider.StateStarted, 10, now.Add(-5*time.Minute)
			},
			minute:   time.Minute,
			contains: []string{"5m 0s / 10m 0s", `value="0.5"`, "1h 30m"},
		},
		{
			name: "shrunk minute",
			mutate: func(s *provider.Sandbox) {
				s.State, s.AutoStopInterval, s.LastActivityAt = provider.StateStarted, 1, now.Add(-100*time.Millisecond)
			},
			minute:   200 * time.Millisecond,
			contains: []string{"100ms / 200ms", `value="0.5"`},
		},
		{
			name:     "never stops",
			mutate:   func(s *provider.Sandbox) { s.State, s.LastActivityAt = provider.StateStarted, now },
			minute:   time.Minute,
			contains: []string{"0s / never"},
			absent:   []string{"<meter"},
		},
		{
			name: "auto-stopped stands out",
			mutate: func(s *provider.Sandbox) {
				s.State, s.AutoStopInterval, s.ErrorReason = provider.StateStopped, 15, provider.ErrorReasonAutoStopped
			},
			minute:   time.Minute,
			contains: []string{`<span class="auto">auto_stopped</span>`, "/ 15m 0s"},
			absent:   []string{"<meter", "preview"},
		},
		{
			name: "other reasons are plain",
			mutate: func(s *provider.Sandbox) {
				s.State, s.ErrorReason = provider.StateStopped, "exited: code 1"
			},
			minute:   time.Minute,
			contains: []string{`<td class="reason">exited: code 1</td>`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.mutate(&s)
			var buf bytes.Buffer
			require.NoError(t, templates.ExecuteTemplate(&buf, "index.html", dashboardData{Now: now, Minute: tt.minute, Sandboxes: []provider.Sandbox{s}}))
			for _, c := range tt.contains {
				assert.Contains(t, buf.String(), c)
			}
			for _, a := range tt.absent {
				assert.NotContains(t, buf.String(), a)
			}
		})
	}
}

func TestLogsPage(t *testing.T) {
	ts, m := newTestServer(t, "")
	s, err := m.Create(context.Background(), provider.CreateRequest{Name: "logged"})
	require.NoError(t, err)

	a := do(t, ts, "GET", "/logs/"+s.ID, "")
	assert.Equal(t, http.StatusOK, a.status)
	assert.Contains(t, a.body, `<pre id="stdout">`)
	assert.Contains(t, a.body, "logged")

	a = do(t, ts, "GET", "/logs/nope", "")
	assert.Equal(t, http.StatusNotFound, a.status)
	assert.Contains(t, a.body, "nope")
	assert.Contains(t, a.header.Get("Content-Type"), "text/html")
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{time.Millisecond, "1ms"},
		{999 * time.Millisecond, "999ms"},
		{time.Second, "1s"},
		{59 * time.Second, "59s"},
		{61 * time.Second, "1m 1s"},
		{time.Hour + 30*time.Minute + 5*time.Second, "1h 30m"},
		{50 * time.Hour, "2d 2h"},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, formatDuration(tt.d))
		})
	}
}

func TestDashboardRoutesLeaveTheAPIAlone(t *testing.T) {
	ts, _ := newTestServer(t, "")
	// The page's routes must not shadow the API or the not-found answer.
	assert.Equal(t, 200, do(t, ts, "GET", "/v1/sandboxes", "").status)
	assert.Equal(t, 404, do(t, ts, "GET", "/index.html", "").status)
	assert.Equal(t, 404, do(t, ts, "GET", "/logs/", "").status)
}

// /?session=ID opens the dashboard on that agent session's sandbox, a
// stopped one as stopped with its reason, and says when it has none.
func TestDashboardOpensASession(t *testing.T) {
	ts, m := newTestServer(t, "")
	ctx := context.Background()
	for _, req := range []provider.CreateRequest{
		{Name: "turn-a", SessionID: ptr("sess-a"), Public: true},
		{Name: "turn-b", SessionID: ptr("sess-b")},
		{Name: "loose"},
	} {
		_, err := m.Create(ctx, req)
		require.NoError(t, err)
	}
	_, err := m.Stop(ctx, "turn-b")
	require.NoError(t, err)

	body := do(t, ts, "GET", "/", "").body
	for _, name := range []string{"turn-a", "turn-b", "loose"} {
		assert.Contains(t, body, `data-name="`+name+`"`)
	}
	assert.Contains(t, body, `<small class="session">session <a href="/?session=sess-a">sess-a</a></small>`)
	assert.Contains(t, body, `<span class="badge" data-public>public</span>`, "a public sandbox is marked")

	tests := []struct {
		query      string
		want, gone []string
	}{
		{"?session=sess-a", []string{`data-name="turn-a" data-state="started"`, `data-session="sess-a"`}, []string{`data-name="turn-b"`, `data-name="loose"`}},
		{"?session=sess-b", []string{`data-name="turn-b" data-state="stopped"`, `<td class="reason">stopped</td>`}, []string{`data-name="turn-a"`}},
		{"?session=sess-none", []string{`No sandbox belongs to session <code>sess-none</code>.`}, []string{`data-name=`}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			body := do(t, ts, "GET", "/"+tt.query, "").body
			for _, w := range tt.want {
				assert.Contains(t, body, w)
			}
			for _, g := range tt.gone {
				assert.NotContains(t, body, g)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
