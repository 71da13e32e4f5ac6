package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/local/daemon/internal/api"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/wire"
)

// apiVersion is the major version of the contract this daemon serves.
const apiVersion = "v1"

// strictAPI implements the generated strict server on the manager.
type strictAPI struct{ s *Server }

var _ api.StrictServerInterface = strictAPI{}

type requestKey struct{}

// withRequest hands the raw request to strict handlers that need more than
// the contract can describe (label.KEY query filters).
func withRequest(f api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		return f(context.WithValue(ctx, requestKey{}, r), w, r, req)
	}
}

func (a strictAPI) GetInfo(ctx context.Context, _ api.GetInfoRequestObject) (api.GetInfoResponseObject, error) {
	info := a.s.info(a.s.authenticated(ctx))
	info.Auth = a.s.callerAuth(ctx)
	return api.GetInfo200JSONResponse(info), nil
}

// info describes the daemon. Without the token it says only what a probe
// needs: the pid would let any local process aim at the daemon's /proc
// entries, and the root path says where every sandbox's files are.
func (s *Server) info(full bool) provider.Info {
	info := provider.Info{Name: "sandplane", Version: s.opts.Version, APIVersion: apiVersion}
	if !full {
		return info
	}
	info.Containment = wire.InfoContainment(s.opts.Containment)
	info.Isolation = wire.InfoIsolation(s.opts.Isolation)
	if s.opts.IsolationFallback != nil {
		info.IsolationFallback = provider.Message(s.opts.IsolationFallback)
	}
	info.Activity = wire.ActivityDaytona
	if s.opts.PreviewNotActivity {
		info.Activity = wire.ActivityClientPush
	}
	info.PID = os.Getpid()
	info.RootDir = s.opts.Manager.Root()
	info.Runtimes = s.opts.Manager.Runtimes()
	info.Snapshots = s.opts.Manager.Snapshots()
	info.Minute = s.opts.Manager.Minute().String()
	info.Warnings = s.opts.Manager.Warnings()
	return info
}

func (a strictAPI) ListSandboxes(ctx context.Context, _ api.ListSandboxesRequestObject) (api.ListSandboxesResponseObject, error) {
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	filter, err := queryFilter(r)
	if err != nil {
		return nil, err
	}
	return listResponse(a.s.opts.Manager.ListJSON(ctx, filter)), nil
}

// listResponse is the list as the manager keeps it encoded: answering it
// copies bytes, however many sandboxes there are. The body is the one the
// generated response would encode: {"items":[...]} and a newline.
type listResponse []byte

func (items listResponse) VisitListSandboxesResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	body := make([]byte, 0, len(items)+len(`{"items":}`)+1)
	body = append(body, `{"items":`...)
	body = append(body, items...)
	body = append(body, "}\n"...)
	_, err := w.Write(body)
	return err
}

// queryFilter reads the label.KEY=VALUE and sessionId query parameters.
// Other parameters are refused so that a typo such as labels.k=v does not
// silently match all.
func queryFilter(r *http.Request) (manager.Filter, error) {
	f := manager.Filter{Labels: map[string]string{}}
	if r == nil {
		return f, nil
	}
	for key, values := range r.URL.Query() {
		if len(values) != 1 {
			return manager.Filter{}, provider.Errorf(provider.InvalidArgument, "query parameter %q is given %d times: give each once", key, len(values))
		}
		if key == "sessionId" {
			if values[0] == "" {
				return manager.Filter{}, provider.Errorf(provider.InvalidArgument, "sessionId is empty: name the session, or leave the parameter out to list every sandbox")
			}
			f.SessionID = values[0]
			continue
		}
		k, ok := strings.CutPrefix(key, "label.")
		if !ok || k == "" {
			return manager.Filter{}, provider.Errorf(provider.InvalidArgument, "unknown query parameter %q: filter with label.KEY=VALUE or sessionId=ID", key)
		}
		f.Labels[k] = values[0]
	}
	return f, nil
}

func (a strictAPI) CreateSandbox(ctx context.Context, req api.CreateSandboxRequestObject) (api.CreateSandboxResponseObject, error) {
	var body wire.CreateSandboxRequest // no body: every default
	if req.Body != nil {
		body = *req.Body
	}
	s, err := a.s.opts.Manager.Create(ctx, body)
	if err != nil {
		return nil, err
	}
	return createdResponse{s, manager.IgnoredFields(body, s.Runtime)}, nil
}

// createdResponse is the 201 of a create, with a Warning header naming
// the fields the daemon accepted and ignored when there were any (the
// generated response would send the header empty).
type createdResponse struct {
	sandbox provider.Sandbox
	ignored []string
}

func (c createdResponse) VisitCreateSandboxResponse(w http.ResponseWriter) error {
	if len(c.ignored) > 0 {
		w.Header().Set("Warning", ignoredWarning(c.ignored))
	}
	return writeBody(w, http.StatusCreated, c.sandbox)
}

// writeBody answers v as JSON with status, for the responses whose
// optional headers the generated ones would send empty.
func writeBody(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(body, '\n'))
	return err
}

// ignoredWarning is an RFC 9111 Warning value (299, a persistent
// warning) naming fields: 299 sandplane "accepted and ignored: cpu, gpu".
func ignoredWarning(fields []string) string {
	return warningValue("accepted and ignored: " + strings.Join(fields, ", "))
}

func (a strictAPI) GetSandbox(ctx context.Context, req api.GetSandboxRequestObject) (api.GetSandboxResponseObject, error) {
	s, err := a.s.opts.Manager.Get(ctx, req.IDOrName)
	if err != nil {
		return nil, err
	}
	return api.GetSandbox200JSONResponse(s), nil
}

func (a strictAPI) DeleteSandbox(ctx context.Context, req api.DeleteSandboxRequestObject) (api.DeleteSandboxResponseObject, error) {
	if err := a.s.opts.Manager.Delete(ctx, req.IDOrName); err != nil {
		return nil, err
	}
	return api.DeleteSandbox204Response{}, nil
}

func (a strictAPI) StopSandbox(ctx context.Context, req api.StopSandboxRequestObject) (api.StopSandboxResponseObject, error) {
	reason := ""
	if req.Body != nil {
		reason = req.Body.Reason
	}
	s, err := a.s.opts.Manager.StopWithReason(ctx, req.IDOrName, reason)
	if err != nil {
		return nil, err
	}
	return api.StopSandbox200JSONResponse(s), nil
}

func (a strictAPI) StartSandbox(ctx context.Context, req api.StartSandboxRequestObject) (api.StartSandboxResponseObject, error) {
	s, err := a.s.opts.Manager.Start(ctx, req.IDOrName)
	if err != nil {
		return nil, err
	}
	return api.StartSandbox200JSONResponse(s), nil
}

func (a strictAPI) RefreshActivity(ctx context.Context, req api.RefreshActivityRequestObject) (api.RefreshActivityResponseObject, error) {
	if err := a.s.opts.Manager.RefreshActivity(ctx, req.IDOrName); err != nil {
		return nil, err
	}
	return api.RefreshActivity204Response{}, nil
}

func (a strictAPI) SetAutoStopInterval(ctx context.Context, req api.SetAutoStopIntervalRequestObject) (api.SetAutoStopIntervalResponseObject, error) {
	if req.Body == nil {
		return nil, provider.Errorf(provider.InvalidArgument, `a JSON body {"interval": minutes} is required`)
	}
	s, err := a.s.opts.Manager.SetAutoStopInterval(ctx, req.IDOrName, req.Body.Interval)
	if err != nil {
		return nil, err
	}
	return api.SetAutoStopInterval200JSONResponse(s), nil
}

func (a strictAPI) ResizeSandbox(ctx context.Context, req api.ResizeSandboxRequestObject) (api.ResizeSandboxResponseObject, error) {
	var body provider.ResizeRequest
	if req.Body != nil {
		body = *req.Body
	}
	s, err := a.s.opts.Manager.Resize(ctx, req.IDOrName, body)
	if err != nil {
		return nil, err
	}
	return api.ResizeSandbox200JSONResponse(s), nil
}

func (a strictAPI) GetPreviewURL(ctx context.Context, req api.GetPreviewURLRequestObject) (api.GetPreviewURLResponseObject, error) {
	p, err := a.s.opts.Manager.PreviewURL(ctx, req.IDOrName, req.Params.Port)
	if err != nil {
		return nil, err
	}
	warning, err := a.s.opts.Manager.PreviewWarning(ctx, req.IDOrName)
	if err != nil {
		return nil, err
	}
	return previewResponse{p, warning}, nil
}

// previewResponse carries the sandbox's token, which no cache may keep,
// and, in a Warning header when there is one, what the preview must warn
// of (manager.PreviewWarning): that the sandbox can read other previews'
// cookies.
type previewResponse struct {
	preview provider.Preview
	warning string
}

func (p previewResponse) VisitGetPreviewURLResponse(w http.ResponseWriter) error {
	w.Header().Set("Cache-Control", "no-store")
	if p.warning != "" {
		w.Header().Set("Warning", warningValue(p.warning))
	}
	return writeBody(w, http.StatusOK, p.preview)
}

// warningValue is an RFC 9111 Warning value (299, a persistent warning)
// of text, a quoted string: 299 sandplane "text".
func warningValue(text string) string {
	return `299 sandplane ` + strconv.Quote(text)
}

func (a strictAPI) GetEntrypointLogs(ctx context.Context, req api.GetEntrypointLogsRequestObject) (api.GetEntrypointLogsResponseObject, error) {
	logs, err := a.s.opts.Manager.EntrypointLogs(ctx, req.IDOrName)
	if err != nil {
		return nil, err
	}
	return api.GetEntrypointLogs200JSONResponse(logs), nil
}
