package backend

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	dockervolume "github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/google/uuid"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/local/driver/docker"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator/internal/egress"
)

// Names of what the docker backend makes on the engine, each labelled
// LabelSim so that it can be told from anything else there.
const (
	LabelSim = "io.sandplane.simulator"
	// LabelSimOwner names the simulator process that made a container
	// (OwnerLabel), so that one that died without removing it (kill -9)
	// leaves nothing the next one cannot sweep.
	LabelSimOwner = "io.sandplane.simulator.owner"
	// LabelSimSandbox holds the id of the simulator sandbox a container
	// runs; its name holds the workload id (see workload.id).
	LabelSimSandbox = "io.sandplane.simulator.sandbox"
	// BlockedNetwork is the internal network (no route out, no traffic
	// between its containers) a sandbox with networkBlockAll is moved to.
	BlockedNetwork = "sandplane-sim-blocked"
	// LinkNetworkPrefix + the owner's id is the internal network an owner
	// shares with the sandboxes linked to it, where it answers to its name.
	LinkNetworkPrefix = "sandplane-sim-link-"
	// volumePrefix + the volume's id is a volume's engine volume.
	volumePrefix = "sandplane-sim-vol-"
	// snapshotRepo holds the images of snapshots.
	snapshotRepo = "sandplane-sim/snapshot"
	// toolboxDir is where a snapshot image carries the toolbox.
	toolboxDir = "/.sandplane"
	// labelEntrypoint holds, on a snapshot image, the JSON argv of the
	// sandbox's entrypoint: the snapshot's own, or the ENTRYPOINT and CMD
	// of the image it was made from, which the toolbox's took the place of.
	labelEntrypoint = "io.sandplane.simulator.entrypoint"
)

// dockerExt is the docker backend's state beyond its workloads.
type dockerExt struct {
	b   *runtimeBackend
	cli *client.Client
	// instance tells this backend's images from those of another
	// simulator with the same seed (see tagOf).
	instance string
	// owner is this simulator's LabelSimOwner.
	owner string

	mu sync.Mutex
	// home holds, per sandbox, the networks its container was on before
	// the simulator moved it, to move it back when the block is lifted.
	home map[string][]string
	// linked holds, per sandbox, the link network it is on.
	linked map[string]string
	// limited holds the sandboxes whose container egress.Limit confines.
	limited map[string]bool
	// forks holds, per fork, the image its container is made from (fork.go).
	forks map[string]string
	// made holds the images, volumes and networks this backend made, which
	// Close removes: the simulator's state, and with it what they were
	// for, ends with it.
	images, volumes, networks map[string]bool
	// stopSweeps ends the sweeps after the first (sweepOften).
	stopSweeps func()
}

// dockerBackend is the runtime backend on docker, with every capability.
type dockerBackend struct{ *runtimeBackend }

var (
	_ ImageBackend   = dockerBackend{}
	_ VolumeBackend  = dockerBackend{}
	_ NetworkBackend = dockerBackend{}
	_ ResizeBackend  = dockerBackend{}
)

func newDockerBackend(b *runtimeBackend) Backend {
	b.ext = &dockerExt{b: b, cli: b.cfg.Docker, instance: uuid.NewString()[:8], owner: OwnerLabel(),
		home: map[string][]string{}, linked: map[string]string{}, limited: map[string]bool{}, forks: map[string]string{},
		images: map[string]bool{}, volumes: map[string]bool{}, networks: map[string]bool{}}
	ctx, cancel := clock.WithTimeout(context.Background(), b.cfg.Clock, sweepTimeout)
	defer cancel()
	b.ext.sweep(ctx)
	b.ext.stopSweeps = b.ext.sweepOften()
	return dockerBackend{b}
}

const (
	// sweepTimeout bounds one sweep.
	sweepTimeout = 30 * time.Second
	// sweepEvery is how often a backend sweeps again after its first: a
	// container that a dead simulator's create was still making when it
	// died (the engine finishes a create its client left) appears only
	// after that first sweep.
	sweepEvery = 10 * time.Second
)

// sweepOften sweeps every sweepEvery, on the backend's clock, until the
// function it returns is called; that waits for a sweep under way.
func (e *dockerExt) sweepOften() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t := e.b.cfg.Clock.NewTicker(sweepEvery)
	go func() {
		defer close(done)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				sctx, scancel := clock.WithTimeout(ctx, e.b.cfg.Clock, sweepTimeout)
				e.sweep(sctx)
				scancel()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// sweep removes the containers that simulators of this machine left
// behind when they died without removing them (kill -9): those whose
// owner label names a simulator process that is gone. Its state went with
// it, so nothing could ever find them again.
func (e *dockerExt) sweep(ctx context.Context) {
	key := docker.LabelPrefix + LabelSimOwner
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", key))})
	if err != nil {
		e.b.cfg.Logger.Warn("list the containers of simulators that are gone", "err", err)
		return
	}
	boot := bootID()
	for _, c := range list {
		if !ownerGone(c.Labels[key], boot) {
			continue
		}
		err := e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			e.b.cfg.Logger.Warn("remove the container of a simulator that is gone", "container", c.ID, "err", err)
			continue
		}
		e.b.cfg.Logger.Info("removed the container of a simulator that is gone", "container", c.ID)
	}
}

// note records something the backend made, for Close.
func (e *dockerExt) note(set map[string]bool, name string, made bool) {
	e.mu.Lock()
	if made {
		set[name] = true
	} else {
		delete(set, name)
	}
	e.mu.Unlock()
}

// Close removes the workloads, then the images, volumes and networks the
// backend made.
func (d dockerBackend) Close() error {
	d.ext.stopSweeps()
	err := d.runtimeBackend.Close()
	e := d.ext
	ctx := context.Background()
	e.mu.Lock()
	images, volumes, networks := keys(e.images), keys(e.volumes), keys(e.networks)
	e.mu.Unlock()
	for _, n := range networks {
		_ = e.cli.NetworkRemove(ctx, n)
	}
	for _, v := range volumes {
		_ = e.cli.VolumeRemove(ctx, v, true)
	}
	for _, ref := range images {
		_, _ = e.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	}
	return err
}

// withLabel is a copy of labels with k set to v.
func withLabel(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for lk, lv := range labels {
		out[lk] = lv
	}
	out[k] = v
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// tagOf names what the engine holds for id (an image tag, a probe): id's
// prefix and this backend's instance, since seeded simulators repeat ids.
func (e *dockerExt) tagOf(id string) string { return shortID(id) + "-" + e.instance }

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ContainerIP is the default WorkloadAddr of a docker backend: the running
// container's IP on its network, which the host reaches directly on Linux.
func ContainerIP(cli *client.Client) func(context.Context, driver.Handle) (netip.Addr, error) {
	return func(ctx context.Context, h driver.Handle) (netip.Addr, error) {
		c, err := cli.ContainerInspect(ctx, h.ContainerID)
		if err != nil {
			return netip.Addr{}, err
		}
		if c.State == nil || !c.State.Running || c.NetworkSettings == nil {
			return netip.Addr{}, errors.New("the container is not running")
		}
		for _, n := range c.NetworkSettings.Networks {
			if ip, err := netip.ParseAddr(n.IPAddress); err == nil {
				return ip, nil
			}
		}
		return netip.Addr{}, errors.New("the container has no IP address: is it on a network?")
	}
}

// PrepareImage makes a snapshot's image: imageName as the engine has it
// (pulled when missing, which needs a registry the engine reaches) or
// built from the Dockerfile, then derived into an image that also carries
// the toolbox and starts it, as Daytona's runner injects its daemon.
func (d dockerBackend) PrepareImage(ctx context.Context, spec ImageSpec) (string, string, error) {
	e := d.ext
	var logs strings.Builder
	var w io.Writer = &logs
	if spec.Logs != nil {
		w = io.MultiWriter(&logs, spec.Logs)
	}
	base := spec.ImageName
	if spec.Dockerfile != "" {
		base = "sandplane-sim/build:" + e.tagOf(spec.SnapshotID)
		if err := e.build(ctx, base, map[string]string{"Dockerfile": spec.Dockerfile}, nil, w); err != nil {
			return "", logs.String(), fmt.Errorf("build the image: %w", err)
		}
		// The derived image keeps it as a parent; the tag goes.
		defer func() { _, _ = e.cli.ImageRemove(context.WithoutCancel(ctx), base, image.RemoveOptions{}) }()
	} else if err := e.present(ctx, base, w); err != nil {
		return "", logs.String(), err
	}
	ref := snapshotRepo + ":" + e.tagOf(spec.SnapshotID)
	dockerfile, err := e.derived(ctx, base, spec.SnapshotID)
	if err != nil {
		return "", logs.String(), err
	}
	labels, err := e.entrypointLabel(ctx, base, spec.Entrypoint)
	if err != nil {
		return "", logs.String(), err
	}
	fmt.Fprintf(w, "adding the toolbox to %s\n", base)
	if err := e.build(ctx, ref, map[string]string{"Dockerfile": dockerfile}, labels, w); err != nil {
		return "", logs.String(), fmt.Errorf("add the toolbox to image %s: %w", base, err)
	}
	e.note(e.images, ref, true)
	return ref, logs.String(), nil
}

// present makes sure the engine has ref, pulling it when it does not.
func (e *dockerExt) present(ctx context.Context, ref string, logs io.Writer) error {
	if _, err := e.cli.ImageInspect(ctx, ref); err == nil {
		fmt.Fprintf(logs, "image %s is on the engine\n", ref)
		return nil
	}
	rc, err := e.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err == nil {
		err = jsonmessage.DisplayJSONMessagesStream(rc, logs, 0, false, nil)
		rc.Close()
	}
	if err != nil {
		return fmt.Errorf("image %s is not on the docker engine and could not be pulled (%v): build it (docker build -t %s) or load it (docker load) first", ref, err, ref)
	}
	return nil
}

// derived is the Dockerfile of a snapshot image: base with the toolbox
// image's files under toolboxDir, its environment (PATH aside), working
// directory and entrypoint.
func (e *dockerExt) derived(ctx context.Context, base, snapshotID string) (string, error) {
	tb := e.b.cfg.Image
	// The toolbox image may still have to be built: the runtime's preflight
	// runs its image source.
	probe := driver.Spec{SandboxID: "image-probe-" + e.tagOf(snapshotID), Root: e.b.cfg.Root, Image: tb, Port: 1}
	if err := e.b.cfg.Runtime.Preflight(ctx, probe); err != nil {
		return "", fmt.Errorf("the toolbox image %s: %w", tb, err)
	}
	info, err := e.cli.ImageInspect(ctx, tb)
	if err != nil {
		return "", fmt.Errorf("inspect the toolbox image %s: %w", tb, err)
	}
	if info.Config == nil || len(info.Config.Entrypoint) == 0 {
		return "", fmt.Errorf("the toolbox image %s has no entrypoint", tb)
	}
	ep := append([]string(nil), info.Config.Entrypoint...)
	if strings.HasPrefix(ep[0], "/") {
		ep[0] = toolboxDir + ep[0]
	}
	epJSON, _ := json.Marshal(ep)
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s AS sandplane-toolbox\nFROM %s\nCOPY --from=sandplane-toolbox / %s/\n", tb, base, toolboxDir)
	for _, kv := range info.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" {
			continue
		}
		q, _ := json.Marshal(v)
		fmt.Fprintf(&b, "ENV %s=%s\n", k, q)
	}
	wd := info.Config.WorkingDir
	if wd == "" {
		wd = NativeHome
	}
	fmt.Fprintf(&b, "WORKDIR %s\nENTRYPOINT %s\nCMD []\nLABEL %s=%q\n", wd, epJSON, LabelSim, "snapshot")
	return b.String(), nil
}

// entrypointLabel is the label of a snapshot image made from base that
// names its entrypoint: own when the snapshot has one, else base's
// ENTRYPOINT and CMD, which the derived image replaces by the toolbox's.
func (e *dockerExt) entrypointLabel(ctx context.Context, base string, own []string) (map[string]string, error) {
	ep := own
	if len(ep) == 0 {
		var err error
		if ep, err = e.imageCommand(ctx, base); err != nil {
			return nil, err
		}
	}
	if len(ep) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(ep)
	if err != nil {
		return nil, err
	}
	return map[string]string{labelEntrypoint: string(b)}, nil
}

// imageCommand is what ref runs, its ENTRYPOINT and CMD, or nil for an
// image that runs the toolbox itself (the simulator's own image, or one
// made from it), which is the toolbox's to run, not its entrypoint's.
func (e *dockerExt) imageCommand(ctx context.Context, ref string) ([]string, error) {
	info, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if info.Config == nil {
		return nil, nil
	}
	tb, err := e.cli.ImageInspect(ctx, e.b.cfg.Image)
	if err == nil && tb.Config != nil && slices.Equal(tb.Config.Entrypoint, info.Config.Entrypoint) {
		return nil, nil
	}
	return append(append([]string(nil), info.Config.Entrypoint...), info.Config.Cmd...), nil
}

// imageEntrypoint is the entrypoint a snapshot image names
// (labelEntrypoint), nil when it names none.
func (e *dockerExt) imageEntrypoint(ctx context.Context, ref string) ([]string, error) {
	info, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if info.Config == nil || info.Config.Labels[labelEntrypoint] == "" {
		return nil, nil
	}
	var ep []string
	if err := json.Unmarshal([]byte(info.Config.Labels[labelEntrypoint]), &ep); err != nil {
		return nil, fmt.Errorf("image %s: label %s: %w", ref, labelEntrypoint, err)
	}
	return ep, nil
}

// build runs a classic build of files (a Dockerfile, no other context) as
// tag, with labels beside the simulator's own, and returns its output.
func (e *dockerExt) build(ctx context.Context, tag string, files, labels map[string]string, logs io.Writer) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := e.cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, Labels: withLabel(labels, LabelSim, "image"),
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// The engine's JSON messages as the docker CLI prints them, each
	// step as it runs.
	return jsonmessage.DisplayJSONMessagesStream(resp.Body, logs, 0, false, nil)
}

// RemoveImage deletes a snapshot image; a container still using it keeps
// it.
func (d dockerBackend) RemoveImage(ctx context.Context, ref string) error {
	_, err := d.ext.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return err
	}
	if err == nil {
		d.ext.note(d.ext.images, ref, false)
	}
	return nil
}

// CommitSandbox saves the sandbox's container, running or stopped, as a
// snapshot image; it keeps the container's entrypoint, so sandboxes from
// it start the toolbox as the sandbox did.
func (d dockerBackend) CommitSandbox(ctx context.Context, sandboxID, snapshotID string) (string, error) {
	ref := snapshotRepo + ":" + d.ext.tagOf(snapshotID)
	_, err := d.ext.cli.ContainerCommit(ctx, d.ext.containerName(sandboxID), container.CommitOptions{
		Reference: ref,
		Config:    &container.Config{Labels: map[string]string{LabelSim: "snapshot"}},
	})
	if err != nil {
		return "", fmt.Errorf("commit the sandbox's container: %w", err)
	}
	d.ext.note(d.ext.images, ref, true)
	return ref, nil
}

func VolumeName(volumeID string) string { return volumePrefix + volumeID }

func (d dockerBackend) CreateVolume(ctx context.Context, volumeID string) error {
	_, err := d.ext.cli.VolumeCreate(ctx, dockervolume.CreateOptions{Name: VolumeName(volumeID), Labels: map[string]string{LabelSim: "volume"}})
	if err == nil {
		d.ext.note(d.ext.volumes, VolumeName(volumeID), true)
	}
	return err
}

func (d dockerBackend) RemoveVolume(ctx context.Context, volumeID string) error {
	err := d.ext.cli.VolumeRemove(ctx, VolumeName(volumeID), true)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	d.ext.note(d.ext.volumes, VolumeName(volumeID), false)
	return nil
}

func (dockerBackend) VolumeMountNote() string {
	return "a volume is a docker volume (" + volumePrefix + "<id>) mounted at its mountPath"
}

// prepare labels the workload's container with this simulator (sweep),
// mounts its volumes, runs its snapshot's image, and puts a container that
// the simulator moved (blocked, linked) back on its own networks, so that
// the runtime's readiness check reaches it through the published port.
func (e *dockerExt) prepare(ctx context.Context, spec *driver.Spec, w Workload) error {
	if e.owner != "" {
		spec.Labels[LabelSimOwner] = e.owner
	}
	if w.Image != "" {
		spec.Image = w.Image
	}
	if ref := e.forkImage(w.SandboxID); ref != "" {
		spec.Image = ref
	}
	for _, m := range w.Volumes {
		spec.Mounts = append(spec.Mounts, driver.Mount{Volume: VolumeName(m.VolumeID), Subpath: m.Subpath, Target: m.MountPath})
	}
	return e.restoreHome(ctx, w.SandboxID)
}

// started applies the limits, the link and the network settings to the
// running container. What of the settings it cannot enforce is logged:
// nobody asked for them in this request.
func (e *dockerExt) started(ctx context.Context, w Workload, _ driver.Handle) error {
	if err := e.resize(ctx, w.SandboxID, w.CPU, w.Memory); err != nil {
		return err
	}
	if w.Link != nil {
		if err := e.link(ctx, w.SandboxID, *w.Link); err != nil {
			return err
		}
	}
	note, err := e.applyNetwork(ctx, w.SandboxID, w.Network)
	if note != "" {
		e.b.cfg.Logger.Warn(note, "sandbox", w.SandboxID)
	}
	return err
}

// removed deletes the link network a sandbox owned, the one it was
// linked on once nothing is left on it, and the image a fork was made from.
func (e *dockerExt) removed(ctx context.Context, sandboxID string) {
	e.dropFork(ctx, sandboxID)
	e.mu.Lock()
	link := e.linked[sandboxID]
	delete(e.home, sandboxID)
	delete(e.linked, sandboxID)
	delete(e.limited, sandboxID)
	e.mu.Unlock()
	own := LinkNetworkPrefix + sandboxID
	e.dropNetwork(ctx, own, true)
	if link != "" && link != own {
		// A follower removed with its owner (the delete cascades) may still
		// have been on the owner's network when the owner's removal tried
		// to drop it: the last one out drops it.
		e.dropNetwork(ctx, link, false)
	}
}

// dropNetwork removes network name, disconnecting what is on it when force
// is set, and leaving it alone when not and something still is.
func (e *dockerExt) dropNetwork(ctx context.Context, name string, force bool) {
	n, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return
	}
	if len(n.Containers) > 0 && !force {
		return
	}
	for id := range n.Containers {
		_ = e.cli.NetworkDisconnect(ctx, name, id, true)
	}
	if e.cli.NetworkRemove(ctx, name) == nil {
		e.note(e.networks, name, false)
	}
}

// Resize sets the running container's CPU and memory limits.
func (d dockerBackend) Resize(ctx context.Context, sandboxID string, cpu, memoryGiB int) error {
	return d.ext.resize(ctx, sandboxID, cpu, memoryGiB)
}

func (e *dockerExt) resize(ctx context.Context, sandboxID string, cpu, memoryGiB int) error {
	var r container.Resources
	if cpu > 0 {
		r.NanoCPUs = int64(cpu) * 1e9
	}
	if memoryGiB > 0 {
		r.Memory = int64(memoryGiB) << 30
		r.MemorySwap = r.Memory
	}
	if r.NanoCPUs == 0 && r.Memory == 0 {
		return nil
	}
	if _, err := e.cli.ContainerUpdate(ctx, e.containerName(sandboxID), container.UpdateConfig{Resources: r}); err != nil {
		return fmt.Errorf("limit the container to %d CPU and %d GiB: %w", cpu, memoryGiB, err)
	}
	return nil
}

// ApplyNetwork moves a running container onto or off the blocked network,
// and limits what it reaches to its allow list.
func (d dockerBackend) ApplyNetwork(ctx context.Context, sandboxID string, p NetworkPolicy) (string, error) {
	return d.ext.applyNetwork(ctx, sandboxID, p)
}

// applyNetwork enforces networkBlockAll: the container sends only over
// loopback and in answer (egress.Limit with nothing allowed), leaves every
// network but the simulator's internal ones (the link network stays: its
// members have no route out either) and joins BlockedNetwork, whose address
// the simulator's proxy still reaches. Otherwise networkAllowList limits what
// the container may reach (limitEgress), and then it is back on its own
// networks: in that order, so that a block lifted under a list never
// leaves it open meanwhile. The note says why the list is not enforced,
// if it is not.
func (e *dockerExt) applyNetwork(ctx context.Context, sandboxID string, p NetworkPolicy) (string, error) {
	if !p.BlockAll {
		why, err := e.limitEgress(ctx, sandboxID, p.AllowList != "", allowPrefixes(p.AllowList))
		if err != nil {
			return "", err
		}
		note := ""
		if why != "" {
			note = "networkAllowList is recorded but not enforced: " + why
		}
		return note, e.restoreHome(ctx, sandboxID)
	}
	// The block cuts the host's own addresses too, which the blocked
	// network still routes to, but not the link network; where the rules
	// cannot be set, the network alone holds against everything beyond
	// this machine.
	if _, err := e.limitEgress(ctx, sandboxID, true, e.linkSubnets(ctx, sandboxID)); err != nil {
		return "", err
	}
	name := e.containerName(sandboxID)
	c, err := e.cli.ContainerInspect(ctx, name)
	if err != nil {
		return "", fmt.Errorf("inspect the sandbox's container: %w", err)
	}
	if err := e.ensureNetwork(ctx, BlockedNetwork, false); err != nil {
		return "", err
	}
	e.mu.Lock()
	link := e.linked[sandboxID]
	e.mu.Unlock()
	var left []string
	for n := range c.NetworkSettings.Networks {
		if n == BlockedNetwork || n == link || strings.HasPrefix(n, LinkNetworkPrefix) {
			continue
		}
		left = append(left, n)
	}
	if _, on := c.NetworkSettings.Networks[BlockedNetwork]; !on {
		if err := e.cli.NetworkConnect(ctx, BlockedNetwork, c.ID, nil); err != nil {
			return "", fmt.Errorf("move the container to %s: %w", BlockedNetwork, err)
		}
	}
	if len(left) > 0 {
		e.mu.Lock()
		if _, ok := e.home[sandboxID]; !ok {
			e.home[sandboxID] = left
		}
		e.mu.Unlock()
	}
	for _, n := range left {
		if err := e.cli.NetworkDisconnect(ctx, n, c.ID, true); err != nil && !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("take the container off %s: %w", n, err)
		}
	}
	return "", nil
}

// limitEgress confines what the sandbox's running container may reach to
// allow with the rules of egress.Limit in its network namespace (nil:
// loopback only), or lifts them when limit is false. The rules hold as the
// container has no CAP_NET_RAW (the docker runtime drops it). The note
// says why they are not set: it takes root on the engine's machine. An
// error is a limit that was set and could not be lifted.
func (e *dockerExt) limitEgress(ctx context.Context, sandboxID string, limit bool, allow []netip.Prefix) (note string, err error) {
	e.mu.Lock()
	was := e.limited[sandboxID]
	e.mu.Unlock()
	if !limit && !was {
		return "", nil
	}
	ns, err := e.netNS(ctx, sandboxID)
	if err == nil {
		defer ns.Close()
	}
	if !limit {
		if err == nil {
			err = egress.Lift(ns)
		}
		if err != nil {
			return "", fmt.Errorf("lift the sandbox's network limits: %w", err)
		}
		e.setLimited(sandboxID, false)
		return "", nil
	}
	if err == nil {
		err = egress.Limit(ns, allow)
	}
	if err != nil {
		return err.Error(), nil
	}
	e.setLimited(sandboxID, true)
	return "", nil
}

// linkSubnets are the address blocks of the link network the sandbox is
// on, if any.
func (e *dockerExt) linkSubnets(ctx context.Context, sandboxID string) []netip.Prefix {
	e.mu.Lock()
	link := e.linked[sandboxID]
	e.mu.Unlock()
	if link == "" {
		return nil
	}
	n, err := e.cli.NetworkInspect(ctx, link, network.InspectOptions{})
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, c := range n.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func (e *dockerExt) setLimited(sandboxID string, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if on {
		e.limited[sandboxID] = true
	} else {
		delete(e.limited, sandboxID)
	}
}

// netNS opens, on this machine, the network namespace of the sandbox's
// running container: the file the engine keeps it by. An engine on
// another machine, or a rootless one, keeps it where this process does not
// see it, and only root may open it. A container on a network it does not
// own, or a namespace that is this process's or the machine's, is refused,
// lest the machine's network be limited.
func (e *dockerExt) netNS(ctx context.Context, sandboxID string) (*os.File, error) {
	c, err := e.cli.ContainerInspect(ctx, e.containerName(sandboxID))
	if err != nil {
		return nil, fmt.Errorf("inspect the sandbox's container: %w", err)
	}
	if c.State == nil || !c.State.Running || c.NetworkSettings == nil || c.NetworkSettings.SandboxKey == "" {
		return nil, errors.New("the sandbox's container is not running")
	}
	if c.HostConfig != nil && (c.HostConfig.NetworkMode.IsHost() || c.HostConfig.NetworkMode.IsContainer()) {
		return nil, fmt.Errorf("the sandbox's container shares the network of %s", c.HostConfig.NetworkMode)
	}
	ns, err := os.Open(c.NetworkSettings.SandboxKey)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil, errors.New("it takes a simulator running as root on the docker engine's machine")
	case err != nil:
		return nil, fmt.Errorf("the container's network namespace is not on this machine (an engine elsewhere, or rootless?): %w", err)
	}
	if shared(ns, "/proc/self/ns/net", "/proc/1/ns/net") {
		ns.Close()
		return nil, errors.New("the sandbox's container shares this machine's network")
	}
	return ns, nil
}

// shared reports whether f is the same namespace as any of paths, or
// cannot be told apart from them.
func shared(f *os.File, paths ...string) bool {
	fi, err := f.Stat()
	if err != nil {
		return true
	}
	for _, p := range paths {
		if other, err := os.Stat(p); err == nil && os.SameFile(fi, other) {
			return true
		}
	}
	return false
}

// allowPrefixes parses a networkAllowList that checkAllowList accepted.
func allowPrefixes(list string) []netip.Prefix {
	var out []netip.Prefix
	for _, part := range strings.Split(list, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(part)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// restoreHome puts a container back on the networks it had before a block
// and off the blocked network.
func (e *dockerExt) restoreHome(ctx context.Context, sandboxID string) error {
	e.mu.Lock()
	home, ok := e.home[sandboxID]
	delete(e.home, sandboxID)
	e.mu.Unlock()
	if !ok {
		return nil
	}
	c, err := e.cli.ContainerInspect(ctx, e.containerName(sandboxID))
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect the sandbox's container: %w", err)
	}
	for _, n := range home {
		if _, on := c.NetworkSettings.Networks[n]; !on {
			if err := e.cli.NetworkConnect(ctx, n, c.ID, nil); err != nil {
				return fmt.Errorf("put the container back on %s: %w", n, err)
			}
		}
	}
	if _, on := c.NetworkSettings.Networks[BlockedNetwork]; on {
		if err := e.cli.NetworkDisconnect(ctx, BlockedNetwork, c.ID, true); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("take the container off %s: %w", BlockedNetwork, err)
		}
	}
	return nil
}

// link puts a follower and its owner on the owner's link network, where the
// owner answers to its name.
func (e *dockerExt) link(ctx context.Context, sandboxID string, l Link) error {
	name := LinkNetworkPrefix + l.OwnerID
	if err := e.ensureNetwork(ctx, name, true); err != nil {
		return err
	}
	n, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect network %s: %w", name, err)
	}
	on := map[string]bool{}
	for _, c := range n.Containers {
		on[c.Name] = true
	}
	owner := e.containerName(l.OwnerID)
	if !on[owner] {
		err := e.cli.NetworkConnect(ctx, name, owner, &network.EndpointSettings{Aliases: []string{l.OwnerName}})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("put the linked sandbox %s on %s: %w", l.OwnerName, name, err)
		}
	}
	self := e.containerName(sandboxID)
	if !on[self] {
		if err := e.cli.NetworkConnect(ctx, name, self, nil); err != nil {
			return fmt.Errorf("put the sandbox on %s: %w", name, err)
		}
	}
	e.mu.Lock()
	e.linked[sandboxID] = name
	e.linked[l.OwnerID] = name
	e.mu.Unlock()
	return nil
}

// ensureNetwork makes an internal bridge network of the simulator's unless
// it exists; icc says whether its containers may reach each other.
func (e *dockerExt) ensureNetwork(ctx context.Context, name string, icc bool) error {
	_, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect network %s: %w", name, err)
	}
	_, err = e.cli.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:   "bridge",
		Internal: true,
		Options:  map[string]string{"com.docker.network.bridge.enable_icc": fmt.Sprint(icc)},
		Labels:   map[string]string{LabelSim: "network"},
	})
	if err != nil && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("create network %s: %w", name, err)
	}
	if err == nil {
		e.note(e.networks, name, true)
	}
	return nil
}

// containerName is the name of the container of sandbox sandboxID.
func (e *dockerExt) containerName(sandboxID string) string {
	return docker.ContainerName(e.b.workloadID(sandboxID))
}
