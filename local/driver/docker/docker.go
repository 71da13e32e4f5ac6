package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

const (
	// maxLogBytes is how much of each stream Logs returns: the newest MiB,
	// as the native runtime does.
	maxLogBytes = 1 << 20
	// cleanupTimeout bounds the removal of a half-made container after the
	// caller's context ended.
	cleanupTimeout = 30 * time.Second
	// startTimeout bounds what Start asks of the engine: making the
	// network, inspecting, creating and starting the container, which
	// takes it milliseconds to seconds; a commit of a large filesystem,
	// when a replaced container carries its files over, takes the longest.
	// A create's context has no deadline, and an engine that hangs would
	// hold the create, and the sandbox's other operations, for good.
	startTimeout = 5 * time.Minute
	// probeWindow is how long Probe waits for the port's proxy to hang up on
	// a connection that nothing inside the container accepted, when no HTTP
	// answer comes first.
	probeWindow = 50 * time.Millisecond
)

// Exit reasons beyond "exited: code N" and "killed: signal S".
const (
	ReasonGone       = driver.ReasonWorkloadRemoved
	ReasonNotStarted = "container created but never started"
	// ReasonEngineGone is the exit of a container that ended because its
	// engine went away (stopped, crashed or restarted), which stops the
	// containers it runs unless live-restore keeps them. Its filesystem
	// stays: Start runs it again once the engine is back.
	ReasonEngineGone = "docker engine restart: container stopped"
)

// Driver runs workloads as Docker containers. It is safe for concurrent use.
type Driver struct {
	clk     clock.Clock
	cli     *client.Client
	ownsCli bool

	negMu      sync.Mutex
	negotiated bool
	init       bool
	// network is the bridge sandbox containers join (NetworkName).
	network string
	// toolboxBase is what the default toolbox image is built on; see
	// WithToolboxBase.
	toolboxBase string

	mu      sync.Mutex
	sources map[string]*imageSource // by image ref

	// netChecked is set once the sandbox network is known to exist and
	// isolate; guarded by netMu.
	netMu      sync.Mutex
	netChecked bool
	// absent are the names Preflight found free.
	absent absentNames
	// exits tells Wait when to look.
	exits exitFeed
	// lost are the containers that ran when the engine stopped answering.
	lost lostContainers
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Prober = (*Driver)(nil)
)

// Option configures New.
type Option func(*Driver) error

// WithClock runs the driver's grace periods and polls on clk rather than
// the real clock; nil keeps the real one.
func WithClock(clk clock.Clock) Option {
	return func(r *Driver) error {
		if clk != nil {
			r.clk = clk
		}
		return nil
	}
}

// WithClient makes the runtime use cli, which the caller keeps and closes.
func WithClient(cli *client.Client) Option {
	return func(r *Driver) error {
		r.cli = cli
		r.ownsCli = false
		return nil
	}
}

// WithHost talks to the engine at host (as DOCKER_HOST would name it)
// instead of the one the environment names.
func WithHost(host string) Option {
	return func(r *Driver) error {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithHost(host), client.WithAPIVersionNegotiation())
		if err != nil {
			return provider.Errorf(provider.Unavailable, "docker host %q is not usable: %w", host, err)
		}
		r.cli, r.ownsCli = cli, true
		return nil
	}
}

// ScratchBase, given to WithToolboxBase, builds the default toolbox image
// FROM scratch with a static busybox as /bin/sh: small, and buildable without
// root, but with no bash, python, node or git.
const ScratchBase = "scratch"

// WithToolboxBase sets the image the default toolbox image is built on: ""
// (the default) for sandplane's Debian image (internal/baseimage), built
// once per engine; ScratchBase; or the reference of an image already on the
// engine (one pulled on a machine that can reach a registry, say).
func WithToolboxBase(ref string) Option {
	return func(r *Driver) error {
		r.toolboxBase = ref
		return nil
	}
}

// WithInit sets whether containers run under the engine's init process
// (docker run --init). It is on by default; turn it off for an engine that
// ships no docker-init.
func WithInit(on bool) Option {
	return func(r *Driver) error {
		r.init = on
		return nil
	}
}

// New returns a runtime on the engine that DOCKER_HOST names (the platform's
// default socket when unset). It does not contact the engine: use Ping to
// learn whether one answers. unavailable: the environment names no usable
// engine (a malformed DOCKER_HOST, unreadable TLS files).
func New(opts ...Option) (*Driver, error) {
	r := &Driver{clk: clock.Real(), init: true, network: NetworkName}
	r.exits.r = r
	for _, o := range opts {
		if err := o(r); err != nil {
			r.Close()
			return nil, err
		}
	}
	if r.cli == nil {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, provider.Errorf(provider.Unavailable,
				"docker client from the environment: %v: fix or unset DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH", err)
		}
		r.cli, r.ownsCli = cli, true
	}
	return r, nil
}

// Close releases the client New made; a client passed with WithClient stays
// open.
func (r *Driver) Close() error {
	r.exits.close()
	if r.ownsCli && r.cli != nil {
		return r.cli.Close()
	}
	return nil
}

func (r *Driver) host() string { return r.cli.DaemonHost() }

// api is the engine client, its API version negotiated. The client
// negotiates lazily on its first request, and two first requests at once
// race inside it (docker v28); negotiating once, under a lock, before any
// concurrent use closes that race. Until an engine answers, every call tries
// again.
func (r *Driver) api(ctx context.Context) *client.Client {
	r.negMu.Lock()
	defer r.negMu.Unlock()
	if !r.negotiated {
		if _, err := r.cli.Ping(ctx); err == nil {
			r.cli.NegotiateAPIVersion(ctx)
			r.negotiated = true
		}
	}
	return r.cli
}

// Name is provider.RuntimeDocker.
func (r *Driver) Name() provider.Runtime { return provider.RuntimeDocker }

// Ping reports whether the engine answers. unavailable, naming the fix.
func (r *Driver) Ping(ctx context.Context) error {
	_, err := r.api(ctx).Ping(ctx)
	return r.classify("ping", err)
}

// Preflight checks that spec names an image present on the engine, running
// the image's source (SetImageSource) first when it is missing, and that no
// container of another owner holds the sandbox's container name.
// preflight_failed, unavailable; failed_precondition (driver.ErrWorkloadRemoved)
// when a sandbox that ran before has lost its container.
func (r *Driver) Preflight(ctx context.Context, spec driver.Spec) error {
	if err := validate(spec); err != nil {
		return err
	}
	if err := r.ensureImage(ctx, spec.Image); err != nil {
		return err
	}
	name := ContainerName(spec.SandboxID)
	c, err := r.api(ctx).ContainerInspect(ctx, name)
	switch {
	case cerrdefs.IsNotFound(err) && spec.Ran:
		return removed(spec)
	case cerrdefs.IsNotFound(err):
		r.absent.note(name)
		return nil
	case err != nil:
		return as(provider.PreflightFailed, r.classify("inspect container "+name, err))
	}
	return owned(c, spec)
}

// absentNames remembers the container names Preflight found free, so that
// the Start that follows creates at once instead of looking again: one
// inspect per create. A name is taken back by the first Start that uses
// it; should a container have taken the name meanwhile, the create
// conflicts and Start looks as it would have.
type absentNames struct {
	mu    sync.Mutex
	names map[string]struct{}
}

func (a *absentNames) note(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.names == nil {
		a.names = map[string]struct{}{}
	}
	a.names[name] = struct{}{}
}

// take reports whether name was noted, and forgets it.
func (a *absentNames) take(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.names[name]
	delete(a.names, name)
	return ok
}

func validate(spec driver.Spec) error {
	switch {
	case spec.SandboxID == "":
		return provider.Errorf(provider.PreflightFailed, "the sandbox has no id")
	case spec.Image == "":
		return provider.Errorf(provider.PreflightFailed, "the snapshot names no image: the docker runtime needs one")
	case spec.Network != "" && spec.Network != NetworkHost:
		return provider.Errorf(provider.PreflightFailed, "network %q is not one the docker runtime knows: leave it empty (the isolated bridge) or say %q", spec.Network, NetworkHost)
	}
	seen := map[int]bool{}
	for _, m := range spec.Mappings() {
		for _, p := range []int{m.Host, m.Sandbox} {
			if p <= 0 || p > math.MaxUint16 {
				return provider.Errorf(provider.PreflightFailed, "port %d is not a TCP port", p)
			}
		}
		if seen[m.Sandbox] {
			return provider.Errorf(provider.PreflightFailed, "port %d of the container is published twice", m.Sandbox)
		}
		seen[m.Sandbox] = true
	}
	return nil
}

func (r *Driver) missingImage(image string, err error) error {
	return provider.Errorf(provider.PreflightFailed,
		"image %q is not on the docker engine at %s: build it (docker build -t %s) or load it (docker load); sandplane never pulls: %w",
		image, r.host(), image, err)
}

// owned fails unless c is the container of spec's sandbox and daemon.
func owned(c container.InspectResponse, spec driver.Spec) error {
	var labels map[string]string
	if c.Config != nil {
		labels = c.Config.Labels
	}
	if labels[LabelRoot] == spec.Root && labels[LabelSandbox] == spec.SandboxID {
		return nil
	}
	name := ContainerName(spec.SandboxID)
	return provider.Errorf(provider.PreflightFailed,
		"a container named %s exists that is not this sandbox's (root %q, sandbox %q): remove it (docker rm -f %s)",
		name, labels[LabelRoot], labels[LabelSandbox], name)
}

// Start runs the sandbox's container: the one a previous Start made, if it
// still fits spec (restarted when stopped, returned as is when running), or a
// new one. A container of this sandbox that no longer fits spec (a new port
// after a daemon restart, a changed snapshot) is replaced by one that starts
// from a commit of its filesystem, so a sandbox never loses its files, as a
// Daytona sandbox keeps its disk. On error nothing Start created is left
// behind; a pre-existing container is kept, with its filesystem. An engine
// that has not done it within 5 minutes (startTimeout) fails it.
// preflight_failed, create_failed, unavailable.
func (r *Driver) Start(ctx context.Context, spec driver.Spec) (driver.Handle, error) {
	if err := validate(spec); err != nil {
		return driver.Handle{}, err
	}
	sctx, cancel := r.withTimeout(ctx, startTimeout)
	defer cancel()
	h, err := r.start(sctx, spec)
	if err != nil && sctx.Err() != nil && ctx.Err() == nil {
		return driver.Handle{}, provider.Errorf(provider.Unavailable,
			"the docker engine at %s did not finish starting the container within %s: check that it answers (docker info), then retry: %v",
			r.host(), startTimeout, provider.Message(err))
	}
	return h, err
}

// start is Start within its bound.
func (r *Driver) start(ctx context.Context, spec driver.Spec) (driver.Handle, error) {
	want := r.containerSpec(spec)
	name := ContainerName(spec.SandboxID)
	if err := r.ensureNetwork(ctx, spec.Network); err != nil {
		return driver.Handle{}, err
	}
	if r.absent.take(name) {
		h, err := r.create(ctx, want, spec)
		if !errors.Is(err, errNameTaken) {
			return h, err
		}
	}

	c, err := r.api(ctx).ContainerInspect(ctx, name)
	switch {
	case err == nil:
		if err := owned(c, spec); err != nil {
			return driver.Handle{}, err
		}
		if c.Config.Labels[labelSpec] == want.config.Labels[labelSpec] {
			return r.restart(ctx, c)
		}
		return r.replace(ctx, c, want, spec)
	case !cerrdefs.IsNotFound(err):
		return driver.Handle{}, as(provider.CreateFailed, r.classify("inspect container "+name, err))
	case spec.Ran:
		return driver.Handle{}, removed(spec)
	}
	return r.create(ctx, want, spec)
}

// removed is the error of a start of a sandbox that ran before whose
// container is gone: starting afresh would silently drop its files.
// failed_precondition, wrapping driver.ErrWorkloadRemoved.
func removed(spec driver.Spec) error {
	return provider.Errorf(provider.FailedPrecondition,
		"sandbox %s: its container %s was removed outside sandplane (docker rm, docker system prune), and the sandbox's files with it (%w): delete the sandbox and create a new one",
		spec.SandboxID, ContainerName(spec.SandboxID), driver.ErrWorkloadRemoved)
}

// errNameTaken is create's error when a container has the sandbox's name.
var errNameTaken = errors.New("the container name is taken")

// create makes and starts the sandbox's container; on error it is gone.
// errNameTaken, wrapped: a container of that name exists.
func (r *Driver) create(ctx context.Context, want containerSpec, spec driver.Spec) (driver.Handle, error) {
	name := ContainerName(spec.SandboxID)
	created, err := r.api(ctx).ContainerCreate(ctx, want.config, want.host, nil, nil, name)
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return driver.Handle{}, provider.Errorf(provider.CreateFailed, "create container %s: %w: %v", name, errNameTaken, err)
		}
		if cerrdefs.IsNotFound(err) {
			// The only thing create looks up is the image.
			return driver.Handle{}, r.missingImage(want.config.Image, err)
		}
		return driver.Handle{}, as(provider.CreateFailed, r.classify("create container "+name, err))
	}
	if err := r.startContainer(ctx, created.ID, want.host); err != nil {
		err = as(provider.CreateFailed, r.classify("start container "+name, err))
		return driver.Handle{}, r.discard(ctx, created.ID, err)
	}
	return handle(created.ID), nil
}

// replace swaps old, the sandbox's container that no longer fits want, for
// a new one made from a commit of old's filesystem. old steps aside under
// another name until its successor runs, and is put back if it does not.
func (r *Driver) replace(ctx context.Context, old container.InspectResponse, want containerSpec, spec driver.Spec) (driver.Handle, error) {
	name := ContainerName(spec.SandboxID)
	fail := func(what string, err error) (driver.Handle, error) {
		return driver.Handle{}, as(provider.CreateFailed, r.classify(what+" "+name+" to replace it", err))
	}
	if old.State != nil && old.State.Running {
		secs := 0
		if err := r.api(ctx).ContainerStop(ctx, old.ID, container.StopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
			return fail("stop container", err)
		}
	}
	// Labelled with the root, so that Sweep finds the image should the
	// daemon die before a container uses it.
	committed, err := r.api(ctx).ContainerCommit(ctx, old.ID, container.CommitOptions{
		Config: &container.Config{Labels: map[string]string{labelCarried: spec.SandboxID, LabelRoot: spec.Root}},
	})
	if err != nil {
		return fail("commit the filesystem of container", err)
	}
	afterCommit()
	aside := name + "-replaced"
	if err := r.api(ctx).ContainerRemove(ctx, aside, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		r.dropImage(ctx, committed.ID)
		return fail("remove leftover container "+aside+" before replacing", err)
	}
	if err := r.api(ctx).ContainerRename(ctx, old.ID, aside); err != nil {
		r.dropImage(ctx, committed.ID)
		return fail("rename container", err)
	}
	want.config.Image = committed.ID
	h, err := r.create(ctx, want, spec)
	if err != nil {
		ctx, cancel := r.detached(ctx, cleanupTimeout)
		defer cancel()
		if rerr := r.api(ctx).ContainerRename(ctx, old.ID, name); rerr != nil {
			err = fmt.Errorf("%w; the previous container is left as %s: %v", err, aside, rerr)
		}
		r.dropImage(ctx, committed.ID)
		return driver.Handle{}, err
	}
	// Should this fail, the old container is an orphan the daemon's next
	// start removes. An image it was made from by an earlier replace is a
	// parent of the new commit now, and goes when that does.
	_ = r.api(ctx).ContainerRemove(ctx, old.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	r.dropCarried(ctx, spec, committed.ID)
	return h, nil
}

// dropCarried removes, best effort, the images earlier replaces of spec's
// sandbox committed that no container uses, but keep: the commit of a
// daemon killed mid-commit, which the engine finishes on its own, after the
// restarted daemon's Sweep may have looked. The engine refuses to remove
// one a container still uses, or the new commit's parent.
func (r *Driver) dropCarried(ctx context.Context, spec driver.Spec, keep string) {
	list, err := r.api(ctx).ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelRoot+"="+spec.Root), filters.Arg("label", labelCarried+"="+spec.SandboxID))})
	if err != nil {
		return
	}
	for _, img := range list {
		if img.ID != keep && img.Labels[LabelRoot] == spec.Root && img.Labels[labelCarried] == spec.SandboxID {
			_, _ = r.api(ctx).ImageRemove(ctx, img.ID, image.RemoveOptions{PruneChildren: true})
		}
	}
}

// afterCommit runs between a replace's commit and what follows it; tests
// end the goroutine there, as a crash would.
var afterCommit = func() {}

// dropImage removes an image Start committed, best effort: a container
// still using it keeps it.
func (r *Driver) dropImage(ctx context.Context, id string) {
	ctx, cancel := r.detached(ctx, cleanupTimeout)
	defer cancel()
	_, _ = r.api(ctx).ImageRemove(ctx, id, image.RemoveOptions{PruneChildren: true})
}

func (r *Driver) restart(ctx context.Context, c container.InspectResponse) (driver.Handle, error) {
	if c.State != nil && c.State.Running {
		return handle(c.ID), nil
	}
	if err := r.startContainer(ctx, c.ID, c.HostConfig); err != nil {
		return driver.Handle{}, as(provider.CreateFailed, r.classify("restart container "+strings.TrimPrefix(c.Name, "/"), err))
	}
	return handle(c.ID), nil
}

// startContainer starts container id, whose host config is host. The
// engine finds the sandbox network by name only when the container
// starts: one removed since it was checked is made again, and the start
// tried once more.
func (r *Driver) startContainer(ctx context.Context, id string, host *container.HostConfig) error {
	err := r.api(ctx).ContainerStart(ctx, id, container.StartOptions{})
	if err == nil || !cerrdefs.IsNotFound(err) || host == nil || !r.forgetNetwork(host) {
		return err
	}
	if nerr := r.ensureNetwork(ctx, ""); nerr != nil {
		return nerr
	}
	return r.api(ctx).ContainerStart(ctx, id, container.StartOptions{})
}

// discard force-removes a container Start made and returns cause, noting a
// failed removal in it.
func (r *Driver) discard(ctx context.Context, id string, cause error) error {
	ctx, cancel := r.detached(ctx, cleanupTimeout)
	defer cancel()
	err := r.api(ctx).ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err == nil || cerrdefs.IsNotFound(err) {
		return cause
	}
	return &provider.Error{
		Code:    provider.Code(cause),
		Message: fmt.Sprintf("%s; the container %.12s could not be removed (Orphans will list it): %v", provider.Message(cause), id, err),
		Err:     cause,
	}
}

// detached is ctx without its cancellation, ending after d instead.
func (r *Driver) detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return r.withTimeout(context.WithoutCancel(ctx), d)
}

// withTimeout is context.WithTimeout on the runtime's clock.
func (r *Driver) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(ctx, r.clk, d)
}

func handle(id string) driver.Handle {
	return driver.Handle{Runtime: provider.RuntimeDocker, ContainerID: id}
}

// Status inspects the container. A container that no longer exists is not
// running, with reason driver.ReasonWorkloadRemoved; one that ran when its
// engine went away, and is stopped now, ended with ReasonEngineGone.
// unavailable.
func (r *Driver) Status(ctx context.Context, h driver.Handle) (driver.Status, error) {
	if h.ContainerID == "" {
		return driver.Status{Exit: driver.Exit{Reason: ReasonGone}}, nil
	}
	c, err := r.api(ctx).ContainerInspect(ctx, h.ContainerID)
	if cerrdefs.IsNotFound(err) {
		return driver.Status{Exit: driver.Exit{Reason: ReasonGone}}, nil
	}
	if err != nil {
		return driver.Status{}, as(provider.Unavailable, r.classify("inspect container", err))
	}
	if c.State == nil {
		return driver.Status{}, provider.Errorf(provider.Internal, "inspect container %.12s: the engine reported no state", h.ContainerID)
	}
	if c.State.Running {
		r.lost.forget(h.ContainerID) // the engine came back with it running
		return driver.Status{Running: true}, nil
	}
	exit := exitOf(c.State)
	if exit.Reason != ReasonGone && r.lost.has(h.ContainerID) {
		exit = driver.Exit{Reason: ReasonEngineGone}
	}
	return driver.Status{Exit: exit}, nil
}

// exitOf says how a container that does not run ended.
func exitOf(s *container.State) driver.Exit {
	switch s.Status {
	case container.StateCreated:
		return driver.Exit{Reason: ReasonNotStarted}
	case container.StateRemoving:
		// docker rm -f kills a running container once its removal has
		// begun: the kill is the removal's, and the files go with it.
		return driver.Exit{Reason: ReasonGone}
	}
	if s.OOMKilled {
		return killedBy(syscall.SIGKILL)
	}
	return exitOfCode(s.ExitCode)
}

// exitOfCode reads an exit code as a shell does: 128+S means the process
// died of signal S. The init process and the engine both report a signalled
// workload that way, so the container cannot tell it apart from a workload
// that exited with such a code itself.
func exitOfCode(code int) driver.Exit {
	if code > 128 && code <= 128+64 {
		return killedBy(syscall.Signal(code - 128))
	}
	return driver.Exit{Reason: "exited: code " + strconv.Itoa(code), Code: &code}
}

// killedBy names the signal as the native runtime does, so that errorReason
// reads the same on both.
func killedBy(sig syscall.Signal) driver.Exit {
	name := unix.SignalName(sig)
	if name == "" {
		name = strconv.Itoa(int(sig))
	}
	return driver.Exit{Reason: "killed: signal " + name}
}

// Wait blocks until the container stops running and reports how it ended; a
// container that does not exist (any more) gives "container gone". It works
// for containers adopted after a restart. Every waiter shares one
// subscription to the Engine's event stream, and inspects its container
// only when an event of it arrives or the stream (re)connects, so a running
// container costs the engine no request. A container that ended because the
// engine went away ends with ReasonEngineGone, whether Wait saw it end or
// a Wait after the engine came back found it ended. unavailable, or ctx's
// error.
func (r *Driver) Wait(ctx context.Context, h driver.Handle) (driver.Exit, error) {
	if h.ContainerID == "" {
		return driver.Exit{Reason: ReasonGone}, nil
	}
	// Subscribed before the first look, so that an end after it is heard.
	maybeEnded, cancel := r.exits.subscribe(h.ContainerID)
	defer cancel()
	seenRunning := false
	var breaks uint64
	for {
		before := r.exits.breaks()
		st, err := r.Status(ctx, h)
		switch {
		case ctx.Err() != nil:
			return driver.Exit{}, ctx.Err()
		case provider.Code(err) == provider.Unavailable:
			// Waited for, so it ran when last seen: should it have
			// ended when the engine is back, the engine ended it.
			r.lost.note(h.ContainerID)
			return driver.Exit{}, err
		case err != nil:
			return driver.Exit{}, err
		case !st.Running:
			return r.ended(ctx, h.ContainerID, st.Exit, seenRunning && before != breaks)
		}
		seenRunning, breaks = true, before
		select {
		case <-ctx.Done():
			return driver.Exit{}, ctx.Err()
		case <-maybeEnded:
		}
	}
}

// ended is Wait's answer for container id, found ended with exit (which
// Status has given ReasonEngineGone if the engine's going away ended it, as
// far as it knew): missed says the event stream broke since Wait saw it
// running, so it may have ended with the engine too. While the engine is
// going away how it ended is not known yet, and unavailable; the next
// Wait, once the engine is back, says it.
func (r *Driver) ended(ctx context.Context, id string, exit driver.Exit, missed bool) (driver.Exit, error) {
	switch {
	case exit.Reason == ReasonGone || exit.Reason == ReasonEngineGone:
	case missed:
		r.lost.note(id)
		exit = driver.Exit{Reason: ReasonEngineGone}
	case !r.answersAfresh(ctx):
		r.lost.note(id)
		return driver.Exit{}, provider.Errorf(provider.Unavailable,
			"container %.12s: the docker engine at %s is going away and stopped it: start dockerd (or set DOCKER_HOST), then retry; a sandbox keeps its files",
			id, r.host())
	}
	return exit, nil
}

// answersAfresh reports whether the engine accepts a new connection. One
// that is shutting down closes its listener first, then stops its
// containers, while it still answers on the connections already open, the
// event stream's among them: a container that died while no new connection
// is accepted was stopped by the engine's going away, not by its workload
// or by a docker stop.
func (r *Driver) answersAfresh(ctx context.Context) bool {
	ctx, cancel := r.withTimeout(ctx, pingTimeout)
	defer cancel()
	// Close only drops the client's idle connections; it stays usable.
	_ = r.cli.Close()
	_, err := r.cli.Ping(ctx)
	return !client.IsErrConnectionFailed(err)
}

// pingTimeout bounds answersAfresh's ping.
const pingTimeout = 5 * time.Second

// lostContainers are the containers that ran when their engine stopped
// answering (a Wait was waiting for them), until they are seen running
// again or removed: one found stopped meanwhile was stopped by the engine's
// going away, and Status says so for as long as it stays stopped.
type lostContainers struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (l *lostContainers) note(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil {
		l.ids = map[string]struct{}{}
	}
	l.ids[id] = struct{}{}
}

func (l *lostContainers) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.ids[id]
	return ok
}

func (l *lostContainers) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.ids, id)
}

// Stop stops the container (SIGTERM, then SIGKILL after grace, rounded up to
// whole seconds as the engine counts them) and keeps it for Start. A stopped
// or missing container is not an error. unavailable, and anything else means
// the container may still run.
func (r *Driver) Stop(ctx context.Context, h driver.Handle, grace time.Duration) error {
	if h.ContainerID == "" {
		return nil
	}
	secs := int(math.Ceil(max(grace, 0).Seconds()))
	err := r.api(ctx).ContainerStop(ctx, h.ContainerID, container.StopOptions{Timeout: &secs})
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	return r.classify("stop container", err)
}

// Remove force-removes the container and its anonymous volumes, and the
// image Start committed it from, if any. A missing container is not an
// error. unavailable.
func (r *Driver) Remove(ctx context.Context, h driver.Handle) error {
	if h.ContainerID == "" {
		return nil
	}
	c, inspectErr := r.api(ctx).ContainerInspect(ctx, h.ContainerID)
	err := r.api(ctx).ContainerRemove(ctx, h.ContainerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.classify("remove container", err)
	}
	r.lost.forget(h.ContainerID)
	if inspectErr == nil && c.Config != nil && c.Config.Labels[labelCarried] != "" {
		r.dropImage(ctx, c.Image)
	}
	return nil
}

// Logs returns the newest MiB of what the container wrote to each of stdout
// and stderr; dir is not used. A missing container has empty logs, as a
// missing log file does natively. unavailable.
func (r *Driver) Logs(ctx context.Context, h driver.Handle, dir string) (stdout, stderr []byte, err error) {
	if h.ContainerID == "" {
		return []byte{}, []byte{}, nil
	}
	rc, err := r.api(ctx).ContainerLogs(ctx, h.ContainerID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if cerrdefs.IsNotFound(err) {
		return []byte{}, []byte{}, nil
	}
	if err != nil {
		return nil, nil, r.classify("read container logs", err)
	}
	defer rc.Close()
	out, errOut := &tailBuffer{max: maxLogBytes}, &tailBuffer{max: maxLogBytes}
	if _, err := stdcopy.StdCopy(out, errOut, rc); err != nil {
		return nil, nil, r.classify("read container logs", err)
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	// Trim only once twice the cap is held, so copying stays linear.
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	if len(t.buf) > t.max {
		return t.buf[len(t.buf)-t.max:]
	}
	if t.buf == nil {
		return []byte{}
	}
	return t.buf
}

// Orphans returns every container labelled with root, running or not, whose
// id is not the ContainerID of a handle in known. unavailable.
func (r *Driver) Orphans(ctx context.Context, root string, known []driver.Handle) ([]driver.Handle, error) {
	list, err := r.api(ctx).ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelRoot+"="+root)),
	})
	if err != nil {
		return nil, r.classify("list containers", err)
	}
	ids := make(map[string]bool, len(known))
	for _, h := range known {
		if h.ContainerID != "" {
			ids[h.ContainerID] = true
		}
	}
	var orphans []driver.Handle
	for _, c := range list {
		// The filter matches label values exactly; checking again keeps a
		// misbehaving engine from handing us another daemon's containers.
		if c.Labels[LabelRoot] == root && !ids[c.ID] {
			orphans = append(orphans, handle(c.ID))
		}
	}
	return orphans, nil
}

// Probe reports whether the container's workload accepts connections on the
// published port. A successful connect does not prove it: the engine's port
// proxy accepts on the host side first, then hangs up when nothing in the
// container accepts. So Probe connects and asks for an HTTP answer (the
// toolbox's GET /api/info): any byte back means the workload holds the
// connection, a hang-up that it does not, and both come as soon as they
// happen. A workload that speaks something else keeps silent: a connection
// still open after a short window, on the runtime's clock, counts as held.
// It asks the engine nothing: the launcher's poll checks that the
// container still runs. unavailable, or ctx's error.
func (r *Driver) Probe(ctx context.Context, h driver.Handle, addr netip.AddrPort) (bool, error) {
	dctx, cancel := r.withTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", addr.String())
	if err != nil {
		return false, ctx.Err()
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, probeRequest); err != nil {
		return false, ctx.Err()
	}
	// A read deadline in the past ends the read at once; setting it from a
	// clock timer keeps the wait on the runtime's clock.
	expire := func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) }
	t := r.clk.AfterFunc(probeWindow, expire)
	defer t.Stop()
	stop := context.AfterFunc(ctx, expire)
	defer stop()
	var b [1]byte
	n, err := conn.Read(b[:])
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	var ne net.Error
	return n > 0 || errors.As(err, &ne) && ne.Timeout(), nil
}

// probeRequest is what Probe asks: the toolbox answers it at once, as any
// HTTP server answers something.
const probeRequest = "GET /api/info HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
