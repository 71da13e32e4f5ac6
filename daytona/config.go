package daytona

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// The environment the official SDKs read.
const (
	EnvAPIKey = "DAYTONA_API_KEY"
	EnvAPIURL = "DAYTONA_API_URL"
	EnvTarget = "DAYTONA_TARGET"
	// envServerURL is the deprecated name of DAYTONA_API_URL that the SDKs
	// still honour.
	envServerURL = "DAYTONA_SERVER_URL"
)

// DefaultAPIURL is Daytona's cloud API, the SDKs' default.
const DefaultAPIURL = "https://app.daytona.io/api"

// keysURL is where a Daytona API key is made, for error messages.
const keysURL = "https://app.daytona.io/dashboard/keys"

// Defaults of the options.
const (
	DefaultWaitTimeout = 60 * time.Second
	DefaultRetries     = 4
	DefaultPreviewTTL  = time.Hour
	// requestTimeout bounds one request; create and start wait on the
	// server for up to 30 s, so theirs is longer.
	requestTimeout   = 30 * time.Second
	lifecycleTimeout = 90 * time.Second
)

// config is what the provider needs to reach Daytona: the options
// WithAPIKey, WithAPIURL, WithTarget, WithClock and WithHTTPClient set, or
// FromEnv.
type config struct {
	APIKey     string
	APIURL     string
	Target     string
	Clock      clock.Clock
	HTTPClient *http.Client
}

// Option tunes a Provider.
type Option func(*Provider)

// WithAPIKey sends key as a bearer token. Required (FromEnv reads it from
// DAYTONA_API_KEY).
func WithAPIKey(key string) Option { return func(p *Provider) { p.cfg.APIKey = key } }

// WithAPIURL sets the API base, ending in /api. Default DefaultAPIURL.
func WithAPIURL(u string) Option { return func(p *Provider) { p.cfg.APIURL = u } }

// WithTarget sends new sandboxes to the region target. Default: the
// organization's default.
func WithTarget(target string) Option { return func(p *Provider) { p.cfg.Target = target } }

// WithClock paces waits, polls and retries on c. Default clock.Real().
func WithClock(c clock.Clock) Option { return func(p *Provider) { p.cfg.Clock = c } }

// WithHTTPClient carries every request on c; its Transport is wrapped,
// never changed. Default: a client on http.DefaultTransport.
func WithHTTPClient(c *http.Client) Option { return func(p *Provider) { p.cfg.HTTPClient = c } }

// FromEnv reads DAYTONA_API_KEY, DAYTONA_API_URL (or the deprecated
// DAYTONA_SERVER_URL) and DAYTONA_TARGET, as the official SDKs do. A
// variable that is not set leaves what the options before it set, so
// options after FromEnv override the environment and options before it
// are its defaults.
func FromEnv() Option {
	return func(p *Provider) {
		apiURL := os.Getenv(EnvAPIURL)
		if apiURL == "" {
			apiURL = os.Getenv(envServerURL)
		}
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&p.cfg.APIKey, os.Getenv(EnvAPIKey))
		set(&p.cfg.APIURL, apiURL)
		set(&p.cfg.Target, os.Getenv(EnvTarget))
	}
}

// WithWaitTimeout bounds how long Create, Start, Stop and Delete wait for
// the sandbox to settle. Default DefaultWaitTimeout.
func WithWaitTimeout(d time.Duration) Option { return func(p *Provider) { p.waitTimeout = d } }

// WithRetries sets how many times a transient failure is retried. Default
// DefaultRetries; 0 disables retries.
func WithRetries(n int) Option { return func(p *Provider) { p.retries = n } }

// WithPreviewTTL sets how long PreviewURL's signed URLs live, at most 24
// hours (Daytona's limit). Default DefaultPreviewTTL.
func WithPreviewTTL(d time.Duration) Option { return func(p *Provider) { p.previewTTL = d } }

// WithMinute tells the provider the length of the backend's interval minute,
// for a simulator run with a shrunk minute. Info reports it. Default one
// minute, Daytona's own.
func WithMinute(d time.Duration) Option { return func(p *Provider) { p.minute = d } }

// New returns a provider for the Daytona API that opts name (FromEnv, or
// WithAPIKey and WithAPIURL). It does no I/O.
// unauthenticated: no API key. invalid_argument: a malformed API URL.
func New(opts ...Option) (*Provider, error) {
	p := &Provider{
		waitTimeout: DefaultWaitTimeout,
		retries:     DefaultRetries,
		previewTTL:  DefaultPreviewTTL,
		minute:      time.Minute,
	}
	for _, o := range opts {
		o(p)
	}
	cfg := &p.cfg
	if strings.TrimSpace(cfg.APIKey) == "" {
		return nil, provider.Errorf(provider.Unauthenticated,
			"no Daytona API key: set %s (make one at %s); %s (default %s) and %s are optional",
			EnvAPIKey, keysURL, EnvAPIURL, DefaultAPIURL, EnvTarget)
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, provider.Errorf(provider.InvalidArgument, "%s %q is not an http(s) URL like %s", EnvAPIURL, cfg.APIURL, DefaultAPIURL)
	}
	cfg.APIURL = strings.TrimRight(u.String(), "/")
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	p.clk = cfg.Clock
	p.creds, p.keyID = provider.NewAuthTracker(p.clk), provider.Fingerprint(cfg.APIKey)
	p.creds.Settings(p.keyID, true, "an API key is set for "+cfg.APIURL)
	p.previewTTL = min(max(p.previewTTL, time.Second), 24*time.Hour)

	hc := http.Client{}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &retryTransport{base: base, clk: p.clk, retries: p.retries}
	p.http = &hc

	ac := apiclient.NewConfiguration()
	ac.Servers = apiclient.ServerConfigurations{{URL: cfg.APIURL}}
	ac.HTTPClient = p.http
	ac.UserAgent = "sandplane-daytona/" + apiclient.ClientVersion
	ac.AddDefaultHeader("X-Daytona-Source", "sandplane")
	p.api = apiclient.NewAPIClient(ac)
	return p, nil
}

func init() {
	provider.Register("daytona", func(ctx context.Context, u *url.URL) (provider.Provider, error) {
		opts := []Option{FromEnv()}
		if u.Host != "" {
			// daytona://host/api names the API URL: https, but plain http
			// for a simulator on loopback.
			scheme := "https"
			if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || ip != nil && ip.IsLoopback() {
				scheme = "http"
			}
			opts = append(opts, WithAPIURL(scheme+"://"+u.Host+u.Path))
		}
		return New(opts...)
	})
}
