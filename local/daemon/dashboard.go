package daemon

import (
	"html/template"
	"net/http"
	"time"

	"github.com/sandplane/sandplane/provider"
)

var dashboardTmpl = template.Must(template.New("dashboard").Funcs(template.FuncMap{
	"ago": func(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sandplane</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:2rem;color:#1d1d1f}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid #e5e5e5}
.dot{display:inline-block;width:.6rem;height:.6rem;border-radius:50%;margin-right:.4rem}
.started{background:#2da44e}.starting,.stopping{background:#d4a72c}.stopped{background:#8c959f}.error{background:#cf222e}
.auto{color:#9a6700;font-weight:600}code{background:#f6f8fa;padding:.1rem .3rem}
</style></head><body>
<h1>sandplane</h1>
<p>Daemon {{.Info.Version}} &middot; pid {{.Info.Pid}} &middot; root <code>{{.Info.RootDir}}</code> &middot; one interval minute = {{.Minute}}</p>
<table><thead><tr><th>State</th><th>Name</th><th>Runtime</th><th>Port</th><th>Age</th><th>Idle / auto-stop</th><th>Reason</th><th>Links</th></tr></thead><tbody>
{{range .Sandboxes}}<tr>
<td><span class="dot {{.State}}"></span>{{.State}}</td><td>{{.Name}}</td><td>{{.Runtime}}</td><td>{{if .Port}}{{.Port}}{{end}}</td>
<td>{{ago $.Now .CreatedAt}}</td><td>{{ago $.Now .LastActivityAt}} / {{if .AutoStopInterval}}{{.AutoStopInterval}}m{{else}}never{{end}}</td>
<td{{if eq .ErrorReason "auto_stopped"}} class="auto"{{end}}>{{.ErrorReason}}</td>
<td><a href="/v1/sandboxes/{{.Id}}/entrypoint-logs">logs</a>{{if .PreviewUrl}} &middot; <a href="{{.PreviewUrl}}">preview</a>{{end}}</td>
</tr>{{else}}<tr><td colspan="8">No sandboxes yet. Create one: <code>curl -X POST -d '{}' http://127.0.0.1:4025/v1/sandboxes</code></td></tr>{{end}}
</tbody></table></body></html>
`))

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	info := s.info()
	data := struct {
		Info      any
		Minute    string
		Now       time.Time
		Sandboxes []provider.Sandbox
	}{info, info.Minute, s.opts.Clock.Now(), s.opts.Manager.List(r.Context(), nil)}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := dashboardTmpl.Execute(w, data); err != nil {
		s.opts.Logger.Error("render dashboard", "err", err)
	}
}
