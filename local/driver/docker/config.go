package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"

	"github.com/sandplane/sandplane/local/driver"
)

// Labels on every container this runtime makes.
const (
	// LabelRoot holds the daemon's root (driver.Spec.Root).
	LabelRoot = "io.sandplane.root"
	// LabelSandbox holds the sandbox id.
	LabelSandbox = "io.sandplane.sandbox"
	// LabelPrefix prefixes the sandbox's own labels.
	LabelPrefix = "io.sandplane.label."
	// labelCarried marks an image Start committed from a sandbox's
	// container to carry its filesystem over to a replacement, and so every
	// container made from it; Remove deletes the image with the container.
	labelCarried = "io.sandplane.carried"
	// labelSpec holds a digest of everything the container was created
	// from, so that Start can tell whether a stopped container still fits
	// the spec it is asked to run.
	labelSpec = "io.sandplane.spec"
)

// EnvSandboxID is set in every container to the sandbox's id.
const EnvSandboxID = "SANDPLANE_SANDBOX_ID"

// HostAlias is the name a container reaches the host by.
const HostAlias = "host.docker.internal"

// ContainerName is the name of the container of sandbox id.
func ContainerName(id string) string { return "sandplane-" + id }

// containerSpec is what ContainerCreate is called with.
type containerSpec struct {
	config *container.Config
	host   *container.HostConfig
}

func (r *Driver) containerSpec(spec driver.Spec) containerSpec {
	hostNet := spec.Network == NetworkHost
	env := make([]string, 0, len(spec.Env)+1)
	for k, v := range spec.Env {
		if k == EnvSandboxID {
			continue
		}
		if !hostNet {
			// On the host's network, localhost is the host's already.
			v = containerEnvValue(k, v)
		}
		env = append(env, k+"="+v)
	}
	env = append(env, EnvSandboxID+"="+spec.SandboxID)
	sort.Strings(env)

	labels := map[string]string{
		LabelRoot:    spec.Root,
		LabelSandbox: spec.SandboxID,
	}
	for k, v := range spec.Labels {
		labels[LabelPrefix+k] = v
	}

	// Each port of the workload is published on loopback, on the
	// sandbox's own address (spec.HostIP) where it has one: the host port
	// leads to the port it serves on in the container. IPv4 only, so that
	// nothing of the sandbox listens on [::1], which browsers resolve
	// *.localhost to as well.
	exposed, bindings := nat.PortSet{}, nat.PortMap{}
	for _, m := range spec.Mappings() {
		port := nat.Port(strconv.Itoa(m.Sandbox) + "/tcp")
		exposed[port] = struct{}{}
		bindings[port] = []nat.PortBinding{{HostIP: spec.HostAddr().String(), HostPort: strconv.Itoa(m.Host)}}
	}
	cfg := &container.Config{
		Image:        spec.Image,
		Env:          env,
		User:         spec.User,
		WorkingDir:   spec.WorkDir,
		Labels:       labels,
		ExposedPorts: exposed,
	}
	if len(spec.Command) > 0 {
		// The command is the whole argv, as for the native runtime: setting
		// the entrypoint also drops the image's CMD, which would otherwise
		// be appended as arguments.
		cfg.Entrypoint = append([]string(nil), spec.Command...)
	}
	init := r.init
	host := &container.HostConfig{
		PortBindings: bindings,
		ExtraHosts:   []string{HostAlias + ":host-gateway"},
		// A bridge without traffic between its containers: sandboxes never
		// reach each other, only the host does (and the outside world).
		NetworkMode: container.NetworkMode(r.network),
		// An init process forwards SIGTERM, so a workload that installs no
		// handler still ends on stop as it would natively, instead of
		// ignoring the signal as PID 1 and waiting out the grace.
		Init: &init,
		// No raw sockets: with them a workload writes whatever packets it
		// likes onto the bridge (another's address, ARP answers) and past
		// the firewall rules of its own namespace. ping still works, over
		// the ICMP datagram sockets the engine opens to every group.
		CapDrop: []string{"NET_RAW"},
		Resources: container.Resources{
			NanoCPUs: int64(spec.CPU) * 1e9,
			Memory:   int64(spec.MemoryGiB) << 30,
		},
	}
	if hostNet {
		// The workload binds the host's port itself: nothing to publish,
		// and no proxy in front of it.
		cfg.ExposedPorts, host.PortBindings = nil, nil
		host.NetworkMode = container.NetworkMode(NetworkHost)
	}
	for _, m := range spec.Mounts {
		mt := mount.Mount{Type: mount.TypeVolume, Source: m.Volume, Target: m.Target}
		if m.Subpath != "" {
			mt.VolumeOptions = &mount.VolumeOptions{Subpath: m.Subpath}
		}
		host.Mounts = append(host.Mounts, mt)
	}
	cfg.Labels[labelSpec] = specDigest(cfg, host)
	return containerSpec{config: cfg, host: host}
}

// specDigest identifies a container's configuration. Labels other than
// labelSpec are part of it.
func specDigest(cfg *container.Config, host *container.HostConfig) string {
	labels := make(map[string]string, len(cfg.Labels))
	for k, v := range cfg.Labels {
		if k != labelSpec {
			labels[k] = v
		}
	}
	// Limits only when set, so that the digest of a container made before
	// limits existed stays the same.
	type limits struct{ NanoCPUs, Memory int64 }
	var lim *limits
	if host.NanoCPUs != 0 || host.Memory != 0 {
		lim = &limits{host.NanoCPUs, host.Memory}
	}
	b, err := json.Marshal(struct {
		Image, User, WorkDir string
		Entrypoint, Env      []string
		Labels               map[string]string
		Ports                nat.PortMap
		ExtraHosts           []string
		Init                 *bool
		Network              container.NetworkMode `json:",omitempty"`
		Mounts               []mount.Mount         `json:",omitempty"`
		CapDrop              []string              `json:",omitempty"`
		Limits               *limits               `json:",omitempty"`
	}{cfg.Image, cfg.User, cfg.WorkingDir, cfg.Entrypoint, cfg.Env, labels, host.PortBindings, host.ExtraHosts, host.Init, host.NetworkMode, host.Mounts, host.CapDrop, lim})
	if err != nil {
		// Only strings, slices and maps of strings: Marshal cannot fail.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// containerEnvValue is the value of env var key inside the container.
func containerEnvValue(key, v string) string {
	switch key {
	case "NO_PROXY", "no_proxy":
		// These name what must not go through a proxy; inside the container
		// "localhost" is still the container, so it stays.
		return v
	}
	return RewriteLoopback(v)
}

// loopbackNames are the spellings of the host's loopback that RewriteLoopback
// replaces. "[::1]" only in brackets: a bare "::1" is too easily part of
// something else.
var loopbackNames = []string{"localhost", "127.0.0.1", "[::1]"}

// RewriteLoopback replaces every mention of the host's loopback in v
// (localhost, 127.0.0.1, [::1]) that stands as a whole host name, also inside
// URLs and host:port pairs, with host.docker.internal. "localhost.example" or
// "127.0.0.10" are left alone.
func RewriteLoopback(v string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(v); {
		if n := loopbackAt(v, i); n > 0 {
			if !changed {
				b.Grow(len(v) + len(HostAlias))
				b.WriteString(v[:i])
				changed = true
			}
			b.WriteString(HostAlias)
			i += n
			continue
		}
		if changed {
			b.WriteByte(v[i])
		}
		i++
	}
	if !changed {
		return v
	}
	return b.String()
}

// loopbackAt returns the length of the loopback name starting at v[i], or 0.
func loopbackAt(v string, i int) int {
	for _, name := range loopbackNames {
		if len(v)-i < len(name) || !strings.EqualFold(v[i:i+len(name)], name) {
			continue
		}
		if name[0] == '[' {
			return len(name)
		}
		if (i == 0 || !hostByte(v[i-1])) && (i+len(name) == len(v) || !hostByte(v[i+len(name)])) {
			return len(name)
		}
	}
	return 0
}

// hostByte reports whether c can be part of a host name or an IPv4 address.
func hostByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
}
