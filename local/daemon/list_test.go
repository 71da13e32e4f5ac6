package daemon

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/daemon/internal/api"
	"github.com/sandplane/sandplane/local/manager"
	"github.com/sandplane/sandplane/provider"
)

// The list is served from the manager's encoding, byte for byte what the
// generated response would write.
func TestListBodyIsTheGeneratedOne(t *testing.T) {
	ts, m := newTestServer(t, "")
	ctx := context.Background()
	for _, req := range []provider.CreateRequest{
		{Name: "a", Labels: map[string]string{"team": "x", "html": "<b>&</b>"}},
		{Name: "b", Labels: map[string]string{"team": "y"}},
	} {
		_, err := m.Create(ctx, req)
		require.NoError(t, err)
	}
	for _, query := range []string{"", "?label.team=x", "?label.team=none"} {
		t.Run(query, func(t *testing.T) {
			got := do(t, ts, "GET", "/v1/sandboxes"+query, "")
			require.Equal(t, 200, got.status, got.body)
			labels := map[string]string{}
			if query == "?label.team=x" {
				labels["team"] = "x"
			} else if query != "" {
				labels["team"] = "none"
			}
			items := m.List(ctx, manager.Filter{Labels: labels})
			if items == nil {
				items = []provider.Sandbox{}
			}
			want := httptest.NewRecorder()
			require.NoError(t, api.ListSandboxes200JSONResponse{Items: items}.VisitListSandboxesResponse(want))
			assert.Equal(t, want.Body.String(), got.body)
			assert.Equal(t, want.Header().Get("Content-Type"), got.header.Get("Content-Type"))
		})
	}
}
