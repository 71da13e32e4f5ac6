package manager

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// A sandbox's ports are named as on Daytona, by the port inside the
// sandbox: its snapshot declares them (the workload's own, 4000 by
// default, and more), and each maps to a host port while it runs.

// workloadPort is the port r's workload serves inside the sandbox: as
// recorded, or, for a record from before ports were declared, its
// snapshot's.
func (m *Manager) workloadPort(r *record) int {
	if r.SandboxPort != 0 {
		return r.SandboxPort
	}
	return m.opts.Snapshots[r.Snapshot].WorkloadPort()
}

// hostPort is the host port that port inside r's sandbox maps to, if r
// declares it and runs.
func (m *Manager) hostPort(r *record, port int) (int, bool) {
	if r.Port == 0 {
		return 0, false
	}
	if port == m.workloadPort(r) {
		return r.Port, true
	}
	h, ok := r.ExtraPorts[port]
	return h, ok
}

// declaredPorts lists r's ports inside the sandbox, sorted.
func (m *Manager) declaredPorts(r *record) []int {
	out := []int{m.workloadPort(r)}
	if r.Port == 0 {
		out = append(out, m.opts.Snapshots[r.Snapshot].Ports...)
	}
	for p := range r.ExtraPorts {
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hostPorts are the host ports r holds.
func hostPorts(r *record) []int {
	var out []int
	if r.Port > 0 {
		out = append(out, r.Port)
	}
	for _, h := range r.ExtraPorts {
		out = append(out, h)
	}
	return out
}

// hostAddr is the loopback address of r's host ports (record.HostIP).
func hostAddr(r *record) netip.Addr {
	if a, err := netip.ParseAddr(r.HostIP); err == nil {
		return a
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// releasePorts gives back the host ports r held.
func (m *Manager) releasePorts(r *record) {
	for _, p := range hostPorts(r) {
		m.ports.Release(p)
	}
}

// previewURL is where port inside r's sandbox is served to any client.
func (m *Manager) previewURL(r *record, port, host int) string {
	if m.opts.PreviewURL != nil {
		return m.opts.PreviewURL(r.ID, port)
	}
	h := m.opts.PreviewHost
	if r.HostIP != "" {
		h = r.HostIP // the sandbox's own address: nothing listens on PreviewHost's
	}
	return "http://" + net.JoinHostPort(h, strconv.Itoa(host))
}

// previewLink is r's previewUrl: its workload port, for a browser.
func (m *Manager) previewLink(r *record) string {
	port := m.workloadPort(r)
	if m.opts.PreviewLink != nil {
		return m.opts.PreviewLink(r.ID, port)
	}
	return m.previewURL(r, port, r.Port)
}

// PreviewLink is where a browser opens port inside sandbox id: the host
// form, each sandbox an origin of its own, where the id allows it; "" when
// the manager has no browser form (then PreviewURL's is the one).
func (m *Manager) PreviewLink(id string, port int) string {
	if m.opts.PreviewLink == nil {
		return ""
	}
	return m.opts.PreviewLink(id, port)
}

// PreviewURL returns where port inside the sandbox (0: its workload port)
// is reachable from the host, and the sandbox's token. invalid_argument:
// the port is not one the sandbox's snapshot declares. failed_precondition:
// the sandbox is not started.
func (m *Manager) PreviewURL(ctx context.Context, idOrName string, port int) (provider.Preview, error) {
	if port < 0 || port > 65535 {
		return provider.Preview{}, provider.Errorf(provider.InvalidArgument, "port %d is out of range 1-65535", port)
	}
	s, err := m.Get(ctx, idOrName)
	if err != nil {
		return provider.Preview{}, err
	}
	if s.State != provider.StateStarted {
		return provider.Preview{}, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s: start it first", s.ID, s.State)
	}
	r, err := m.record(s.ID)
	if err != nil {
		return provider.Preview{}, err
	}
	if port == 0 {
		port = m.workloadPort(r)
	}
	host, ok := m.hostPort(r, port)
	if !ok {
		return provider.Preview{}, m.undeclared(r, port)
	}
	// A workload started before sandboxes had tokens has none yet ("").
	tok, err := m.readToken(s.ID)
	if err != nil {
		return provider.Preview{}, provider.Errorf(provider.Internal, "read sandbox token: %w", err)
	}
	return provider.Preview{URL: m.previewURL(r, port, host), Token: tok}, nil
}

// undeclared explains a port the sandbox has no preview of.
func (m *Manager) undeclared(r *record, port int) error {
	declared := make([]string, 0, 4)
	for _, p := range m.declaredPorts(r) {
		declared = append(declared, strconv.Itoa(p))
	}
	return provider.Errorf(provider.InvalidArgument,
		"port %d is not declared by snapshot %s (it declares %s): declare it in the daemon config's snapshot ports, then start the sandbox again",
		port, r.Snapshot, strings.Join(declared, ", "))
}

// record is the current record of the sandbox id. not_found.
func (m *Manager) record(id string) (*record, error) {
	e, err := m.lookup(id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return e.rec, nil
}

// PreviewTarget is where a preview of a sandbox's port goes, for a proxy in
// the daemon's process.
type PreviewTarget struct {
	// ID is the sandbox's id.
	ID string
	// HostPort is the host port the sandbox port maps to, on Addr.
	HostPort int
	// Addr is the loopback address of the sandbox's host ports: its own,
	// or 127.0.0.1 (record.HostIP).
	Addr netip.Addr
	// Token is the sandbox's secret ("" for a workload started before
	// sandboxes had one).
	Token string
	// Public says that the sandbox's previews answer without the token, as
	// Daytona's public sandboxes do; its workload still gets the token.
	Public bool
	// AutoStop is the sandbox's auto-stop interval (0: never), and Minute
	// the length of an interval minute.
	AutoStop, Minute time.Duration
}

// PreviewTarget resolves port inside the sandbox idOrName as recorded,
// without asking its runtime: a proxy finds out soon enough whether the
// workload answers. not_found. failed_precondition: not started (or still
// being recovered after a restart). invalid_argument: an undeclared port.
// With any error but not_found, the target still has the sandbox's ID and
// Token, so that a proxy checks its caller before it says why.
func (m *Manager) PreviewTarget(ctx context.Context, idOrName string, port int) (PreviewTarget, error) {
	e, err := m.lookup(idOrName)
	if err != nil {
		return PreviewTarget{}, err
	}
	m.mu.Lock()
	r := e.rec
	m.mu.Unlock()
	tok, err := m.readToken(r.ID)
	if err != nil {
		return PreviewTarget{}, provider.Errorf(provider.Internal, "read sandbox token: %w", err)
	}
	t := PreviewTarget{ID: r.ID, Token: tok, Public: r.Public}
	if err := m.available(e); err != nil {
		return t, err
	}
	if r.State != provider.StateStarted {
		return t, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s", r.ID, r.State)
	}
	host, ok := m.hostPort(r, port)
	if !ok {
		return t, m.undeclared(r, port)
	}
	t.HostPort, t.Addr = host, hostAddr(r)
	t.AutoStop, t.Minute = provider.IntervalDuration(r.AutoStopInterval, m.opts.Minute), m.opts.Minute
	return t, nil
}

// PreviewWarning is what a preview of sandbox idOrName must warn of, ""
// when nothing: a started sandbox whose host ports are on 127.0.0.1 can
// read the preview cookies of every other sandbox. Browsers scope cookies
// by host, never by port, and resolve *.localhost to 127.0.0.1, so a page
// that points a browser at <port>-<another id>.localhost:<a port of its
// own> has it send that preview's cookie there. A sandbox on the host's
// network listens where it likes, and nothing can keep it from 127.0.0.1;
// an isolated one listens only on its own address (launcher.OwnAddress).
// Errors are Get's.
func (m *Manager) PreviewWarning(ctx context.Context, idOrName string) (string, error) {
	s, err := m.Get(ctx, idOrName)
	if err != nil || s.State != provider.StateStarted {
		return "", err
	}
	r, err := m.record(s.ID)
	if err != nil || r.HostIP != "" || r.Port == 0 {
		return "", err
	}
	if !m.sharesHostNetwork(r) {
		return fmt.Sprintf("sandbox %s was started before sandboxes had loopback addresses of their own, and its ports are on 127.0.0.1, "+
			"where browsers send the preview cookies of every sandbox: stop and start it", s.ID), nil
	}
	return fmt.Sprintf("sandbox %s shares the host's network (isolation: none): it can listen on 127.0.0.1, "+
		"where browsers send the preview cookies of every sandbox, and read the cookies of other previews; "+
		"isolate it (isolation: bwrap, or docker's own network) to keep them from it", s.ID), nil
}

// sharesHostNetwork reports whether r's workload runs on the host's
// network, as its runtime says of its snapshot.
func (m *Manager) sharesHostNetwork(r *record) bool {
	hn, ok := m.opts.Runtimes[r.Runtime].(driver.HostNetwork)
	if !ok {
		return false
	}
	snap := m.opts.Snapshots[r.Snapshot]
	return hn.SharesHostNetwork(driver.Spec{Isolation: snap.Isolation, Network: snap.Network})
}

// unisolated reports whether r is a native sandbox without isolation. A
// running one is as it was spawned: on the host's network, its ports on
// 127.0.0.1 (record.HostIP), which a daemon that adopted it after a
// restart with other settings must not paper over; the few spawned isolated
// before sandboxes had addresses of their own count too, as their ports are
// there as well. One not running is what its next start gets, as the
// runtime settled the isolation of its snapshot.
func (m *Manager) unisolated(r *record) bool {
	if r.Runtime != provider.RuntimeNative {
		return false
	}
	if r.Port > 0 {
		return r.HostIP == ""
	}
	return m.sharesHostNetwork(r)
}
