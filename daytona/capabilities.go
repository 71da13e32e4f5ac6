package daytona

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandplane/sandplane/provider"
)

// The capabilities of Daytona v0.205.1 that the pinned api-client lacks,
// sent through raw.
var (
	_ provider.TTLSetter       = (*Provider)(nil)
	_ provider.AutoPauser      = (*Provider)(nil)
	_ provider.SecretsAttacher = (*Provider)(nil)
)

// SetTTL is POST /sandbox/{id}/ttl/{minutes}: Daytona destroys the sandbox
// minutes from now, whatever it does meanwhile; 0 clears the TTL. See
// provider.TTLSetter.
func (p *Provider) SetTTL(ctx context.Context, idOrName string, minutes int) (*provider.Sandbox, error) {
	if minutes < 0 {
		return nil, provider.Errorf(provider.InvalidArgument, "the TTL must not be negative (0 clears it)")
	}
	return p.setSandbox(ctx, opTTL, fmt.Sprintf("/sandbox/%s/ttl/%d", url.PathEscape(idOrName), minutes))
}

// SetAutoPauseInterval is POST /sandbox/{id}/autopause/{minutes}. Daytona
// keeps at most one of auto-stop and auto-pause on, so a sandbox with
// auto-stop needs SetAutoStopInterval(0) first. See provider.AutoPauser.
func (p *Provider) SetAutoPauseInterval(ctx context.Context, idOrName string, minutes int) (*provider.Sandbox, error) {
	if minutes < 0 {
		return nil, provider.Errorf(provider.InvalidArgument, "the auto-pause interval must not be negative (0 disables auto-pause)")
	}
	return p.setSandbox(ctx, opPause, fmt.Sprintf("/sandbox/%s/autopause/%d", url.PathEscape(idOrName), minutes))
}

// setSandbox posts to a setter of the sandbox that answers it.
func (p *Provider) setSandbox(ctx context.Context, op op, path string) (*provider.Sandbox, error) {
	ctx, cancel := p.bound(ctx, requestTimeout)
	defer cancel()
	var sb apiclient.Sandbox
	resp, err := p.raw(ctx, http.MethodPost, path, nil, &sb)
	if err != nil {
		return nil, p.classify(ctx, op, resp, err)
	}
	return toSandbox(&sb), nil
}

// SetSecrets is PUT /sandbox/{id}/secrets. See provider.SecretsAttacher.
func (p *Provider) SetSecrets(ctx context.Context, idOrName string, secrets map[string]string) error {
	ctx, cancel := p.bound(ctx, requestTimeout)
	defer cancel()
	body := map[string]any{"secrets": mounts(secrets)}
	resp, err := p.raw(ctx, http.MethodPut, "/sandbox/"+url.PathEscape(idOrName)+"/secrets", body, nil)
	return p.classify(ctx, opSecrets, resp, err)
}

// mounts is secrets in Daytona's shape, a list of one-entry {ENV:
// secretName} objects, in the order of the env var names so that a body
// is the same each time. Never nil: an empty list detaches all.
func mounts(secrets map[string]string) []map[string]string {
	envs := make([]string, 0, len(secrets))
	for env := range secrets {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	out := make([]map[string]string, 0, len(envs))
	for _, env := range envs {
		out = append(out, map[string]string{env: secrets[env]})
	}
	return out
}

// newerCreateFields adds to body what v0.205.1's create body has and the
// pinned client's CreateSandbox lacks, in the shape SDK 0.218 sends it:
// ttlMinutes, autoPauseInterval and secrets, each only when asked for.
func newerCreateFields(body *apiclient.CreateSandbox, req provider.CreateRequest) {
	extra := map[string]any{}
	if req.TTLMinutes != 0 {
		extra["ttlMinutes"] = req.TTLMinutes
	}
	if req.AutoPauseInterval != nil {
		extra["autoPauseInterval"] = *req.AutoPauseInterval
	}
	if len(req.Secrets) > 0 {
		extra["secrets"] = mounts(req.Secrets)
	}
	if len(extra) > 0 {
		body.AdditionalProperties = extra
	}
}
