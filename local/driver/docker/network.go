package docker

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// NetworkName is the bridge network every sandbox container joins. One
// network for all, not one per sandbox: the engine's default address pools
// hold only about thirty bridge networks.
const NetworkName = "sandplane"

// Marks of the sandbox network.
const (
	// labelNetwork marks a network this runtime made for sandboxes.
	labelNetwork = "io.sandplane.network"
	// iccOption turns off traffic between the containers of a bridge.
	iccOption = "com.docker.network.bridge.enable_icc"
)

// WithNetwork puts sandbox containers on the bridge network name instead of
// NetworkName; it is made on first use, like NetworkName.
func WithNetwork(name string) Option {
	return func(r *Driver) error {
		r.network = name
		return nil
	}
}

// NetworkHost, as driver.Spec.Network, runs a sandbox on the host's network:
// no bridge, no port proxy, and no isolation of its ports from the host's
// or other sandboxes' (docs/security.md).
const NetworkHost = "host"

var _ driver.HostNetwork = (*Driver)(nil)

// SharesHostNetwork reports whether spec's container runs on the host's
// network, where its workload binds the host ports itself: nothing is
// published in front of it.
func (r *Driver) SharesHostNetwork(spec driver.Spec) bool { return spec.Network == NetworkHost }

// ensureNetwork makes the sandbox network unless it exists, and checks that
// an existing one keeps containers apart. Concurrent daemons may both try to
// make it; the loser finds the winner's. Once checked it is not looked at
// again until a create finds it gone (forgetNetwork), so that a create asks
// the engine nothing about it. A sandbox on the host's network needs none.
// create_failed, unavailable.
func (r *Driver) ensureNetwork(ctx context.Context, mode string) error {
	if mode == NetworkHost {
		return nil
	}
	r.netMu.Lock()
	defer r.netMu.Unlock()
	if r.netChecked {
		return nil
	}
	if err := r.checkNetwork(ctx); err != nil {
		return err
	}
	r.netChecked = true
	return nil
}

// forgetNetwork makes the next ensureNetwork look at the sandbox network
// again, and reports whether it had been checked: a create on host (the
// one it failed with) used it.
func (r *Driver) forgetNetwork(host *container.HostConfig) bool {
	if host.NetworkMode.IsHost() {
		return false
	}
	r.netMu.Lock()
	defer r.netMu.Unlock()
	was := r.netChecked
	r.netChecked = false
	return was
}

// checkNetwork makes the sandbox network unless it exists, and checks it.
func (r *Driver) checkNetwork(ctx context.Context) error {
	n, err := r.api(ctx).NetworkInspect(ctx, r.network, network.InspectOptions{})
	if cerrdefs.IsNotFound(err) {
		_, err = r.api(ctx).NetworkCreate(ctx, r.network, network.CreateOptions{
			Driver:  "bridge",
			Options: map[string]string{iccOption: "false"},
			Labels:  map[string]string{labelNetwork: "isolated"},
		})
		if err != nil && !cerrdefs.IsConflict(err) {
			return as(provider.CreateFailed, r.classify("create the sandbox network "+r.network, err))
		}
		n, err = r.api(ctx).NetworkInspect(ctx, r.network, network.InspectOptions{})
	}
	if err != nil {
		return as(provider.CreateFailed, r.classify("inspect the sandbox network "+r.network, err))
	}
	return isolating(n)
}

// isolating fails unless n is a bridge that keeps its containers apart.
func isolating(n network.Inspect) error {
	if n.Driver == "bridge" && n.Options[iccOption] == "false" && n.Labels[labelNetwork] == "isolated" {
		return nil
	}
	return provider.Errorf(provider.CreateFailed,
		"docker network %s exists but is not sandplane's isolated bridge (driver %q, %s=%q): sandboxes on it could reach each other; remove it (docker network rm %s) and sandplane makes its own",
		n.Name, n.Driver, iccOption, n.Options[iccOption], n.Name)
}
