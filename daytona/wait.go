package daytona

import (
	"context"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Polling starts fast, because Daytona usually settles within a second, and
// slows down to a poll a second, as the official SDKs do.
const (
	pollFirst = 100 * time.Millisecond
	pollMax   = time.Second
)

// await polls the sandbox by id until done says so, a sandbox lands in a
// failed state (create_failed with its errorReason), or the wait timeout
// passes (unavailable). done sees nil once the sandbox is gone (404). A
// delete waits through failed states, which Daytona deletes too.
func (p *Provider) await(ctx context.Context, op op, sb *apiclient.Sandbox, done func(*apiclient.Sandbox) (bool, error)) (*apiclient.Sandbox, error) {
	wctx, cancel := p.bound(ctx, p.waitTimeout)
	defer cancel()
	delay := pollFirst
	for {
		if ok, err := done(sb); ok || err != nil {
			return sb, err
		}
		if failed(sb.GetState()) && op != opDelete {
			code := provider.Internal
			if op == opCreate || op == opStart {
				code = provider.CreateFailed
			}
			return nil, provider.Errorf(code, "%s: sandbox %s is %s: %s", op, sb.Id, sb.GetState(), errorReason(sb.GetState(), sb.GetErrorReason()))
		}
		if err := clock.Sleep(wctx, p.clk, delay); err != nil {
			if ctx.Err() != nil {
				return nil, p.classify(ctx, op, nil, err)
			}
			return nil, provider.Errorf(provider.Unavailable, "%s: sandbox %s is still %s after %v; it may yet settle: Get it later",
				op, sb.Id, sb.GetState(), p.waitTimeout)
		}
		delay = min(delay*3/2, pollMax)
		next, err := p.get(ctx, sb.Id)
		switch {
		case provider.IsNotFound(err):
			if ok, derr := done(nil); ok || derr != nil {
				return nil, derr
			}
			return nil, err
		case provider.Code(err) == provider.Unavailable && ctx.Err() == nil:
			continue // the retries gave up on this poll; the deadline decides
		case err != nil:
			return nil, err
		}
		sb = next
	}
}

// awaitStarted waits until sb is started. Create and start fail at once
// when it lands in error or build_failed.
func (p *Provider) awaitStarted(ctx context.Context, op op, sb *apiclient.Sandbox) (*apiclient.Sandbox, error) {
	return p.await(ctx, op, sb, func(sb *apiclient.Sandbox) (bool, error) {
		if sb == nil {
			return false, provider.Errorf(provider.CreateFailed, "%s: the sandbox was deleted before it started", op)
		}
		return mapState(sb.GetState()) == provider.StateStarted, nil
	})
}
