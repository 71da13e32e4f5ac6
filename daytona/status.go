package daytona

import (
	"context"

	"github.com/sandplane/sandplane/provider"
)

var _ provider.StatusReporter = (*Provider)(nil)

// Status lists one sandbox, the cheapest request that needs the API key, and
// reports what came back, without retrying: a health page wants the answer
// now. A provider exists only with a key, so it is always Configured.
func (p *Provider) Status(ctx context.Context) provider.Status {
	st := provider.Status{Provider: "daytona", Endpoint: p.cfg.APIURL, Configured: true}
	ctx, cancel := p.bound(withoutRetries(p.auth(ctx)), requestTimeout)
	defer cancel()
	_, resp, err := p.api.SandboxAPI.ListSandboxes(ctx).Limit(1).Execute()
	err = p.classify(ctx, opList, resp, err)
	st.Auth = p.creds.Auth()
	if err != nil {
		st.Code, st.Message = provider.Code(err), provider.Message(err)
		return st
	}
	st.Authenticated = true
	return st
}
