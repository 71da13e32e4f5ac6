package daemon

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sandplane/sandplane/internal/netguard"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/relay"
	"github.com/sandplane/sandplane/provider/relay/relaymetrics"
)

// The daemon serves its sandboxes' previews itself, through provider/relay,
// as Daytona's proxy does: by host, http://<port>-<id>.localhost:<daemon
// port>/ (each sandbox an origin of its own, for browsers), and by path on
// its own host, http://127.0.0.1:<daemon port>/preview/<port>-<id>/ (for
// any HTTP client: Go's resolver, and glibc's without nss-myhostname, do not
// resolve *.localhost). Every request bumps the sandbox's activity, source
// proxy, with Daytona's dedupe and heartbeat.

// PreviewPath is where the daemon serves previews by path.
const PreviewPath = "/preview"

// PreviewAddr is the address the daemon's preview URLs name: its listen
// address, known for sure once it is bound.
type PreviewAddr struct{ addr atomic.Pointer[string] }

// NewPreviewAddr starts at addr (the listen setting).
func NewPreviewAddr(addr string) *PreviewAddr {
	p := &PreviewAddr{}
	p.Set(addr)
	return p
}

// Set records the address the daemon serves on.
func (p *PreviewAddr) Set(addr string) { p.addr.Store(&addr) }

// URL is where port inside sandbox id is served to any HTTP client: by
// path on the daemon's own host.
func (p *PreviewAddr) URL(id string, port int) string {
	return "http://" + *p.addr.Load() + PreviewPath + "/" + strconv.Itoa(port) + "-" + id
}

// Link is the preview a browser opens: by host, so that each sandbox is an
// origin of its own, unless the id cannot be a host name (uppercase
// letters, which browsers lowercase, dots, or too long for a DNS label).
func (p *PreviewAddr) Link(id string, port int) string {
	label := strconv.Itoa(port) + "-" + id
	if !hostLabel(label) {
		return p.URL(id, port)
	}
	_, daemonPort, err := net.SplitHostPort(*p.addr.Load())
	if err != nil {
		return p.URL(id, port)
	}
	return "http://" + label + ".localhost:" + daemonPort
}

// hostLabel reports whether s is a DNS label that keeps its spelling.
func hostLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// previewRequest reports whether r is preview traffic, which the relay
// answers with the sandbox's own token rules: a name under localhost
// (netguard.UnderLocalhost: browsers and curl resolve those to loopback
// themselves, RFC 6761, so no DNS can rebind them), or a path under
// PreviewPath.
func previewRequest(r *http.Request) bool {
	return netguard.Classify(r.Host) == netguard.UnderLocalhost || r.URL.Path == PreviewPath || strings.HasPrefix(r.URL.Path, PreviewPath+"/")
}

// newPreviewRelay is the relay over the manager.
func newPreviewRelay(s *Server) (*relay.Relay, error) {
	return relay.New(previewResolver{m: s.opts.Manager, hub: s.hub, notActivity: s.opts.PreviewNotActivity},
		relay.WithDomain("localhost"),
		relay.WithPathPrefix(PreviewPath),
		relay.WithClock(s.opts.Clock),
		relay.WithLogger(s.opts.Logger),
		relay.WithIdleKeepAlive(s.opts.PreviewIdleKeepAlive),
		relay.WithStripCookies(legacyTokenCookie), // an older daemon's token: never a sandbox's
		// The manager answers from memory: every request sees a stop at
		// once, and never reaches a port the stop released.
		relay.WithCacheTTL(-1),
		relay.WithResolveTimeout(-1),
		// A refresh is a record written here, not a call to make: keep
		// Daytona's 45 s and 50 s whatever the interval.
		relay.WithDaytonaTiming(true),
		relaymetrics.WithRegisterer(s.metrics.reg),
	)
}

// previewResolver is the relay's Resolver over the manager, in process.
type previewResolver struct {
	m   *manager.Manager
	hub *Hub
	// notActivity: preview traffic does not move the idle clock
	// (Options.PreviewNotActivity).
	notActivity bool
}

var (
	_ relay.Resolver    = previewResolver{}
	_ relay.Invalidator = previewResolver{}
)

func (p previewResolver) Resolve(ctx context.Context, idOrName string, port int) (relay.Target, error) {
	t, err := p.m.PreviewTarget(ctx, idOrName, port)
	// The relay checks a caller against the token (before it says why a
	// sandbox cannot answer): none for a public sandbox, as on Daytona.
	gate := t.Token
	if t.Public {
		gate = ""
	}
	if err != nil {
		return relay.Target{ID: t.ID, Token: gate}, err
	}
	if t.Token == "" {
		// Without a token the relay would let anyone in: fail closed.
		return relay.Target{}, provider.Errorf(provider.FailedPrecondition,
			"sandbox %s has no preview token yet (it was started before sandboxes had them): stop and start it to make one", t.ID)
	}
	tg := relay.Target{
		ID:       t.ID,
		URL:      &url.URL{Scheme: "http", Host: netip.AddrPortFrom(t.Addr, uint16(t.HostPort)).String()},
		Token:    gate,
		AutoStop: t.AutoStop,
		Minute:   t.Minute,
	}
	// The default workload, the toolbox, wants the token too; any other
	// workload is the sandbox's own code, which has it in its environment.
	tg.Header = http.Header{relay.TokenHeader: {t.Token}}
	return tg, nil
}

// RefreshActivity is preview traffic's bump: an activity event with source
// proxy, as on Daytona's proxy; nothing under --activity client-push.
func (p previewResolver) RefreshActivity(ctx context.Context, id string) error {
	if p.notActivity {
		return nil
	}
	return p.m.RefreshActivityFrom(ctx, id, provider.SourceProxy)
}

// Stale streams the sandboxes whose preview targets changed, from the hub,
// until ctx ends: "" when the subscription fell behind and had to be made
// again, so the relay forgets every target at once.
func (p previewResolver) Stale(ctx context.Context) (<-chan string, error) {
	out := make(chan string)
	go func() {
		defer close(out)
		for {
			sub, _, _, _ := p.hub.subscribe(0, false, manager.Filter{})
			lagged := p.relay(ctx, sub, out)
			p.hub.unsubscribe(sub)
			if !lagged {
				return
			}
			select {
			case out <- "":
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// relay passes sub's stale sandboxes on until ctx ends (false) or sub lags
// (true).
func (p previewResolver) relay(ctx context.Context, sub *subscriber, out chan<- string) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-sub.lagged:
			return true
		case ev := <-sub.ch:
			switch ev.Type {
			case provider.EventStopped, provider.EventStarted, provider.EventDeleted, provider.EventUpdated:
			default:
				continue
			}
			select {
			case out <- ev.Sandbox.ID:
			case <-ctx.Done():
				return false
			}
		}
	}
}

// openPreview sends a browser to a sandbox's preview with its token once,
// which the relay trades for a cookie of that sandbox's host and drops from
// the address: the dashboard's preview link, behind the daemon's token.
// Asked with Accept: application/json it answers {"url": ...} instead of
// redirecting: a daemon with a token is called by the dashboard's script,
// which alone holds the token and opens the link itself.
func (s *Server) openPreview(w http.ResponseWriter, r *http.Request) {
	port := 0
	if q := r.URL.Query().Get("port"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 65535 {
			writeError(w, provider.Errorf(provider.InvalidArgument, "port %q is not a TCP port (1-65535)", q))
			return
		}
		port = n
	}
	id := r.PathValue("idOrName")
	sb, err := s.opts.Manager.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := s.opts.Manager.PreviewURL(r.Context(), sb.ID, port)
	if err != nil {
		writeError(w, err)
		return
	}
	link := sb.PreviewURL
	if port != 0 {
		link = p.URL
		if l := s.opts.Manager.PreviewLink(sb.ID, port); l != "" {
			link = l
		}
	}
	u, err := url.Parse(link)
	if err != nil {
		writeError(w, provider.Errorf(provider.Internal, "the preview link of sandbox %s does not parse", sb.ID))
		return
	}
	if u.Path == "" {
		u.Path = "/"
	}
	if p.Token != "" {
		u.RawQuery = url.Values{relay.TokenParam: {p.Token}}.Encode()
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if warning, _ := s.opts.Manager.PreviewWarning(r.Context(), sb.ID); warning != "" {
		w.Header().Set("Warning", warningValue(warning))
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"url": u.String()})
		return
	}
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}
