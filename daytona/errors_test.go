package daytona

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// nest is a Daytona (NestJS) error body.
func nest(status int, message string) string {
	return fmt.Sprintf(`{"path":"/api/x","timestamp":"2025-01-01T12:00:00.000Z","statusCode":%d,"error":%q,"message":%q}`,
		status, http.StatusText(status), message)
}

func TestClassify(t *testing.T) {
	calls := map[op]func(p *Provider) error{
		opGet: func(p *Provider) error { _, err := p.Get(context.Background(), "x"); return err },
		opCreate: func(p *Provider) error {
			_, err := p.Create(context.Background(), provider.CreateRequest{})
			return err
		},
		opStart: func(p *Provider) error { _, err := p.Start(context.Background(), "x"); return err },
		opStop:  func(p *Provider) error { _, err := p.Stop(context.Background(), "x"); return err },
		opList:  func(p *Provider) error { _, err := p.List(context.Background(), provider.ListOptions{}); return err },
		opResize: func(p *Provider) error {
			_, err := p.Resize(context.Background(), "x", provider.ResizeRequest{CPU: 2})
			return err
		},
		opAutoStop: func(p *Provider) error { _, err := p.SetAutoStopInterval(context.Background(), "x", 1); return err },
		opWarmPool: func(p *Provider) error { _, err := p.ResizeWarmPool(context.Background(), "x", 1); return err },
		opPoolNew: func(p *Provider) error {
			_, err := p.CreateWarmPool(context.Background(), provider.WarmPoolRequest{Snapshot: "s", Size: 1})
			return err
		},
	}
	tests := []struct {
		name   string
		op     op
		status int
		ctype  string
		body   string
		code   provider.ErrorCode
		msg    string
	}{
		{"missing", opGet, 404, "", nest(404, "Sandbox with ID or name x not found"), provider.NotFound, "Sandbox with ID or name x not found"},
		{"name taken", opCreate, 409, "", nest(409, "Sandbox with name x already exists"), provider.AlreadyExists, "Sandbox with name x already exists"},
		{"in flight", opStop, 409, "", nest(409, "Sandbox state change in progress"), provider.FailedPrecondition, "Sandbox state change in progress"},
		{"stop of stopped", opStop, 400, "", nest(400, "Sandbox is not in a stoppable state"), provider.FailedPrecondition, "Sandbox is not in a stoppable state"},
		{"start of errored", opStart, 400, "", nest(400, "Sandbox is in an errored state"), provider.FailedPrecondition, "Sandbox is in an errored state"},
		{"bad request", opCreate, 400, "", nest(400, "name must not contain HTML tags, URLs, or control characters"), provider.InvalidArgument, "name must not contain"},
		{"unknown snapshot", opCreate, 400, "", nest(400, "Snapshot nope not found. Did you add it through the Daytona Dashboard?"), provider.PreflightFailed, "Snapshot nope not found"},
		{"failed to start", opCreate, 400, "", nest(400, "Sandbox failed to start: boom"), provider.CreateFailed, "Sandbox failed to start: boom"},
		{"setter refused", opAutoStop, 400, "", nest(400, "Auto-stop interval must be non-negative"), provider.InvalidArgument, "Auto-stop interval"},
		{"validation list", opCreate, 400, "", `{"statusCode":400,"message":["a must be x","b must be y"]}`, provider.InvalidArgument, "a must be x, b must be y"},
		{"bad key", opGet, 401, "", nest(401, "Invalid credentials"), provider.Unauthenticated, "Invalid credentials"},
		{"no permission", opList, 403, "", nest(403, "Access denied"), provider.PermissionDenied, "Access denied"},
		{"a key without the pool scope", opWarmPool, 403, "", nest(403, "Forbidden resource"), provider.PermissionDenied, "Forbidden resource"},
		{"a pool no organization may change", opWarmPool, 403, "", nest(403, "Warm pool p is the server's own"), provider.FailedPrecondition, "Warm pool p"},
		{"a pool beyond the quota", opPoolNew, 400, "", nest(400, "pool must be at most 100 (the warm pool quota)"), provider.ResourceExhausted, "quota"},
		{"a pool of the same snapshot", opPoolNew, 409, "", nest(409, "Warm pool p already keeps sandboxes of s"), provider.AlreadyExists, "Warm pool p"},
		{"a pool of an unknown snapshot", opPoolNew, 404, "", nest(404, "Snapshot s not found"), provider.PreflightFailed, "Snapshot s"},
		{"route missing", opResize, 404, "", nest(404, "Cannot POST /api/sandbox/x/resize"), provider.Unsupported, "resize is not enabled"},
		{"rate limited", opGet, 429, "", nest(429, "ThrottlerException: Too Many Requests"), provider.ResourceExhausted, "Too Many Requests"},
		{"server error", opGet, 500, "", nest(500, "An unexpected error occurred."), provider.Internal, "An unexpected error occurred."},
		{"overloaded", opGet, 503, "", nest(503, "Service Unavailable"), provider.Unavailable, "Service Unavailable"},
		{"no body", opGet, 502, "text/plain", "", provider.Unavailable, "502"},
		{"dashboard", opGet, 200, "text/html; charset=utf-8", "<html></html>", provider.InvalidArgument, "must end in /api"},
		{"undecodable", opGet, 200, "", `{"id":"x"}`, provider.Internal, "unexpected answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ct := tt.ctype
				if ct == "" {
					ct = "application/json; charset=utf-8"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			p, err := New(WithAPIKey("k"), WithAPIURL(srv.URL+"/api"), WithRetries(0))
			require.NoError(t, err)
			err = calls[tt.op](p)
			require.Error(t, err)
			assert.Equal(t, tt.code, provider.Code(err), err.Error())
			assert.Contains(t, provider.Message(err), tt.msg)
		})
	}
}

func TestMapState(t *testing.T) {
	for s, want := range map[apiclient.SandboxState]provider.State{
		apiclient.SANDBOXSTATE_STARTED:                  provider.StateStarted,
		apiclient.SANDBOXSTATE_RESIZING:                 provider.StateStarted,
		apiclient.SANDBOXSTATE_CREATING:                 provider.StateStarting,
		apiclient.SANDBOXSTATE_PULLING_SNAPSHOT:         provider.StateStarting,
		apiclient.SANDBOXSTATE_RESTORING:                provider.StateStarting,
		apiclient.SANDBOXSTATE_STOPPING:                 provider.StateStopping,
		apiclient.SANDBOXSTATE_ARCHIVING:                provider.StateStopping,
		apiclient.SANDBOXSTATE_STOPPED:                  provider.StateStopped,
		apiclient.SANDBOXSTATE_ARCHIVED:                 provider.StateStopped,
		apiclient.SANDBOXSTATE_DESTROYING:               provider.StateDestroyed,
		apiclient.SANDBOXSTATE_ERROR:                    provider.StateError,
		apiclient.SANDBOXSTATE_BUILD_FAILED:             provider.StateError,
		apiclient.SANDBOXSTATE_UNKNOWN_DEFAULT_OPEN_API: provider.StateError,
	} {
		assert.Equal(t, want, mapState(s), s)
	}
	assert.Equal(t, "boom", errorReason(apiclient.SANDBOXSTATE_ERROR, "boom"))
	assert.Contains(t, errorReason(apiclient.SANDBOXSTATE_BUILD_FAILED, ""), "build_failed", "a reasonless failed state is named")
}
