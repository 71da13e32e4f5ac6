package local

import (
	"context"
	"fmt"

	"github.com/sandplane/sandplane/provider"
)

var _ provider.StatusReporter = (*Provider)(nil)

// statusProbe names no sandbox (ids and names start with a letter or a
// digit), so that Status's authenticated call costs the daemon one lookup
// and answers not_found once the token is accepted.
const statusProbe = "-status-probe"

// Status asks the daemon who it is, then makes a call that needs the token:
// GET /v1/info answers without one, so it alone cannot tell a refused token.
// A daemon address is always configured (AGENT_CONTROL_PLANE_URL or the
// default), so what can fail is the answer: nobody listening, a token the
// daemon refuses, or something else on the port.
func (p *Provider) Status(ctx context.Context) provider.Status {
	st := provider.Status{Provider: "local", Endpoint: p.base, Configured: true}
	info, err := p.Info(ctx)
	if err == nil && info.Name != "sandplane" {
		err = provider.Errorf(provider.Unavailable, "%s answers but is not a sandplane daemon (it says %q): set %s to the daemon's address", p.base, info.Name, EnvURL)
	}
	if err == nil {
		if _, err = p.Get(ctx, statusProbe); provider.IsNotFound(err) {
			err = nil
		}
	}
	st.Auth = p.auth.Auth()
	if err != nil {
		st.Code, st.Message = provider.Code(err), provider.Message(err)
		if st.Code == provider.Unauthenticated {
			st.Message = fmt.Sprintf("%s: set %s to the token the daemon was started with", st.Message, EnvToken)
		}
		return st
	}
	st.Authenticated = true
	return st
}
