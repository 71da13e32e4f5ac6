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

// Status asks the daemon who it is and whether it takes the token: GET
// /v1/info answers without one and says in its auth what the token is
// worth (a daemon whose info does not say is asked with a call that needs
// the token).
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
		err = p.tokenAccepted(ctx, info)
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

// tokenAccepted is nil when the daemon takes the token: its info says so,
// or, from a daemon whose info does not, a call that needs the token is
// answered.
func (p *Provider) tokenAccepted(ctx context.Context, info *provider.Info) error {
	if said, err := infoAuthErr(info.Auth); said {
		return err
	}
	if _, err := p.Get(ctx, statusProbe); err != nil && !provider.IsNotFound(err) {
		return err
	}
	return nil
}
