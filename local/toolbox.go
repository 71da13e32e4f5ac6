package local

import (
	"context"
	"net/http"
	"strings"

	"github.com/sandplane/sandplane/provider"
)

var _ provider.Toolboxer = (*Provider)(nil)

// defaultSnapshot is the daemon's built-in snapshot, the one that runs
// `sandplane toolbox` on the sandbox port.
const defaultSnapshot = "default"

// Toolbox returns the sandbox's preview URL and the header carrying its
// token: the default snapshot serves the toolbox API on the sandbox port, so
// no proxy stands in between. Other snapshots run whatever their config says
// and are unsupported.
func (p *Provider) Toolbox(ctx context.Context, idOrName string) (string, http.Header, error) {
	s, err := p.Get(ctx, idOrName)
	if err != nil {
		return "", nil, err
	}
	if s.Snapshot != defaultSnapshot {
		return "", nil, provider.Errorf(provider.Unsupported, "sandbox %s runs snapshot %q, which serves no toolbox API: only the %q snapshot runs `sandplane toolbox`", s.ID, s.Snapshot, defaultSnapshot)
	}
	if s.State != provider.StateStarted || s.PreviewURL == "" {
		return "", nil, provider.Errorf(provider.FailedPrecondition, "sandbox %s is %s: start it first", s.ID, s.State)
	}
	preview, err := p.PreviewURL(ctx, s.ID, 0)
	if err != nil {
		return "", nil, err
	}
	h := http.Header{}
	if preview.Token != "" {
		h.Set(provider.PreviewTokenHeader, preview.Token)
	}
	return strings.TrimSuffix(preview.URL, "/"), h, nil
}
