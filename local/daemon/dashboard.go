package daemon

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sandplane/sandplane/internal/humanize"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
)

// The dashboard is plain HTML, CSS and one vanilla script, embedded so the
// binary serves it with no build step. Without a daemon token the page is
// rendered on the server first, so it shows the sandboxes without
// JavaScript; the script then keeps it live from GET /v1/events and drives
// the /v1 API. With a token, a page navigation cannot carry it (no cookie
// holds it: see legacyTokenCookie), so the pages are a locked shell that
// shows nothing until the script, holding the token in the tab, fills them
// from the API.
//
//go:embed web/templates/*.html web/static/*
var webFS embed.FS

var (
	templates = template.Must(template.New("").Funcs(template.FuncMap{
		"age":      humanDuration,
		"origin":   originOf,
		"window":   autoStopWindow,
		"idleFrac": idleFraction,
		"labels":   formatLabels,
	}).ParseFS(webFS, "web/templates/*.html"))
	staticFS = must(fs.Sub(webFS, "web/static"))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// contentSecurity keeps anything that slipped past escaping from running:
// only the dashboard's own script and styles load, and fetches stay on the
// daemon's origin.
const contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// routeDashboard adds the dashboard's routes: the page at /, its assets
// under /ui/, and one sandbox's entrypoint logs at /logs/{idOrName}.
func (s *Server) routeDashboard(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.dashboard)
	mux.HandleFunc("GET /logs/{idOrName}", s.logsPage)
	mux.HandleFunc("GET /open/{idOrName}", s.openPreview)
	assets := http.StripPrefix("/ui/", http.FileServerFS(staticFS))
	mux.Handle("GET /ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Assets change with the binary, not while it runs; revalidating
		// keeps an upgraded daemon from serving a stale script.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		assets.ServeHTTP(w, r)
	}))
}

// dashboardShell reports whether r asks for a dashboard page or asset, which
// answer without the token: a page then renders locked, with nothing of
// the daemon in it, and the assets are the same for everyone.
func dashboardShell(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	p := r.URL.Path
	return p == "/" || strings.HasPrefix(p, "/ui/") || strings.HasPrefix(p, "/logs/") && !strings.Contains(p[len("/logs/"):], "/")
}

type dashboardData struct {
	Locked    bool // no token came with the request: show nothing, ask for it
	Info      provider.Info
	Now       time.Time
	Minute    time.Duration
	Sandboxes []provider.Sandbox
	// Session is the agent session the page was opened on (/?session=ID),
	// whose sandboxes alone it lists.
	Session string
}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(legacyTokenCookie); err == nil {
		http.SetCookie(w, &http.Cookie{Name: legacyTokenCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	session := r.URL.Query().Get("session")
	if !s.authenticated(r.Context()) {
		s.render(w, "index.html", dashboardData{Locked: true, Session: session})
		return
	}
	info := s.info(true)
	minute, err := time.ParseDuration(info.Minute)
	if err != nil || minute <= 0 {
		minute = time.Minute
	}
	data := dashboardData{Info: info, Now: s.opts.Clock.Now(), Minute: minute, Session: session,
		Sandboxes: s.opts.Manager.List(r.Context(), manager.Filter{SessionID: session})}
	s.render(w, "index.html", data)
}

type logsData struct {
	Locked  bool // as dashboardData's: the script fetches the logs
	ID      string
	Sandbox provider.Sandbox
	Logs    provider.EntrypointLogs
	Err     string
}

func (s *Server) logsPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("idOrName")
	data := logsData{ID: id}
	if !s.authenticated(r.Context()) {
		data.Locked = true
		s.render(w, "logs.html", data)
		return
	}
	sb, err := s.opts.Manager.Get(r.Context(), id)
	if err == nil {
		data.Sandbox = sb
		data.Logs, err = s.opts.Manager.EntrypointLogs(r.Context(), sb.ID)
	}
	if err != nil {
		data.Sandbox.Name = id
		data.Err = provider.Message(err)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", contentSecurity)
		w.WriteHeader(provider.HTTPStatus(provider.Code(err)))
		s.execute(w, "logs.html", data)
		return
	}
	s.render(w, "logs.html", data)
}

func (s *Server) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", contentSecurity)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "same-origin")
	s.execute(w, name, data)
}

func (s *Server) execute(w http.ResponseWriter, name string, data any) {
	if err := templates.ExecuteTemplate(w, name, data); err != nil {
		s.opts.Logger.Error("render dashboard", "page", name, "err", err)
	}
}

// humanDuration is how long ago t was: "250ms", "42s", "3m 12s", "2h 5m",
// "3d 4h". Milliseconds show only under a second, which matters when the
// daemon runs with a shrunk minute. The script formats the same way.
func humanDuration(now, t time.Time) string { return formatDuration(now.Sub(t)) }

func formatDuration(d time.Duration) string { return humanize.Duration(d, " ") }

// originOf is the origin label (harness, web-ui, cli...), which says who
// made the sandbox.
func originOf(s provider.Sandbox) string { return s.Labels["origin"] }

// autoStopWindow is the idle time after which the sandbox stops, or "" when
// it never does.
func autoStopWindow(s provider.Sandbox, minute time.Duration) string {
	if s.AutoStopInterval <= 0 {
		return ""
	}
	return formatDuration(provider.IntervalDuration(s.AutoStopInterval, minute))
}

// idleFraction is how much of its auto-stop window the sandbox has been
// idle, capped at 1.
func idleFraction(s provider.Sandbox, now time.Time, minute time.Duration) float64 {
	if s.AutoStopInterval <= 0 {
		return 0
	}
	f := float64(now.Sub(s.LastActivityAt)) / float64(provider.IntervalDuration(s.AutoStopInterval, minute))
	return min(max(f, 0), 1)
}

// formatLabels lists labels other than origin as k=v, sorted.
func formatLabels(labels map[string]string) string {
	var out []string
	for k, v := range labels {
		if k != "origin" {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
