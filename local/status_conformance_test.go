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
	// daemon answers /v1/info as a daemon named name does, and every other
	// call as a daemon that accepts the client's token (or refuses it).
	daemon := func(name string, tokenOK bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch {
			case r.URL.Path == "/v1/info":
				_ = json.NewEncoder(w).Encode(wire.Info{Name: name, APIVersion: APIVersion})
			case !tokenOK:
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":{"code":"unauthenticated","message":"missing or wrong bearer token"}}`))
			default:
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such sandbox"}}`))
			}
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
		auth    provider.AuthState // the evidence's settled answer
	}{
		{"a daemon answers", daemon("sandplane", true), "", "", provider.AuthAuthenticated},
		{"the token is refused", refuse, provider.Unauthenticated, EnvToken, provider.AuthRequired},
		{"info answers without the token, the rest refuses it", daemon("sandplane", false), provider.Unauthenticated, EnvToken, provider.AuthRequired},
		{"a squatter on the port", daemon("nginx", true), provider.Unavailable, EnvURL, provider.AuthConfigured},
		{"nothing listens", nil, provider.Unavailable, "sandplane serve", provider.AuthConfigured},
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
			assert.Equal(t, tt.auth, st.Auth.State, st.Auth.Why)
			assert.NotEmpty(t, st.Auth.Why)
		})
	}
}
