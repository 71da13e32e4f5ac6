package simulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandplane/sandplane/local/runtime"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// RuntimeBackendConfig configures NewRuntimeBackend.
type RuntimeBackendConfig struct {
	// Runtime spawns the workloads (native or docker).
	Runtime runtime.Runtime
	// Clock paces readiness polls and grace periods. Default: clock.Real().
	Clock clock.Clock
	// Root is the state directory; each sandbox gets Root/sandboxes/<id>,
	// which survives stop and start and is removed on delete.
	Root string
	// Command is the workload's argv: a server of Daytona's toolbox paths
	// on $PORT, such as `sandplane toolbox`. Docker may leave it empty to
	// use the image's own command.
	Command []string
	// Image is the Docker image; unused by the native runtime.
	Image string
	// ReadyTimeout bounds the wait for the toolbox to answer. Default 30 s.
	ReadyTimeout time.Duration
	// StopGrace is how long a stop waits after SIGTERM before killing, as
	// Daytona's runner does. Default 10 s.
	StopGrace time.Duration
	// PortURL overrides where preview traffic for a port goes. Default:
	// 127.0.0.1:<port>, right for the native runtime, whose workloads share
	// the host's network.
	PortURL func(sandboxID string, port int) (*url.URL, error)
}

type runtimeBackend struct {
	cfg  RuntimeBackendConfig
	http *http.Client

	mu        sync.Mutex
	workloads map[string]*workload
}

type workload struct {
	handle  runtime.Handle
	running bool
	port    int
	dir     string
}

// NewRuntimeBackend returns a Backend that runs each sandbox's workload on a
// local runtime, so toolbox calls run real commands on real files.
func NewRuntimeBackend(cfg RuntimeBackendConfig) (Backend, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("simulator: runtime backend without a runtime")
	}
	if cfg.Root == "" {
		return nil, errors.New("simulator: runtime backend without a root directory")
	}
	if len(cfg.Command) == 0 && cfg.Image == "" {
		return nil, errors.New("simulator: runtime backend without a workload command or image")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if err := os.MkdirAll(filepath.Join(cfg.Root, "sandboxes"), 0o700); err != nil {
		return nil, fmt.Errorf("simulator: create state directory: %w", err)
	}
	return &runtimeBackend{
		cfg:       cfg,
		http:      &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}},
		workloads: map[string]*workload{},
	}, nil
}

func (b *runtimeBackend) Name() string { return string(b.cfg.Runtime.Name()) }

func (b *runtimeBackend) native() bool { return b.cfg.Runtime.Name() == provider.RuntimeNative }

func (b *runtimeBackend) Start(ctx context.Context, w Workload) (string, error) {
	b.mu.Lock()
	wl := b.workloads[w.SandboxID]
	if wl == nil {
		wl = &workload{dir: filepath.Join(b.cfg.Root, "sandboxes", w.SandboxID)}
		b.workloads[w.SandboxID] = wl
	}
	running, port := wl.running, wl.port
	b.mu.Unlock()
	if running {
		return baseURL(port), nil
	}
	// The runtime keeps its logs in dir; the sandbox's user works in
	// dir/home, so that the logs do not show up in the user's files.
	home := filepath.Join(wl.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("create the sandbox directory: %w", err)
	}
	// Keep the port across restarts when it is still free, so that a
	// restarted container keeps its published port.
	if port == 0 || !portFree(port) {
		p, err := freePort()
		if err != nil {
			return "", err
		}
		port = p
	}
	spec := runtime.Spec{
		SandboxID: w.SandboxID,
		Root:      b.cfg.Root,
		Dir:       wl.dir,
		Command:   b.cfg.Command,
		Image:     b.cfg.Image,
		Env:       b.environ(w, home, port),
		Port:      port,
		Labels:    map[string]string{"io.sandplane.simulator": "true"},
	}
	if b.native() {
		spec.WorkDir = home
	}
	if err := b.cfg.Runtime.Preflight(ctx, spec); err != nil {
		return "", err
	}
	h, err := b.cfg.Runtime.Start(ctx, spec)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	wl.handle, wl.running, wl.port = h, true, port
	b.mu.Unlock()
	if err := b.waitReady(ctx, h, port, wl.dir); err != nil {
		_ = b.cfg.Runtime.Stop(context.WithoutCancel(ctx), h, 0)
		b.mu.Lock()
		wl.running = false
		b.mu.Unlock()
		return "", err
	}
	return baseURL(port), nil
}

func baseURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// environ is the workload's whole environment: a usable PATH and locale,
// the sandbox's home and port, then the sandbox's own env on top.
func (b *runtimeBackend) environ(w Workload, home string, port int) map[string]string {
	env := map[string]string{
		"PATH": os.Getenv("PATH"),
		"LANG": "C.UTF-8",
		"HOME": home,
		"USER": w.User,
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
	if w.Snapshot != "" {
		env["DAYTONA_SANDBOX_SNAPSHOT"] = w.Snapshot
	}
	return env
}

// waitReady polls the toolbox until it answers any HTTP request, the
// workload dies, or ReadyTimeout passes.
func (b *runtimeBackend) waitReady(ctx context.Context, h runtime.Handle, port int, dir string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := b.cfg.Clock.AfterFunc(b.cfg.ReadyTimeout, cancel)
	defer deadline.Stop()
	probe := baseURL(port) + "/version"
	for {
		if b.answers(ctx, probe) {
			return nil
		}
		st, err := b.cfg.Runtime.Status(context.WithoutCancel(ctx), h)
		if err == nil && !st.Running {
			_, stderr, _ := b.cfg.Runtime.Logs(context.WithoutCancel(ctx), h, dir)
			return fmt.Errorf("the sandbox workload exited before serving: %s%s", st.Exit.Reason, tail(stderr))
		}
		if err := clock.Sleep(ctx, b.cfg.Clock, 20*time.Millisecond); err != nil {
			return fmt.Errorf("the sandbox workload did not answer on port %d within %v", port, b.cfg.ReadyTimeout)
		}
	}
}

// answers reports whether url gives any HTTP response within a second.
func (b *runtimeBackend) answers(ctx context.Context, url string) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := b.cfg.Clock.AfterFunc(time.Second, cancel)
	defer t.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	if len(s) > 300 {
		s = "…" + s[len(s)-300:]
	}
	return ": " + s
}

func (b *runtimeBackend) Stop(ctx context.Context, sandboxID string, force bool) error {
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
	wl.running = false
	b.mu.Unlock()
	return nil
}

func (b *runtimeBackend) Remove(ctx context.Context, sandboxID string) error {
	b.mu.Lock()
	wl := b.workloads[sandboxID]
	b.mu.Unlock()
	if wl == nil {
		return nil
	}
	if wl.handle != (runtime.Handle{}) {
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
	b.mu.Unlock()
	return nil
}

func (b *runtimeBackend) PortURL(sandboxID string, port int) (*url.URL, error) {
	if b.cfg.PortURL != nil {
		return b.cfg.PortURL(sandboxID, port)
	}
	b.mu.Lock()
	wl := b.workloads[sandboxID]
	running := wl != nil && wl.running
	b.mu.Unlock()
	if !running {
		return nil, fmt.Errorf("sandbox %s has no running workload", sandboxID)
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, nil
}

// Close removes every workload it still knows of.
func (b *runtimeBackend) Close() error {
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
