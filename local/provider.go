package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sandplane/sandplane/local/internal/client"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/wire"
)

// APIVersion is the contract version this client speaks.
const APIVersion = "v1"

// Where clients find the daemon. The daemon's own settings (local/config)
// use the same names.
const (
	// EnvURL is the daemon's base URL.
	EnvURL = "AGENT_CONTROL_PLANE_URL"
	// EnvToken is the bearer token a daemon started with one requires.
	EnvToken = "SANDPLANE_TOKEN"
	// DefaultURL is the daemon's default address, its loopback listener.
	DefaultURL = "http://127.0.0.1:4025"
)

const (
	// DefaultTimeout bounds reads and small writes.
	DefaultTimeout = 5 * time.Second
	// LifecycleTimeout bounds create, start, stop and delete, which wait for
	// a workload (the daemon holds a create up to 30 s, like Daytona).
	LifecycleTimeout = 90 * time.Second
)

// Provider is a provider.Provider backed by a sandplane daemon.
type Provider struct {
	base   string
	token  string
	client *client.ClientWithResponses
	// stream has no overall timeout: an event stream lasts as long as its
	// context.
	stream *http.Client
	clk    clock.Clock
	log    *slog.Logger
	// auth is what the daemon's answers said about the token, whose
	// Fingerprint is tokenID.
	auth    *provider.AuthTracker
	tokenID string

	versionOnce sync.Once
}

var _ provider.Provider = (*Provider)(nil)

// Option configures a Provider.
type Option func(*Provider)

// WithToken sends a bearer token, for a daemon started with SANDPLANE_TOKEN.
func WithToken(token string) Option { return func(p *Provider) { p.token = token } }

// WithClock sets the clock Watch's reconnect backoff runs on.
func WithClock(c clock.Clock) Option { return func(p *Provider) { p.clk = c } }

// WithHTTPClient sends every request through c, for a transport that
// records, proxies or adds TLS. c should have no overall Timeout: event
// streams last as long as their context, and the other calls set their own
// deadlines.
func WithHTTPClient(c *http.Client) Option { return func(p *Provider) { p.stream = c } }

// WithLogger receives warnings such as an API version mismatch.
func WithLogger(l *slog.Logger) Option { return func(p *Provider) { p.log = l } }

// New returns a client of the daemon at baseURL; "" means
// AGENT_CONTROL_PLANE_URL, else http://127.0.0.1:4025. It does no I/O.
func New(baseURL string, opts ...Option) (*Provider, error) {
	if baseURL == "" {
		baseURL = os.Getenv(EnvURL)
	}
	if baseURL == "" {
		baseURL = DefaultURL
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, provider.Errorf(provider.InvalidArgument, "daemon URL %q is not an http(s) URL like %s", baseURL, DefaultURL)
	}
	p := &Provider{base: strings.TrimSuffix(u.String(), "/"), log: slog.Default(), clk: clock.Real(), stream: &http.Client{}}
	for _, o := range opts {
		o(p)
	}
	if p.token == "" {
		p.token = os.Getenv(EnvToken)
	}
	p.auth, p.tokenID = provider.NewAuthTracker(p.clk), provider.Fingerprint(p.token)
	p.auth.Settings(p.tokenID, true, p.settingsWhy())
	p.client, err = client.NewClientWithResponses(p.base+"/v1",
		client.WithHTTPClient(p.stream),
		client.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
			if p.token != "" {
				req.Header.Set("Authorization", "Bearer "+p.token)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return p, nil
}

// URL is the daemon's base URL.
func (p *Provider) URL() string { return p.base }

// Traits of the local control plane. It has none of Daytona's optional
// capabilities (TTL, AutoPause, Secrets, WarmPools): its sandboxes are a
// developer's own, which auto-stop and auto-delete already bound, and a
// create that asks for one answers unsupported.
func (p *Provider) Traits() provider.Traits {
	return provider.Traits{Name: "local", StopStoppedIsNoop: true, ResizeIsNoop: true, SyncStop: true, ReapIntervalMinutes: 1}
}

func (p *Provider) Info(ctx context.Context) (*provider.Info, error) {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := p.client.GetInfoWithResponse(ctx)
	if err != nil {
		return nil, p.classify(err)
	}
	// GET /v1/info answers without the token, so its status says nothing
	// of the token; its auth (from daemons that send one) and a refusal do.
	if err := p.answer(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		if provider.EvidenceOf(err) == provider.EvidenceRefused {
			p.observe(err)
		}
		return nil, err
	}
	if said, err := infoAuthErr(resp.JSON200.Auth); said {
		p.observe(err)
	}
	return resp.JSON200, nil
}

// infoAuthErr is the evidence GET /v1/info's auth gives about the token the
// call carried: nil for accepted, unauthenticated with the daemon's why
// for refused; said is false when the daemon said nothing (one from
// before info carried auth).
func infoAuthErr(auth provider.Auth) (said bool, err error) {
	switch auth.State {
	case provider.AuthAuthenticated:
		return true, nil
	case provider.AuthRequired:
		return true, provider.Errorf(provider.Unauthenticated, "%s", auth.Why)
	}
	return false, nil
}

// checkVersion warns once when the daemon speaks another contract version.
func (p *Provider) checkVersion(ctx context.Context) {
	p.versionOnce.Do(func() {
		info, err := p.Info(ctx)
		if err == nil && info.APIVersion != APIVersion {
			p.log.Warn("sandplane daemon speaks another API version; upgrade the older side",
				"daemon", info.APIVersion, "client", APIVersion, "daemonVersion", info.Version)
		}
	})
}

func (p *Provider) Create(ctx context.Context, req provider.CreateRequest) (*provider.Sandbox, error) {
	p.checkVersion(ctx)
	ctx, cancel := p.withTimeout(ctx, LifecycleTimeout)
	defer cancel()
	resp, err := p.client.CreateSandboxWithResponse(ctx, req)
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON201 != nil); err != nil {
		return nil, err
	}
	return resp.JSON201, nil
}

func (p *Provider) Get(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := p.client.GetSandboxWithResponse(ctx, idOrName)
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200, nil
}

func (p *Provider) List(ctx context.Context, opts provider.ListOptions) ([]provider.Sandbox, error) {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	params := &client.ListSandboxesParams{}
	if opts.SessionID != "" {
		params.SessionID = &opts.SessionID
	}
	resp, err := p.client.ListSandboxesWithResponse(ctx, params, func(ctx context.Context, req *http.Request) error {
		q := req.URL.Query()
		for k, v := range opts.Labels {
			q.Set("label."+k, v)
		}
		req.URL.RawQuery = q.Encode()
		return nil
	})
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200.Items, nil
}

func (p *Provider) Start(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	ctx, cancel := p.withTimeout(ctx, LifecycleTimeout)
	defer cancel()
	resp, err := p.client.StartSandboxWithResponse(ctx, idOrName)
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200, nil
}

func (p *Provider) Stop(ctx context.Context, idOrName string) (*provider.Sandbox, error) {
	return p.StopWithReason(ctx, idOrName, "")
}

var _ provider.ReasonStopper = (*Provider)(nil)

// StopWithReason stops the sandbox and records reason as its errorReason;
// "" is a plain Stop. See provider.ReasonStopper.
func (p *Provider) StopWithReason(ctx context.Context, idOrName, reason string) (*provider.Sandbox, error) {
	ctx, cancel := p.withTimeout(ctx, LifecycleTimeout)
	defer cancel()
	resp, err := p.client.StopSandboxWithResponse(ctx, idOrName, wire.StopRequest{Reason: reason})
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200, nil
}

func (p *Provider) Delete(ctx context.Context, idOrName string) error {
	ctx, cancel := p.withTimeout(ctx, LifecycleTimeout)
	defer cancel()
	resp, err := p.client.DeleteSandboxWithResponse(ctx, idOrName)
	if err != nil {
		return p.classify(err)
	}
	return p.check(resp.StatusCode(), resp.Body, resp.StatusCode() == http.StatusNoContent)
}

func (p *Provider) RefreshActivity(ctx context.Context, idOrName string) error {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := p.client.RefreshActivityWithResponse(ctx, idOrName)
	if err != nil {
		return p.classify(err)
	}
	return p.check(resp.StatusCode(), resp.Body, resp.StatusCode() == http.StatusNoContent)
}

func (p *Provider) SetAutoStopInterval(ctx context.Context, idOrName string, minutes int) (*provider.Sandbox, error) {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := p.client.SetAutoStopIntervalWithResponse(ctx, idOrName, wire.AutoStopRequest{Interval: minutes})
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200, nil
}

func (p *Provider) Resize(ctx context.Context, idOrName string, req provider.ResizeRequest) (*provider.Sandbox, error) {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := p.client.ResizeSandboxWithResponse(ctx, idOrName, req)
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200, nil
}

// PreviewURL returns the URL of port on the host and the sandbox's token,
// which the default workload (the toolbox) requires on every request.
func (p *Provider) PreviewURL(ctx context.Context, idOrName string, port int) (*provider.Preview, error) {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	// Port 0 is the sandbox's own: the daemon's default when none is sent.
	var params *client.GetPreviewURLParams
	if port != 0 {
		params = &client.GetPreviewURLParams{Port: port}
	}
	resp, err := p.client.GetPreviewURLWithResponse(ctx, idOrName, params)
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200, nil
}

func (p *Provider) EntrypointLogs(ctx context.Context, idOrName string) (*provider.EntrypointLogs, error) {
	ctx, cancel := p.withTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := p.client.GetEntrypointLogsWithResponse(ctx, idOrName)
	if err != nil {
		return nil, p.classify(err)
	}
	if err := p.check(resp.StatusCode(), resp.Body, resp.JSON200 != nil); err != nil {
		return nil, err
	}
	return resp.JSON200, nil
}

// withTimeout applies d, on the provider's clock, unless ctx already has a
// deadline.
func (p *Provider) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return clock.WithTimeout(ctx, p.clk, d)
}

// check turns an error response into a coded error; classify does the same
// for transport failures.
// check is answer for a call that needs the token, whose outcome is
// evidence about it.
func (p *Provider) check(status int, body []byte, ok bool) error {
	return p.observe(p.answer(status, body, ok))
}

// answer is the error of a response, nil when it is the one wanted.
func (p *Provider) answer(status int, body []byte, ok bool) error {
	if ok {
		return nil
	}
	var e wire.ErrorResponse
	if json.Unmarshal(body, &e) == nil && provider.Valid(e.Error.Code) {
		return &provider.Error{Code: e.Error.Code, Message: e.Error.Message}
	}
	return provider.Errorf(provider.CodeForHTTPStatus(status), "unexpected answer from %s: HTTP %d: %.200s", p.base, status, body)
}

// classify maps a failure to reach the daemon; it is evidence too (a
// transient one, which changes nothing settled).
func (p *Provider) classify(err error) error { return p.observe(p.transportError(err)) }

// observe feeds a call's outcome to the auth evidence and returns it.
func (p *Provider) observe(err error) error {
	p.auth.Result(p.tokenID, err, "the daemon at "+p.base+" answered")
	return err
}

// settingsWhy says what the local settings are, for the auth evidence.
func (p *Provider) settingsWhy() string {
	if p.token == "" {
		return "the daemon address is " + p.base + ", without a token"
	}
	return "the daemon address is " + p.base + ", with a token (" + EnvToken + ")"
}

func (p *Provider) transportError(err error) error {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, context.Canceled):
		return provider.Errorf(provider.Canceled, "request to the sandplane daemon was cancelled: %w", err)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return provider.Errorf(provider.DeadlineExceeded, "the sandplane daemon at %s did not answer in time: %w", p.base, err)
	case errors.As(err, &oe) && oe.Op == "dial":
		return provider.Errorf(provider.Unavailable, "no sandplane daemon answers at %s: start one with `sandplane serve` (or `make run`), or point the client at the one that runs (%s, or the CLI's --provider local://HOST:PORT)", p.base, EnvURL)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return provider.Errorf(provider.Unavailable, "talking to the sandplane daemon at %s: %w", p.base, err)
	}
	return provider.Errorf(provider.Internal, "%w", err)
}

// String names the daemon for messages.
func (p *Provider) String() string { return fmt.Sprintf("local(%s)", p.base) }

func init() {
	provider.Register("local", func(ctx context.Context, u *url.URL) (provider.Provider, error) {
		base := ""
		if u.Host != "" {
			base = "http://" + u.Host
		}
		return New(base)
	})
}
