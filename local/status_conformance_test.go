package local

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/wire"
)

func TestStatus(t *testing.T) {
	info := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(wire.Info{Name: name, APIVersion: APIVersion})
		}
	}
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthenticated","message":"missing or wrong bearer token"}}`))
	})
	tests := []struct {
		name    string
		handler http.Handler // nil: nothing listens
		code    provider.ErrorCode
		msg     string
	}{
		{"a daemon answers", info("sandplane"), "", ""},
		{"the token is refused", refuse, provider.Unauthenticated, EnvToken},
		{"a squatter on the port", info("nginx"), provider.Unavailable, EnvURL},
		{"nothing listens", nil, provider.Unavailable, "sandplane serve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			if tt.handler == nil {
				srv.Close()
			} else {
				defer srv.Close()
			}
			p, err := New(srv.URL)
			require.NoError(t, err)
			st := p.Status(context.Background())
			assert.Equal(t, "local", st.Provider)
			assert.Equal(t, srv.URL, st.Endpoint)
			assert.True(t, st.Configured, "a daemon address always is")
			assert.Equal(t, tt.code == "", st.Authenticated)
			assert.Equal(t, tt.code == "", st.OK())
			assert.Equal(t, tt.code, st.Code)
			assert.Contains(t, st.Message, tt.msg)
		})
	}
}
