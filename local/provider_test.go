package local

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/wire"
)

func TestWarnsOnAnotherAPIVersion(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/info" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(wire.Info{Name: "sandplane", APIVersion: "v2", Version: "9.9"})
			return
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer ts.Close()
	var logs bytes.Buffer
	p, err := New(ts.URL, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	_, err = p.Create(context.Background(), provider.CreateRequest{})
	require.Error(t, err)
	assert.Equal(t, provider.Internal, provider.Code(err), "an answer without a coded body is classified by status")
	assert.Contains(t, logs.String(), "another API version")
	assert.Contains(t, logs.String(), "daemon=v2")
}

func TestErrorBodiesKeepTheirCode(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"error":{"code":"preflight_failed","message":"snapshot \"x\" is not configured"}}`))
	}))
	defer ts.Close()
	p, err := New(ts.URL)
	require.NoError(t, err)
	_, err = p.Get(context.Background(), "x")
	assert.Equal(t, provider.PreflightFailed, provider.Code(err))
	assert.Equal(t, `snapshot "x" is not configured`, provider.Message(err))
}

func TestNewValidatesTheURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:4025", "ftp://x", "http://"} {
		_, err := New(u)
		assert.Equal(t, provider.InvalidArgument, provider.Code(err), u)
	}
	t.Setenv("AGENT_CONTROL_PLANE_URL", "http://127.0.0.1:9")
	p, err := New("")
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9", p.URL())
	opened, err := provider.Open(context.Background(), "local://127.0.0.1:7")
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:7", opened.(*Provider).URL())
}

type countingTransport struct{ n int }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	return http.DefaultTransport.RoundTrip(r)
}

func TestWithHTTPClientCarriesEveryRequest(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(wire.Info{Name: "sandplane", APIVersion: APIVersion})
	}))
	defer ts.Close()
	tr := &countingTransport{}
	p, err := New(ts.URL, WithHTTPClient(&http.Client{Transport: tr}))
	require.NoError(t, err)
	_, err = p.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, tr.n)
}
