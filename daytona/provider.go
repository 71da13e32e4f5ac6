package daytona

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sandplane/sandplane/internal/redact"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/google/uuid"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Provider is a provider.Provider backed by the Daytona API. It is safe for
// concurrent use.
type Provider struct {
	cfg         config
	clk         clock.Clock
	http        *http.Client
	api         *apiclient.APIClient
	waitTimeout time.Duration
	retries     int
	previewTTL  time.Duration
	minute      time.Duration
	// creds is what Daytona's answers said about the API key, whose
	// Fingerprint is keyID.
	creds *provider.AuthTracker
	keyID string
}

var _ provider.Provider = (*Provider)(nil)

// URL is the API base the provider talks to.
func (p *Provider) URL() string { return p.cfg.APIURL }

// String names the backend for messages.
func (p *Provider) String() string { return "daytona(" + p.cfg.APIURL + ")" }

// Traits of Daytona; see the package documentation for why each is so.
func (p *Provider) Traits() provider.Traits {
	return provider.Traits{
		Name:                "daytona",
		StopStoppedIsNoop:   false,
		ResizeIsNoop:        false,
		SyncStop:            true,
		ReapIntervalMinutes: 10.0 / 60,
		NoEntrypointLogs:    false,
		NoStopReason:        true,
		TTL:                 true,
		AutoPause:           true,
		Secrets:             true,
		WarmPools:           true,
	}
}

// auth is ctx with the API key the api-client sends as a bearer token.
func (p *Provider) auth(ctx context.Context) context.Context {
	return context.WithValue(ctx, apiclient.ContextAccessToken, p.cfg.APIKey)
}

// bound ends ctx after d on the provider's clock, with errTimedOut as the
// cause, unless the caller's context ends first.
func (p *Provider) bound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := p.clk.AfterFunc(d, func() { cancel(errTimedOut) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// Info checks that the API answers (GET /api/health, which needs no key)
// and reports the client's version of the Daytona API.
func (p *Provider) Info(ctx context.Context) (*provider.Info, error) {
	ctx, cancel := p.bound(ctx, requestTimeout)
	defer cancel()
	resp, err := p.api.HealthAPI.HealthControllerLive(ctx).Execute()
	if err != nil {
		return nil, p.classify(ctx, opInfo, resp, err)
	}
	if isHTML(resp) {
		return nil, p.classify(ctx, opInfo, resp, errors.New("a web page instead of the API"))
	}
	return &provider.Info{
		Name:       "daytona",
		APIVersion: "daytona/" + apiclient.ClientVersion,
		Version:    apiclient.ClientVersion,
		Minute:     p.minute.String(),
		Runtimes:   []provider.Runtime{},
		Snapshots:  []string{},
	}, nil
}

func (p *Provider) Create(ctx context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	switch {
	case req.ID != "":
		return nil, provider.Errorf(provider.InvalidArgument, "Daytona assigns sandbox ids itself: leave Id empty and use Name to pick a name")
	case req.Runtime != "":
		return nil, provider.Errorf(provider.InvalidArgument, "Daytona runs sandboxes on its own runtime: leave Runtime empty (got %q)", req.Runtime)
	case req.AutoStopInterval != nil && *req.AutoStopInterval < 0:
		return nil, provider.Errorf(provider.InvalidArgument, "autoStopInterval must not be negative (0 disables auto-stop)")
	case req.TTLMinutes < 0:
		return nil, provider.Errorf(provider.InvalidArgument, "ttlMinutes must not be negative (0 means no TTL)")
	case req.AutoPauseInterval != nil && *req.AutoPauseInterval < 0:
		return nil, provider.Errorf(provider.InvalidArgument, "autoPauseInterval must not be negative (0 disables auto-pause)")
	}
	body := apiclient.CreateSandbox{}
	if req.Name != "" {
		body.Name = &req.Name
	}
	// "default" is the local name of whatever a backend runs by default.
	if req.Snapshot != "" && req.Snapshot != "default" {
		body.Snapshot = &req.Snapshot
	}
	// Always an env, as SDK 0.218 sends it: {} for none.
	env := req.EnvVars
	if env == nil {
		env = map[string]string{}
	}
	body.Env = &env
	if l := withSession(req.Labels, req.SessionID); len(l) > 0 {
		body.Labels = &l
	}
	daytonaFields(&body, req, p.cfg.Target)
	newerCreateFields(&body, req)
	sb, err := p.create(ctx, req, body)
	if err != nil {
		if provider.Code(err) == provider.CreateFailed && req.Name != "" {
			// Daytona answered 400 and kept the errored sandbox; only its
			// name says which one it is.
			p.rollback(ctx, req.Name)
		}
		return nil, err
	}
	got, err := p.awaitStarted(ctx, opCreate, sb)
	if err != nil {
		if provider.Code(err) == provider.CreateFailed {
			p.rollback(ctx, sb.Id)
		}
		return nil, err
	}
	return toSandbox(got), nil
}

// create posts the create. When the answer is lost after the server may
// have acted (a 5xx, a broken connection), it does not post again blindly:
// a named sandbox is looked up and adopted when it exists, and only
// otherwise created again.
func (p *Provider) create(ctx context.Context, req provider.CreateRequest, body apiclient.CreateSandbox) (*apiclient.Sandbox, error) {
	post := func() (*apiclient.Sandbox, bool, error) {
		rctx, cancel := p.bound(sentOnce(p.auth(ctx)), lifecycleTimeout)
		defer cancel()
		sb, resp, err := p.api.SandboxAPI.CreateSandbox(rctx).CreateSandbox(body).Execute()
		if err == nil {
			return sb, false, nil
		}
		return nil, mayHaveActed(resp, err), p.classify(rctx, opCreate, resp, err)
	}
	sb, unsure, err := post()
	switch {
	case !unsure:
		return sb, err
	case req.Name == "":
		return nil, &provider.Error{Code: provider.Code(err), Err: err, Message: provider.Message(err) +
			"; the create may have reached Daytona, so a sandbox may exist: give creates a name to have them retried safely, or look for it by its labels"}
	}
	if found, gerr := p.get(ctx, req.Name); gerr == nil {
		return p.adopt(found, req, err)
	} else if !provider.IsNotFound(gerr) {
		return nil, err
	}
	sb, _, err = post()
	if provider.Code(err) == provider.AlreadyExists {
		// The first create landed after all.
		found, gerr := p.get(ctx, req.Name)
		if gerr != nil {
			return nil, err
		}
		return p.adopt(found, req, err)
	}
	return sb, err
}

// adopt takes found as the sandbox a lost create made, unless its labels
// say it is somebody else's of the same name.
func (p *Provider) adopt(found *apiclient.Sandbox, req provider.CreateRequest, lost error) (*apiclient.Sandbox, error) {
	for k, v := range req.Labels {
		if found.Labels[k] != v {
			return nil, provider.Errorf(provider.AlreadyExists,
				"sandbox name %s is taken by a sandbox with other labels (the create's answer was lost: %v)", req.Name, lost)
		}
	}
	return found, nil
}

// mayHaveActed reports a failed request that reached the server, or may
// have, without an answer saying what it did.
func mayHaveActed(resp *http.Response, err error) bool {
	if resp != nil {
		return resp.StatusCode >= 500
	}
	var oe *net.OpError
	var dns *net.DNSError
	return !errors.As(err, &dns) && !(errors.As(err, &oe) && oe.Op == "dial")
}

// rollback deletes a sandbox whose create failed, as the contract promises;
// a failure to do so is left for a later Delete.
func (p *Provider) rollback(ctx context.Context, idOrName string) {
	ctx, cancel := p.bound(p.auth(context.WithoutCancel(ctx)), requestTimeout)
	defer cancel()
	_, _, _ = p.api.SandboxAPI.DeleteSandbox(ctx, idOrName).Execute()
}

func (p *Provider) get(ctx context.Context, idOrName string) (*apiclient.Sandbox, error) {
	ctx, cancel := p.bound(p.auth(ctx), requestTimeout)
	defer cancel()
	sb, resp, err := p.api.SandboxAPI.GetSandbox(ctx, idOrName).Execute()
	if err != nil {
		return nil, p.classify(ctx, opGet, resp, err)
	}
	return sb, nil
}

func (p *Provider) Get(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	sb, err := p.get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return toSandbox(sb), nil
}

// List follows Daytona's cursor to the last page. Labels go as Daytona's
// JSON filter, which matches by containment, as the contract asks.
func (p *Provider) List(ctx context.Context, opts provider.ListOptions) ([]provider.Sandbox, error) {
	var filter string
	if want := withSession(opts.Labels, sessionOf(opts.SessionID)); len(want) > 0 {
		b, err := json.Marshal(want)
		if err != nil {
			return nil, provider.Errorf(provider.InvalidArgument, "labels: %v", err)
		}
		filter = string(b)
	}
	out := []provider.Sandbox{}
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			return nil, provider.Errorf(provider.Internal, "list: Daytona's cursor never ended")
		}
		rctx, cancel := p.bound(p.auth(ctx), requestTimeout)
		r := p.api.SandboxAPI.ListSandboxes(rctx).Limit(200).
			Sort(apiclient.SANDBOXLISTSORTFIELD_CREATED_AT).Order(apiclient.SANDBOXLISTSORTDIRECTION_ASC)
		if filter != "" {
			r = r.Labels(filter)
		}
		if cursor != "" {
			r = r.Cursor(cursor)
		}
		res, resp, err := r.Execute()
		if err != nil {
			err = p.classify(rctx, opList, resp, err)
			cancel()
			return nil, err
		}
		cancel()
		for i := range res.Items {
			out = append(out, fromListItem(&res.Items[i]))
		}
		if cursor = res.GetNextCursor(); cursor == "" {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// lifecycle sends a start, stop or delete. Once such a request may have
// reached Daytona it is not sent again blindly, because a repeat meets the
// transition the first one began (409) or its end (400 for a stop): the
// sandbox is read back instead, and when took says the first request took
// effect, that is the answer. nil with no error means the sandbox is gone.
func (p *Provider) lifecycle(ctx context.Context, op op, idOrName string, timeout time.Duration,
	send func(ctx context.Context) (*apiclient.Sandbox, *http.Response, error),
	took func(*apiclient.Sandbox) bool) (*apiclient.Sandbox, error) {
	delay := retryBaseDelay
	for attempt := 0; ; attempt++ {
		rctx, cancel := p.bound(sentOnce(p.auth(ctx)), timeout)
		sb, resp, err := send(rctx)
		unsure := err != nil && mayHaveActed(resp, err)
		err = p.classify(rctx, op, resp, err)
		cancel()
		if !unsure || attempt >= p.retries {
			return sb, err
		}
		found, gerr := p.get(ctx, idOrName)
		switch {
		case provider.IsNotFound(gerr):
			return nil, nil
		case gerr != nil:
			return nil, err
		case took(found):
			return found, nil
		}
		if err := clock.Sleep(ctx, p.clk, delay); err != nil {
			return nil, p.classify(ctx, op, nil, err)
		}
		delay = min(2*delay, retryMaxDelay)
	}
}

func (p *Provider) Start(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	sb, err := p.lifecycle(ctx, opStart, idOrName, lifecycleTimeout,
		func(ctx context.Context) (*apiclient.Sandbox, *http.Response, error) {
			return p.api.SandboxAPI.StartSandbox(ctx, idOrName).Execute()
		},
		func(sb *apiclient.Sandbox) bool {
			st := mapState(sb.GetState())
			return st == provider.StateStarting || st == provider.StateStarted
		})
	switch {
	case err != nil:
		return nil, err
	case sb == nil:
		return nil, provider.Errorf(provider.NotFound, "Sandbox with ID or name %s not found", idOrName)
	}
	got, err := p.awaitStarted(ctx, opStart, sb)
	if err != nil {
		return nil, err
	}
	return toSandbox(got), nil
}

// Stop asks Daytona to stop, which answers stopping, and waits for stopped.
// An ephemeral sandbox (autoDeleteInterval 0) is deleted by a stop; it is
// returned as destroyed.
func (p *Provider) Stop(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	sb, err := p.lifecycle(ctx, opStop, idOrName, requestTimeout,
		func(ctx context.Context) (*apiclient.Sandbox, *http.Response, error) {
			return p.api.SandboxAPI.StopSandbox(ctx, idOrName).Execute()
		},
		func(sb *apiclient.Sandbox) bool {
			st := mapState(sb.GetState())
			return st == provider.StateStopping || st == provider.StateStopped || st == provider.StateDestroyed
		})
	switch {
	case err != nil:
		return nil, err
	case sb == nil:
		// An ephemeral sandbox, deleted by the stop whose answer was lost.
		return &provider.Sandbox{ID: idOrName, Name: idOrName, State: provider.StateDestroyed, Labels: map[string]string{}}, nil
	}
	last := sb
	got, err := p.await(ctx, opStop, sb, func(sb *apiclient.Sandbox) (bool, error) {
		if sb == nil {
			return true, nil
		}
		last = sb
		return mapState(sb.GetState()) == provider.StateStopped, nil
	})
	if err != nil {
		return nil, err
	}
	if got == nil {
		gone := toSandbox(last)
		gone.State = provider.StateDestroyed
		return gone, nil
	}
	return toSandbox(got), nil
}

// Delete asks Daytona to delete and waits until the sandbox is gone, so
// that its name is free and List no longer shows it.
func (p *Provider) Delete(ctx context.Context, idOrName string) error {
	sb, err := p.lifecycle(ctx, opDelete, idOrName, requestTimeout,
		func(ctx context.Context) (*apiclient.Sandbox, *http.Response, error) {
			return p.api.SandboxAPI.DeleteSandbox(ctx, idOrName).Execute()
		},
		func(sb *apiclient.Sandbox) bool { return mapState(sb.GetState()) == provider.StateDestroyed })
	switch {
	case provider.IsNotFound(err), err == nil && sb == nil:
		return nil
	case err != nil:
		return err
	}
	_, err = p.await(ctx, opDelete, sb, func(sb *apiclient.Sandbox) (bool, error) { return sb == nil, nil })
	return err
}

// RefreshActivity resets the idle clock. Daytona accepts a name here but
// records nothing for it, so a name is resolved to the id first.
func (p *Provider) RefreshActivity(ctx context.Context, idOrName string) error {
	id := idOrName
	if _, err := uuid.Parse(idOrName); err != nil {
		sb, err := p.get(ctx, idOrName)
		if err != nil {
			return err
		}
		id = sb.Id
	}
	ctx, cancel := p.bound(p.auth(ctx), requestTimeout)
	defer cancel()
	resp, err := p.api.SandboxAPI.UpdateLastActivity(ctx, id).Execute()
	return p.classify(ctx, opRefresh, resp, err)
}

func (p *Provider) SetAutoStopInterval(ctx context.Context, idOrName string, minutes int) (*provider.Sandbox, error) {
	if minutes < 0 {
		return nil, provider.Errorf(provider.InvalidArgument, "the auto-stop interval must not be negative (0 disables auto-stop)")
	}
	ctx, cancel := p.bound(p.auth(ctx), requestTimeout)
	defer cancel()
	sb, resp, err := p.api.SandboxAPI.SetAutostopInterval(ctx, idOrName, float32(minutes)).Execute()
	if err != nil {
		return nil, p.classify(ctx, opAutoStop, resp, err)
	}
	return toSandbox(sb), nil
}

func (p *Provider) Resize(ctx context.Context, idOrName string, req provider.ResizeRequest) (*provider.Sandbox, error) {
	if req.CPU < 0 || req.Memory < 0 || req.Disk < 0 {
		return nil, provider.Errorf(provider.InvalidArgument, "resources must not be negative")
	}
	body := apiclient.ResizeSandbox{}
	set := func(v int) *int32 {
		if v == 0 {
			return nil
		}
		n := int32(v)
		return &n
	}
	body.Cpu, body.Memory, body.Disk = set(req.CPU), set(req.Memory), set(req.Disk)
	ctx, cancel := p.bound(p.auth(ctx), lifecycleTimeout)
	defer cancel()
	sb, resp, err := p.api.SandboxAPI.ResizeSandbox(ctx, idOrName).ResizeSandbox(body).Execute()
	if err != nil {
		return nil, p.classify(ctx, opResize, resp, err)
	}
	return toSandbox(sb), nil
}

// PreviewURL returns a signed preview URL for port: its token is part of
// the URL, so it works without Daytona's preview-token header, until the
// preview TTL runs out. Preview.Token is therefore empty: the signed
// answer's own token is the one already in the URL, and Daytona does not
// take it for the sandbox's preview token.
func (p *Provider) PreviewURL(ctx context.Context, idOrName string, port int) (*provider.Preview, error) {
	if port < 1 || port > 65535 {
		return nil, provider.Errorf(provider.InvalidArgument,
			"port %d: a Daytona sandbox has no port of its own; name the port (1-65535) your server listens on", port)
	}
	sb, err := p.get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	if st := mapState(sb.GetState()); st != provider.StateStarted {
		return nil, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s: start it first", sb.Id, st)
	}
	ctx, cancel := p.bound(p.auth(ctx), requestTimeout)
	defer cancel()
	res, resp, err := p.api.SandboxAPI.GetSignedPortPreviewUrl(ctx, sb.Id, int32(port)).
		ExpiresInSeconds(int32(p.previewTTL / time.Second)).Execute()
	if err != nil {
		return nil, p.classify(ctx, opPreview, resp, err)
	}
	return &provider.Preview{URL: res.Url}, nil
}

// EntrypointLogs reads the entrypoint session's logs from the sandbox's
// toolbox (GET /process/session/entrypoint/logs): what the snapshot's
// entrypoint, or its image's ENTRYPOINT and CMD, printed. Every value of
// the env Daytona returns for the sandbox is redacted, as the local control
// plane redacts its sandboxes' env. not_found; failed_precondition
// (neither started nor paused); unsupported: the sandbox's toolbox has no
// entrypoint session (a toolbox older than Daytona's entrypoint logs).
func (p *Provider) EntrypointLogs(ctx context.Context, idOrName string) (*provider.EntrypointLogs, error) {
	sb, err := p.get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	if st := mapState(sb.GetState()); st != provider.StateStarted && st != provider.StatePaused {
		return nil, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s: start it first", sb.Id, st)
	}
	rctx, cancel := p.bound(ctx, requestTimeout)
	defer cancel()
	var logs provider.EntrypointLogs
	resp, err := p.rawAt(rctx, http.MethodGet, toolboxBase(sb)+"/process/session/entrypoint/logs", nil, &logs)
	if err != nil {
		return nil, p.classify(rctx, opLogs, resp, err)
	}
	redact := redact.Env(sb.Env)
	logs.Stdout, logs.Stderr = redact(logs.Stdout), redact(logs.Stderr)
	logs.Output = logs.Stdout + logs.Stderr
	return &logs, nil
}

var _ provider.Toolboxer = (*Provider)(nil)

// Toolbox returns the base URL of the sandbox's toolbox, Daytona's
// {toolboxProxyUrl}/{id}, and the header that authenticates to it: the API
// key, which Daytona's proxy accepts. A paused sandbox's toolbox is given
// too: Daytona's proxy resumes it for the first request. not_found,
// failed_precondition (neither started nor paused: Daytona's proxy would
// answer 400).
func (p *Provider) Toolbox(ctx context.Context, idOrName string) (string, http.Header, error) {
	sb, err := p.get(ctx, idOrName)
	if err != nil {
		return "", nil, err
	}
	if st := mapState(sb.GetState()); st != provider.StateStarted && st != provider.StatePaused {
		return "", nil, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s: start it first", sb.Id, st)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+p.cfg.APIKey)
	return toolboxBase(sb), h, nil
}

// toolboxBase is the base URL of sb's toolbox behind Daytona's proxy.
func toolboxBase(sb *apiclient.Sandbox) string {
	return strings.TrimRight(sb.ToolboxProxyUrl, "/") + "/" + sb.Id
}

// daytonaFields copies the fields the create body shares with Daytona's
// (its intervals, resources, visibility and region) to body; the request's
// target wins over the provider's.
func daytonaFields(body *apiclient.CreateSandbox, req provider.CreateRequest, target string) {
	if t := cmp.Or(req.Target, target); t != "" {
		body.Target = &t
	}
	if req.Public {
		body.Public = &req.Public
	}
	body.AutoStopInterval = int32Ptr(req.AutoStopInterval)
	body.AutoDeleteInterval = int32Ptr(req.AutoDeleteInterval)
	body.AutoArchiveInterval = int32Ptr(req.AutoArchiveInterval)
	for _, r := range []struct {
		dst **int32
		v   int
	}{{&body.Cpu, req.CPU}, {&body.Memory, req.Memory}, {&body.Disk, req.Disk}, {&body.Gpu, req.GPU}} {
		if r.v != 0 {
			*r.dst = int32Ptr(&r.v)
		}
	}
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(*v)
	return &n
}

// withSession is labels with the session in LabelSession, a new map when
// there is a session to add.
func withSession(labels map[string]string, session *string) map[string]string {
	if session == nil {
		return labels
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[provider.LabelSession] = *session
	return out
}

func sessionOf(id string) *string {
	if id == "" {
		return nil
	}
	return &id
}
