package docker

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

var (
	_ driver.Marker  = (*Driver)(nil)
	_ driver.Sweeper = (*Driver)(nil)
)

// SandboxOf returns the sandbox id h's container is labelled with; "" when
// the container is gone. unavailable.
func (r *Driver) SandboxOf(ctx context.Context, h driver.Handle) (string, error) {
	if h.ContainerID == "" {
		return "", nil
	}
	c, err := r.api(ctx).ContainerInspect(ctx, h.ContainerID)
	if cerrdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", as(provider.Unavailable, r.classify("inspect container", err))
	}
	if c.Config == nil {
		return "", nil
	}
	return c.Config.Labels[LabelSandbox], nil
}

// Sweep removes the images a replace committed for root's sandboxes that no
// container uses: what a replace interrupted between its commit and the
// start of the new container leaves. The engine refuses to remove an image
// a container (running or not) still uses, which keeps every image a
// sandbox needs. unavailable.
func (r *Driver) Sweep(ctx context.Context, root string) error {
	list, err := r.api(ctx).ImageList(ctx, image.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelRoot+"="+root), filters.Arg("label", labelCarried)),
	})
	if err != nil {
		return as(provider.Unavailable, r.classify("list images", err))
	}
	for _, img := range list {
		// The filter matches exactly; checking again keeps a misbehaving
		// engine from handing us another daemon's images.
		if img.Labels[LabelRoot] != root || img.Labels[labelCarried] == "" {
			continue
		}
		_, err := r.api(ctx).ImageRemove(ctx, img.ID, image.RemoveOptions{PruneChildren: true})
		if err != nil && !cerrdefs.IsConflict(err) && !cerrdefs.IsNotFound(err) {
			return r.classify("remove image "+img.ID, err)
		}
	}
	return nil
}
