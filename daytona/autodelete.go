package daytona

import (
	"context"

	"github.com/sandplane/sandplane/provider"
)

const opAutoDelete op = "set auto-delete interval"

var _ provider.AutoDeleter = (*Provider)(nil)

// SetAutoDeleteInterval sets Daytona's autoDeleteInterval: minutes a stopped
// sandbox stays idle before Daytona deletes it; negative disables it and 0
// makes the sandbox ephemeral (a stop deletes it). See provider.AutoDeleter.
func (p *Provider) SetAutoDeleteInterval(ctx context.Context, idOrName string, minutes int) (*provider.Sandbox, error) {
	ctx, cancel := p.bound(p.auth(ctx), requestTimeout)
	defer cancel()
	sb, resp, err := p.api.SandboxAPI.SetAutoDeleteInterval(ctx, idOrName, float32(minutes)).Execute()
	if err != nil {
		return nil, p.classify(ctx, opAutoDelete, resp, err)
	}
	return toSandbox(sb), nil
}
