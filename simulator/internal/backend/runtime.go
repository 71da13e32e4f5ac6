package backend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sandplane/sandplane/internal/redact"

	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/launcher"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox"
)

// RuntimeConfig configures NewRuntime.
type RuntimeConfig struct {
	// Runtime spawns the workloads (native or docker).
	Runtime driver.Driver
	// Clock paces readiness polls and grace periods. Default: clock.Real().
	Clock clock.Clock
	// Root is the state directory; each sandbox gets Root/sandboxes/<id>,
	// which survives stop and start and is removed on delete.
	Root string
	// Command is the workload's argv: a server of Daytona's toolbox paths
	// on $PORT, such as `sandplane toolbox`. Docker may leave it empty to
	// use the image's own command.
	Command []string
	// Image is the Docker image; unused by the native driver.
	Image string
	// ReadyTimeout bounds the wait for the toolbox to answer. Default 30 s.
	ReadyTimeout time.Duration
	// StopGrace is how long a stop waits after SIGTERM before killing, as
	// Daytona's runner does. Default 10 s.
	StopGrace time.Duration
	// WorkloadAddr returns the address of a running workload on a network
	// of its own, for runtimes that give each workload one (docker: the
	// container's IP on its network, which the host reaches directly on
	// Linux). Every port there is the sandbox's. Nil means, with Docker, the
	// container's address on its network; without, that the workloads
	// share the host's network: the runtime must then implement
	// driver.PortLister, and a port is reached only while a process of the
	// sandbox listens on it.
	WorkloadAddr func(ctx context.Context, h driver.Handle) (netip.Addr, error)
	// Docker is the engine client of a docker Runtime. With it the backend
	// also runs snapshot images, mounts volumes, enforces network settings,
	// links sandboxes and resizes them (docker.go).
	Docker *client.Client
	// Logger receives what cleaning up after a failed start could not do.
	// Default: slog.Default().
	Logger *slog.Logger
}

// TokenEnv is the variable that hands a workload its sandbox's secret: the
// value the proxy sends to the toolbox as X-Daytona-Preview-Token.
const TokenEnv = "SANDPLANE_SANDBOX_TOKEN"

// TokenFile holds the sandbox's secret in its state directory, 0600.
const TokenFile = "sandbox-token"

type runtimeBackend struct {
	cfg RuntimeConfig
	// launcher brings workloads up, as the daemon's manager does.
	launcher *launcher.Launcher

	mu        sync.Mutex
	workloads map[string]*workload

	// ext holds the docker capabilities (docker.go), nil elsewhere.
	ext *dockerExt
}

type workload struct {
	// id names the workload on the runtime (a docker container is
	// sandplane-<id>). It comes from crypto/rand, not from the seeded
	// source of sandbox ids: a seeded simulator repeats its ids in every
	// run, and a container that a killed run left behind would otherwise
	// hold the name of this run's sandbox.
	id      string
	handle  driver.Handle
	running bool
	// paused is set while a PauseBackend has the workload frozen.
	paused bool
	port   int
	dir    string
	token  string
	// transport pools the connections to this workload only, so that a
	// connection to one sandbox is never reused for another's request. It
	// dials with dial.
	transport *http.Transport
	dial      dialFunc
}

// dialFunc connects to an address of a workload, as net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// NewRuntime returns a Backend that runs each sandbox's workload on a
// local runtime, so toolbox calls run real commands on real files.
func NewRuntime(cfg RuntimeConfig) (Backend, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("simulator: runtime backend without a runtime")
	}
	if cfg.Root == "" {
		return nil, errors.New("simulator: runtime backend without a root directory")
	}
	if len(cfg.Command) == 0 && cfg.Image == "" {
		return nil, errors.New("simulator: runtime backend without a workload command or image")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.WorkloadAddr == nil && cfg.Docker != nil {
		cfg.WorkloadAddr = ContainerIP(cfg.Docker)
	}
	if err := os.MkdirAll(filepath.Join(cfg.Root, "sandboxes"), 0o700); err != nil {
		return nil, fmt.Errorf("simulator: create state directory: %w", err)
	}
	l, err := launcher.New(launcher.Config{
		Driver:       cfg.Runtime,
		Ports:        launcher.FreePorts{},
		Clock:        cfg.Clock,
		ReadyTimeout: cfg.ReadyTimeout,
		StopGrace:    cfg.StopGrace,
		Logger:       cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	b := &runtimeBackend{cfg: cfg, launcher: l, workloads: map[string]*workload{}}
	// As the daemon does: the first sandbox starts as quickly as the next
	// (a native runtime parks an init, and the toolbox under it).
	l.Warm(driver.Spec{Root: cfg.Root, Command: cfg.Command, Image: cfg.Image})
	return b.withCapabilities(), nil
}

func (b *runtimeBackend) Name() string { return string(b.cfg.Runtime.Name()) }

func (b *runtimeBackend) native() bool { return b.cfg.Runtime.Name() == provider.RuntimeNative }

// bindsHome reports whether native sandboxes see their private home at
// /home/daytona, as on Daytona: the runtime shows it there in a mount
// namespace of the workload's own, and the host's /home is never touched.
// Without one, a sandbox's home is its private directory at its host path.
func (b *runtimeBackend) bindsHome() bool {
	binder, ok := b.cfg.Runtime.(driver.Binder)
	return b.native() && ok && binder.CanBind()
}

// Start launches the sandbox's workload unless it runs: its directories and
// secret, the launcher's steps (a port, its last one when still free, so
// that a restarted container keeps its published port; the spec; preflight;
// start; an answer on /version), then what can only be set on a running
// workload.
func (b *runtimeBackend) Start(ctx context.Context, w Workload) (string, error) {
	wl, lastPort, running := b.entry(w.SandboxID)
	if running {
		return baseURL(lastPort), nil
	}
	if err := b.forkFrom(ctx, w, wl); err != nil {
		return "", err
	}
	home, token, err := sandboxFiles(wl.dir)
	if err != nil {
		return "", err
	}
	launched, err := b.launcher.Launch(ctx, b.launchRequest(w, wl, home, token, lastPort))
	if err != nil {
		return "", startError(err)
	}
	if err := b.started(ctx, w, launched.Handle); err != nil {
		b.launcher.Discard(launched.Handle)
		return "", err
	}
	b.mu.Lock()
	wl.handle, wl.running, wl.port, wl.token = launched.Handle, true, launched.Port, token
	wl.dial = b.dialer(wl.dir, launched.Port)
	wl.transport = newTransport(wl.dial)
	b.mu.Unlock()
	return baseURL(launched.Port), nil
}

// entry returns the record of the sandbox's workload, made on its first
// start, with its last port and whether it runs.
func (b *runtimeBackend) entry(sandboxID string) (wl *workload, port int, running bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wl = b.workloads[sandboxID]
	if wl == nil {
		wl = &workload{id: uuid.NewString(), dir: filepath.Join(b.cfg.Root, "sandboxes", sandboxID)}
		b.workloads[sandboxID] = wl
	}
	return wl, wl.port, wl.running
}

// workloadID is the name of the sandbox's workload on the runtime, or the
// sandbox id when it has none (then nothing on the runtime has that name).
func (b *runtimeBackend) workloadID(sandboxID string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wl := b.workloads[sandboxID]; wl != nil {
		return wl.id
	}
	return sandboxID
}

// sandboxFiles makes the sandbox's directories and returns its home and
// secret. The runtime keeps its logs in dir; the sandbox's user works in
// dir/home, so that the logs do not show up in the user's files.
func sandboxFiles(dir string) (home, token string, err error) {
	home = filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", "", fmt.Errorf("create the sandbox directory: %w", err)
	}
	token, err = sandboxToken(dir)
	return home, token, err
}

// launchRequest is the launch of w's workload: the toolbox on $PORT, ready
// once it answers, its output quoted with the sandbox's env values and
// secret hidden.
func (b *runtimeBackend) launchRequest(w Workload, wl *workload, home, token string, lastPort int) launcher.Request {
	spec := driver.Spec{
		SandboxID: wl.id,
		Root:      b.cfg.Root,
		Dir:       wl.dir,
		Command:   b.cfg.Command,
		Image:     b.cfg.Image,
		Labels:    map[string]string{LabelSim: "true", LabelSimSandbox: w.SandboxID},
	}
	if b.native() {
		spec.WorkDir = home
		if b.bindsHome() {
			spec.Binds = []driver.Bind{{Source: home, Target: NativeHome}}
			spec.WorkDir = NativeHome
		}
	}
	secrets := make(map[string]string, len(w.Env)+1)
	maps.Copy(secrets, w.Env)
	secrets[TokenEnv] = token
	if w.Egress != nil {
		// The proxy URL carries the sandbox's proxy credentials.
		maps.Copy(secrets, w.Egress.Placeholders)
		secrets["HTTPS_PROXY"] = w.Egress.ProxyURL
	}
	return launcher.Request{
		Spec:       spec,
		PreferPort: lastPort,
		Ready:      launcher.ReadyHTTP("/version"),
		Prepare: func(ctx context.Context, spec *driver.Spec) error {
			spec.Env = b.environ(w, home, spec.Port, token)
			if err := b.addEgress(spec, wl.dir, w.Egress); err != nil {
				return err
			}
			if err := b.prepare(ctx, spec, w, home); err != nil {
				return err
			}
			// Through the environment, not argv: a parked workload's argv
			// was fixed before it knew its sandbox.
			ep, err := b.entrypoint(ctx, w)
			spec.Env[toolbox.EntrypointEnv] = toolbox.ShellJoin(ep)
			return err
		},
		Redact: redact.Env(secrets),
	}
}

// startError words a failed launch as the sandbox's errorReason: how the
// workload ended, or that it never answered, with the end of its output.
func startError(err error) error {
	var nr *launcher.NotReadyError
	if !errors.As(err, &nr) {
		return err
	}
	output := ""
	if nr.Output != "" {
		output = ": " + nr.Output
	}
	if nr.Exited {
		return fmt.Errorf("the sandbox workload exited before serving: %s%s", nr.Reason, output)
	}
	return fmt.Errorf("the sandbox workload did not answer on port %d within %v%s", nr.Port, nr.Timeout, output)
}

func newTransport(dial dialFunc) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		MaxIdleConnsPerHost: 32,
		ForceAttemptHTTP2:   false,
	}
}

// dialer is how the proxy reaches the workload in dir: on the host's
// network it is dialled where it listens; with a network of its own
// (native under bwrap) every port but forwarded, the one the host holds
// for it, is reached through the runtime, inside that network. Dialling
// such a port on the host's loopback would reach whatever the host serves
// there instead. The simulator's specs name no isolation: the runtime's
// default is theirs.
func (b *runtimeBackend) dialer(dir string, forwarded int) dialFunc {
	d := &net.Dialer{}
	inside, canDial := b.cfg.Runtime.(driver.PortDialer)
	hn, mayShare := b.cfg.Runtime.(driver.HostNetwork)
	if !canDial || !mayShare || hn.SharesHostNetwork(driver.Spec{}) {
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, p, err := net.SplitHostPort(addr)
		port, perr := strconv.Atoi(p)
		if err != nil || perr != nil || port == forwarded {
			return d.DialContext(ctx, network, addr)
		}
		return inside.DialPort(ctx, dir, port)
	}
}

// sandboxToken returns the sandbox's secret, made on its first start:
// 32 random bytes, URL-safe base64, in dir/sandbox-token (0600).
func sandboxToken(dir string) (string, error) {
	p := filepath.Join(dir, TokenFile)
	b, err := os.ReadFile(p)
	if err == nil && len(bytes.TrimSpace(b)) >= 43 {
		return string(bytes.TrimSpace(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the sandbox's secret: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("make the sandbox's secret: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw)
	if err := writeSecret(p, token); err != nil {
		return "", fmt.Errorf("store the sandbox's secret: %w", err)
	}
	return token, nil
}

// writeSecret writes value to p atomically, readable by the owner only.
func writeSecret(p, value string) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".secret-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

func baseURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// environ is the workload's whole environment: a usable PATH and locale,
// the sandbox's home and port, then the sandbox's own env on top.
func (b *runtimeBackend) environ(w Workload, home string, port int, token string) map[string]string {
	env := map[string]string{
		"PATH": os.Getenv("PATH"),
		"LANG": "C.UTF-8",
		"HOME": home,
		"USER": w.User,
	}
	if b.bindsHome() {
		env["HOME"] = NativeHome
	} else if b.native() {
		// No mount namespace to show the home at /home/daytona: the
		// toolbox maps that path onto it in the paths requests name.
		env[toolbox.HomeAliasEnv] = NativeHome
	}
	if !b.native() {
		env["HOME"] = "/home/daytona"
		env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for k, v := range w.Env {
		env[k] = v
	}
	env["PORT"] = strconv.Itoa(port)
	env["DAYTONA_SANDBOX_ID"] = w.SandboxID
	env["DAYTONA_SANDBOX_USER"] = w.User
	env[TokenEnv] = token
	if w.Snapshot != "" {
		env["DAYTONA_SANDBOX_SNAPSHOT"] = w.Snapshot
	}
	return env
}

func (b *runtimeBackend) Stop(ctx context.Context, sandboxID string, force bool) error {
	b.thawForStop(ctx, sandboxID)
	b.mu.Lock()
	wl := b.workloads[sandboxID]
	if wl == nil || !wl.running {
		b.mu.Unlock()
		return nil
	}
	h := wl.handle
	b.mu.Unlock()
	grace := b.cfg.StopGrace
	if force {
		grace = 0
	}
	if err := b.cfg.Runtime.Stop(ctx, h, grace); err != nil {
		return err
	}
	b.mu.Lock()
	wl.running, wl.paused = false, false
	t := wl.transport
	wl.transport = nil
	b.mu.Unlock()
	if t != nil {
		t.CloseIdleConnections()
	}
	return nil
}

func (b *runtimeBackend) Remove(ctx context.Context, sandboxID string) error {
	b.mu.Lock()
	wl := b.workloads[sandboxID]
	b.mu.Unlock()
	if wl == nil {
		return nil
	}
	b.thawForStop(ctx, sandboxID)
	if wl.handle != (driver.Handle{}) {
		if err := b.cfg.Runtime.Stop(ctx, wl.handle, 0); err != nil {
			return err
		}
		if err := b.cfg.Runtime.Remove(ctx, wl.handle); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(wl.dir); err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.workloads, sandboxID)
	t := wl.transport
	wl.transport = nil
	b.mu.Unlock()
	if t != nil {
		t.CloseIdleConnections()
	}
	b.removed(ctx, sandboxID)
	return nil
}

func (b *runtimeBackend) Toolbox(ctx context.Context, sandboxID string) (Route, error) {
	wl, err := b.running(sandboxID)
	if err != nil {
		return Route{}, err
	}
	rt, err := b.route(ctx, sandboxID, wl, wl.port)
	if err != nil {
		return Route{}, err
	}
	// The toolbox may refuse a Host that is not loopback (its guard
	// against DNS rebinding); the proxy is its legitimate client and says
	// what a client on the published port would.
	rt.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(wl.port))
	rt.Token = wl.token
	return rt, nil
}

func (b *runtimeBackend) Port(ctx context.Context, sandboxID string, port int) (Route, error) {
	wl, err := b.running(sandboxID)
	if err != nil {
		return Route{}, err
	}
	return b.route(ctx, sandboxID, wl, port)
}

// running returns a copy of the sandbox's running workload.
func (b *runtimeBackend) running(sandboxID string) (workload, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wl := b.workloads[sandboxID]
	if wl == nil || !wl.running || wl.transport == nil {
		return workload{}, fmt.Errorf("%w: sandbox %s has no running workload", ErrNotListening, sandboxID)
	}
	return *wl, nil
}

// route finds where port of wl is, if it is the sandbox's.
func (b *runtimeBackend) route(ctx context.Context, sandboxID string, wl workload, port int) (Route, error) {
	if b.cfg.WorkloadAddr != nil {
		addr, err := b.cfg.WorkloadAddr(ctx, wl.handle)
		if err != nil {
			return Route{}, fmt.Errorf("%w: %v", ErrNotListening, err)
		}
		ap := netip.AddrPortFrom(addr, uint16(port))
		return Route{
			URL: &url.URL{Scheme: "http", Host: ap.String()},
			// What the workload would see through a published port.
			Host:      net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Transport: wl.transport,
			Dial:      dialTo(wl.dial, ap.String()),
		}, nil
	}
	lister, ok := b.cfg.Runtime.(driver.PortLister)
	if !ok {
		return Route{}, fmt.Errorf("%w: the %s runtime cannot tell which ports belong to a sandbox, so the proxy reaches none",
			ErrNotListening, b.cfg.Runtime.Name())
	}
	socks, err := lister.ListeningPorts(ctx, wl.handle)
	if err != nil {
		return Route{}, fmt.Errorf("%w: %v", ErrNotListening, err)
	}
	ap, ok := dialable(socks, port)
	if !ok {
		return Route{}, notListening(sandboxID, port)
	}
	return Route{URL: &url.URL{Scheme: "http", Host: ap.String()}, Host: ap.String(), Transport: wl.transport, Dial: dialTo(wl.dial, ap.String())}, nil
}

// dialTo is dial bound to addr.
func dialTo(dial dialFunc, addr string) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) { return dial(ctx, "tcp", addr) }
}

// dialable picks, among the sandbox's listening sockets, one on port and
// the address to dial it at: the socket's own address, or loopback of the
// same family for a wildcard one. Dialling exactly where the sandbox
// listens matters: another process may hold the same port on another
// address (127.0.0.1 beside the sandbox's [::1], say).
func dialable(socks []netip.AddrPort, port int) (netip.AddrPort, bool) {
	var best netip.AddrPort
	rank := func(a netip.Addr) int {
		switch {
		case a == netip.AddrFrom4([4]byte{127, 0, 0, 1}):
			return 0
		case a.Is4():
			return 1
		}
		return 2
	}
	for _, s := range socks {
		if int(s.Port()) != port {
			continue
		}
		a := s.Addr().Unmap()
		if a.IsUnspecified() {
			if a.Is4() {
				a = netip.AddrFrom4([4]byte{127, 0, 0, 1})
			} else {
				a = netip.IPv6Loopback()
			}
		}
		if !best.IsValid() || rank(a) < rank(best.Addr()) {
			best = netip.AddrPortFrom(a, s.Port())
		}
	}
	return best, best.IsValid()
}

// Close removes every workload it still knows of, and what its launcher
// prepared for the next.
func (b *runtimeBackend) Close() error {
	b.launcher.Cool()
	b.mu.Lock()
	ids := make([]string, 0, len(b.workloads))
	for id := range b.workloads {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := b.Remove(context.Background(), id); err != nil {
			errs = append(errs, fmt.Errorf("remove the workload of %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
