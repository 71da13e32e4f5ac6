package daytona

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sandplane/sandplane/provider"
)

var _ provider.WarmPooler = (*Provider)(nil)

// warmPool is v0.205.1's WarmPool, as much of it as provider.WarmPool says.
type warmPool struct {
	ID          string  `json:"id"`
	Snapshot    string  `json:"snapshot"`
	Target      string  `json:"target"`
	Pool        float64 `json:"pool"`
	CurrentSize float64 `json:"currentSize"`
	ErrorReason *string `json:"errorReason"`
	CreatedAt   string  `json:"createdAt"`
	UpdatedAt   string  `json:"updatedAt"`
}

func (w *warmPool) pool() *provider.WarmPool {
	out := &provider.WarmPool{
		ID: w.ID, Snapshot: w.Snapshot, Target: w.Target,
		Size: int(w.Pool), Ready: int(w.CurrentSize),
		CreatedAt: timestamp(&w.CreatedAt), UpdatedAt: timestamp(&w.UpdatedAt),
	}
	if w.ErrorReason != nil {
		out.ErrorReason = *w.ErrorReason
	}
	return out
}

// WarmPools is GET /warm-pools. See provider.WarmPooler.
func (p *Provider) WarmPools(ctx context.Context) ([]provider.WarmPool, error) {
	ctx, cancel := p.bound(ctx, requestTimeout)
	defer cancel()
	var list []warmPool
	resp, err := p.raw(ctx, http.MethodGet, "/warm-pools", nil, &list)
	if err != nil {
		return nil, p.classify(ctx, opWarmPool, resp, err)
	}
	out := make([]provider.WarmPool, 0, len(list))
	for i := range list {
		out = append(out, *list[i].pool())
	}
	return out, nil
}

// CreateWarmPool is POST /warm-pools, sent once: a lost answer is not
// retried blindly, since a second pool would double what is kept warm.
// See provider.WarmPooler.
func (p *Provider) CreateWarmPool(ctx context.Context, req provider.WarmPoolRequest) (*provider.WarmPool, error) {
	switch {
	case req.Snapshot == "":
		return nil, provider.Errorf(provider.InvalidArgument, "a warm pool needs a snapshot: name the one its sandboxes are created from")
	case req.Size < 1:
		return nil, provider.Errorf(provider.InvalidArgument, "a warm pool keeps at least 1 sandbox, got %d", req.Size)
	}
	body := map[string]any{"snapshot": req.Snapshot, "pool": req.Size}
	if t := req.Target; t != "" {
		body["target"] = t
	} else if p.cfg.Target != "" {
		body["target"] = p.cfg.Target
	}
	ctx, cancel := p.bound(sentOnce(ctx), requestTimeout)
	defer cancel()
	var w warmPool
	resp, err := p.raw(ctx, http.MethodPost, "/warm-pools", body, &w)
	if err != nil {
		return nil, p.classify(ctx, opPoolNew, resp, err)
	}
	return w.pool(), nil
}

// ResizeWarmPool is PATCH /warm-pools/{id}. See provider.WarmPooler.
func (p *Provider) ResizeWarmPool(ctx context.Context, id string, size int) (*provider.WarmPool, error) {
	if size < 0 {
		return nil, provider.Errorf(provider.InvalidArgument, "a warm pool's size must not be negative (0 drains it), got %d", size)
	}
	ctx, cancel := p.bound(ctx, requestTimeout)
	defer cancel()
	var w warmPool
	resp, err := p.raw(ctx, http.MethodPatch, "/warm-pools/"+url.PathEscape(id), map[string]any{"pool": size}, &w)
	if err != nil {
		return nil, p.classify(ctx, opWarmPool, resp, err)
	}
	return w.pool(), nil
}

// DeleteWarmPool is DELETE /warm-pools/{id}; a missing pool is no error.
// See provider.WarmPooler.
func (p *Provider) DeleteWarmPool(ctx context.Context, id string) error {
	ctx, cancel := p.bound(ctx, requestTimeout)
	defer cancel()
	resp, err := p.raw(ctx, http.MethodDelete, "/warm-pools/"+url.PathEscape(id), nil, nil)
	if err = p.classify(ctx, opWarmPool, resp, err); provider.IsNotFound(err) {
		return nil
	}
	return err
}
