package simulator

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator/internal/backend"
	"github.com/sandplane/sandplane/simulator/internal/secrets"
)

// The egress proxy is the simulator's side of a sandbox's secrets: the
// sandboxes that mount secrets when their workload starts send their
// HTTP(S) through it (HTTP_PROXY and HTTPS_PROXY with their own
// credentials, the proxy's CA to trust), and it puts the values back into
// what they send to each secret's allowed hosts. It runs only where the
// workloads can reach it: on loopback, beside a backend that says so
// (backend.EgressBackend, the native one).

// egressPart starts the proxy and dials for it, over the simulator.
type egressPart struct{ *Simulator }

func egressOf(s *Simulator) egressPart { return egressPart{s} }

// egressHooks are what tests point the proxy's upstream at: a name an
// allowed host goes by resolved to a loopback test server, and the roots
// that server's certificate verifies with. Zero in every other use.
type egressHooks struct {
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	rootCAs *x509.CertPool
}

// startEgress makes the store and, on a backend whose workloads reach it,
// the proxy, listening on loopback.
func (s egressPart) startEgress() error {
	s.secrets = secrets.NewStore(s.clk)
	eb, ok := s.backend.(backend.EgressBackend)
	if !ok || !eb.EgressProxy() {
		return nil
	}
	// The CA's certificates are checked by the sandboxes' clients against
	// the wall clock, whatever the simulator's own clock says.
	p, err := secrets.NewProxy(secrets.Options{Store: s.secrets, Clock: clock.Real(), Logger: s.cfg.Logger,
		RootCAs: s.cfg.egress.rootCAs, Dial: s.egressDial})
	if err != nil {
		return fmt.Errorf("secrets proxy: %w", err)
	}
	addr, err := p.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("secrets proxy: listen on loopback: %w", err)
	}
	s.egress, s.egressAddr = p, addr.String()
	return nil
}

// egressUsable says why secrets cannot be mounted here, if they cannot: a
// backend whose workloads do not reach the proxy (docker's bridge, and an
// isolated native workload's network of its own, do not reach the host's
// loopback). The none backend runs no workload and keeps the mounts as
// records.
func (s egressPart) egressUsable() *apiError {
	if s.egress != nil || s.syncWork {
		return nil
	}
	how := "Run the simulator with --backend native"
	if s.backend.Name() == WorkloadsNative {
		how = "Run the simulator with --isolation none (its sandboxes then share the host's network)"
	}
	return errorf(http.StatusBadRequest,
		"Secrets are not supported on the %s backend as it runs: its workloads cannot reach the simulator's secrets proxy. %s to use secrets, or create the sandbox without secrets",
		s.backend.Name(), how)
}

// errEgressBlocked is what the proxy's dial answers a sandbox whose
// network settings forbid the address.
var errEgressBlocked = errors.New("the sandbox's network settings do not allow this address")

// egressDial opens the proxy's connection for sandbox to addr, within the
// sandbox's network settings as the simulator records them: nothing with
// networkBlockAll, only the networkAllowList's CIDRs when it has one. The
// proxy dials from the simulator's host, so without this it would be a
// way around them (the native backend does not enforce them itself).
func (s egressPart) egressDial(ctx context.Context, sandbox, network, addr string) (net.Conn, error) {
	policy, ok := s.policyOf(sandbox)
	if !ok || policy.BlockAll {
		return nil, errEgressBlocked
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := s.egressResolve(ctx, host)
	if err != nil {
		return nil, err
	}
	ips = allowedAddrs(ips, policy.AllowList)
	if len(ips) == 0 {
		return nil, errEgressBlocked
	}
	var d net.Dialer
	var errs []error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// policyOf is the sandbox's network settings now, and whether it exists.
func (s egressPart) policyOf(sandbox string) (NetworkPolicy, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sb := s.rows.Get(sandbox)
	if sb == nil || sb.gone {
		return NetworkPolicy{}, false
	}
	return sb.policy(), true
}

func (s egressPart) egressResolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if s.cfg.egress.resolve != nil {
		return s.cfg.egress.resolve(ctx, host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// allowedAddrs keeps the addresses an allow list (Daytona's comma-separated
// CIDRs) lets through; an empty list lets every one.
func allowedAddrs(ips []netip.Addr, list string) []netip.Addr {
	if strings.TrimSpace(list) == "" {
		return ips
	}
	var prefixes []netip.Prefix
	for _, part := range strings.Split(list, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(part)); err == nil {
			prefixes = append(prefixes, p)
		}
	}
	var out []netip.Addr
	for _, ip := range ips {
		for _, p := range prefixes {
			if p.Contains(ip.Unmap()) {
				out = append(out, ip)
				break
			}
		}
	}
	return out
}

// egressLocked is the Egress of sb's next workload: its placeholders and
// its proxy credentials, when it mounts any secret and the proxy runs.
// It marks sb as started with a proxy. Called with s.mu held.
func (s reconciler) egressLocked(sb *sandbox) *backend.Egress {
	env := s.secrets.Env(sb.ID)
	sb.egress = s.egress != nil && len(env) > 0
	if !sb.egress {
		return nil
	}
	return &backend.Egress{Placeholders: env, ProxyURL: s.egress.ProxyURL(sb.ID, s.egressAddr), CACert: s.egress.CACertPEM()}
}

// forgetSecretsLocked drops what a destroyed sandbox mounted and ends its
// proxy credentials. Called with s.mu held.
func (s reconciler) forgetSecretsLocked(id string) {
	s.secrets.Forget(id)
	if s.egress != nil {
		s.egress.Revoke(id)
	}
}

// pushEnvLater tells the running workload of sandbox, in the background,
// the variables of its new mounts, and to drop those of before it mounts
// no more, so that the processes it starts from now on see them (the
// toolbox's POST /env). Nothing when it was started without the proxy.
// Called with s.mu held.
func (s reconciler) pushEnvLater(id string, before map[string]string) {
	sb := s.rows.Get(id)
	if sb == nil || !sb.egress || sb.State != stStarted {
		return
	}
	set := s.secrets.Env(id)
	var unset []string
	for env := range before {
		if _, ok := set[env]; !ok {
			unset = append(unset, env)
		}
	}
	if len(set) == 0 && len(unset) == 0 {
		return
	}
	s.goBackground(func(ctx context.Context) {
		if err := s.pushEnv(ctx, id, set, unset); err != nil {
			s.cfg.Logger.Warn("tell a sandbox's toolbox its secrets' variables", "sandbox", id, "err", err)
		}
	})
}

func (s reconciler) pushEnv(ctx context.Context, id string, set map[string]string, unset []string) error {
	route, err := s.backend.Toolbox(ctx, id)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"set": set, "unset": unset})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(route.URL.String(), "/")+"/env", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if route.Token != "" {
		req.Header.Set(previewTokenHeader, route.Token)
	}
	resp, err := route.Transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The status only: the body may quote what was sent.
		return fmt.Errorf("the toolbox answered %d", resp.StatusCode)
	}
	return nil
}
